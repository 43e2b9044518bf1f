#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/labels.h"
#include "api/text.h"
#include "controller/decision/plan_steps.h"
#include "controller/objects/output.h"
#include "controller/objects/trial_pod.h"
#include "object/read.h"
#include "tuning/results.h"

namespace autotune::controller::plan_steps {
namespace {

api::TrialCounts countsOf(const std::vector<api::TrialRecord>& results) {
  api::TrialCounts counts;
  for (const auto& record : results) {
    switch (record.outcome) {
      case api::Outcome::kSucceeded:
        ++counts.succeeded;
        break;
      case api::Outcome::kOOM:
        ++counts.oom;
        break;
      case api::Outcome::kTimedOut:
        ++counts.timedOut;
        break;
      default:
        ++counts.failed;
    }
  }
  return counts;
}

void markSpecRead(Draft& draft) {
  const Snapshot& snapshot = draft.snapshot;
  api::Status& status = draft.status();
  status.observedGeneration = snapshot.generation;
  if (status.startTime.empty()) {
    status.startTime = formatTime(snapshot.now);
  }
  setCondition(status, condition::kSpecValid, true, "Valid", "the spec is valid", snapshot.now,
               snapshot.generation);
  if (const auto* reconciled = findCondition(status, condition::kReconciled);
      reconciled != nullptr && reconciled->status == "False") {
    setCondition(status, condition::kReconciled, true, "Recovered", "the reconcile succeeds again",
                 snapshot.now, snapshot.generation);
  }
  if (snapshot.job.status.observedGeneration != snapshot.generation && !snapshot.warnings.empty()) {
    draft.plan.events.push_back(specWarning(snapshot.generation, snapshot.warnings));
  }
  const api::Condition* refused = findCondition(status, condition::kLaunchRefused);
  if (draft.launchesRefused && (refused == nullptr || refused->status != "True")) {
    setCondition(status, condition::kLaunchRefused, true, "LaunchRefused", *draft.launchesRefused,
                 snapshot.now, snapshot.generation);
    draft.plan.events.push_back(launchRefused(*draft.launchesRefused));
  }
}

// To a ten-thousandth of a GPU-hour, as people read them: the status changes only when the
// figures do.
api::GpuHours roundedGpuHours(api::GpuHours hours) {
  constexpr double kSteps = 10000;
  const auto round = [](double value) { return std::round(value * kSteps) / kSteps; };
  hours.used = round(hours.used);
  hours.saved = round(hours.saved);
  for (auto& [outcome, value] : hours.usedByOutcome) {
    value = round(value);
  }
  return hours;
}

// What every plan that goes on or ends the search says: the counts, the trials in flight, the
// spaces' table, the trials recorded now and the best.
void summarise(Draft& draft) {
  markSpecRead(draft);
  api::Status& status = draft.status();
  const api::Spec& spec = draft.spec();
  api::TrialCounts counts = countsOf(status.results);
  counts.reused = static_cast<int>(std::ranges::count_if(
      status.results, [](const api::TrialRecord& record) { return !record.reusedFrom.empty(); }));
  counts.launched = static_cast<int>(status.results.size() + draft.inFlight.size()) - counts.reused;
  counts.pruned = static_cast<int>(draft.decision.pruned.size());
  status.trials = counts;
  status.inFlight.clear();
  for (const auto& state : draft.inFlight) {
    status.inFlight.push_back({state.trialName, state.attempt, state.preemptions});
  }
  status.spaces = tuning::summarizeSpaces(status.results, spec.search.metric);
  status.gpuHours =
      roundedGpuHours(tuning::gpuHoursOf(status.results, spec.resources.gpusPerTrial));
  for (auto& event : trialsEnded(draft.plan.finished, spec.search.metric)) {
    draft.plan.events.push_back(std::move(event));
  }
  const tuning::Decision& decision = draft.decision;
  if (decision.best && decision.bestValue) {
    const std::string previous = status.best ? status.best->trial : "";
    status.best = tuning::bestTrial(*decision.best, *decision.bestValue, spec.search.metric,
                                    tuning::baselineValue(status.results), spec.resources);
    if (status.best->trial != previous) {
      draft.plan.events.push_back(bestImproved(*status.best, spec.search.metric));
    }
  }
}

// Which nodes the operator looks at, where it does not look at every one: a GPU node without the
// label is the likeliest reason why none fits.
std::string ofTheNodesWatched(const GpuCapacity& capacity) {
  if (capacity.nodeSelector.empty()) {
    return "";
  }
  return " (of the nodes labelled " + capacity.nodeSelector +
         ", the only ones the operator watches: its --node-selector)";
}

// A job of one GPU model (spec.gpuModels) that no schedulable node watched offers.
bool modelUnavailable(const GpuCapacity& capacity) {
  return !capacity.model.empty() && capacity.nodes.empty();
}

std::string modelUnavailableBecause(const GpuCapacity& capacity) {
  std::string offered;
  for (const auto& model : capacity.otherModels) {
    offered += (offered.empty() ? "" : ", ") + (model.empty() ? "none labelled" : model);
  }
  return "no schedulable node offers GPU model " + capacity.model + " (spec.gpuModels, the label " +
         std::string(api::kGpuProductLabel) + "); " +
         (offered.empty() ? "no node has GPUs" : "the nodes with GPUs offer " + offered) +
         ofTheNodesWatched(capacity);
}

std::string unschedulableBecause(const api::Resources& resources, const GpuCapacity& capacity) {
  const int perNode = resources.gpusPerNode();
  const std::string ofModel =
      capacity.model.empty() ? "" : " of GPU model " + capacity.model + " (spec.gpuModels)";
  if (resources.nodesPerTrial > 1) {
    const auto enough = std::ranges::count_if(
        capacity.nodes, [&](const NodeGpus& node) { return holdsARank(node, resources); });
    return "fewer than " + std::to_string(resources.nodesPerTrial) + " schedulable nodes" +
           ofModel + " (spec.resources.nodesPerTrial) have " + std::to_string(perNode) +
           " allocatable nvidia.com/gpu (spec.resources.gpusPerTrial / nodesPerTrial); " +
           std::to_string(enough) + " have" + ofTheNodesWatched(capacity);
  }
  int largest = 0;
  for (const auto& node : capacity.nodes) {
    largest = std::max(largest, node.allocatable);
  }
  return "no schedulable node" + ofModel + " has " + std::to_string(resources.gpusPerTrial) +
         " allocatable nvidia.com/gpu (spec.resources.gpusPerTrial); the largest has " +
         std::to_string(largest) + ofTheNodesWatched(capacity);
}

std::optional<std::chrono::milliseconds> nextDeadline(const Draft& draft) {
  std::optional<Timestamp> soonest;
  for (const auto& state : draft.inFlight) {
    if (const auto due = deadline(state, draft.spec()); due && (!soonest || *due < *soonest)) {
      soonest = due;
    }
  }
  if (!soonest) {
    return std::nullopt;
  }
  return requeueFor(*soonest - draft.snapshot.now + std::chrono::milliseconds(100));
}

api::Phase phaseOf(const Draft& draft) {
  const bool profiling = std::ranges::any_of(draft.inFlight, [](const TrialRunState& state) {
    return state.trialName == tuning::kProfileTrialName;
  });
  if (profiling) {
    return api::Phase::kProfiling;
  }
  if (!draft.inFlight.empty() || !draft.plan.status.results.empty()) {
    return api::Phase::kRunning;
  }
  return api::Phase::kPending;
}

void endRunning(Draft& draft, bool succeeded, std::string_view reason, const std::string& message) {
  api::Status& status = draft.status();
  status.phase = succeeded ? api::Phase::kSucceeded : api::Phase::kFailed;
  status.completionTime = formatTime(draft.snapshot.now);
  status.trials.pending = 0;
  status.trials.running = 0;
  status.message = message;
  draft.setRunning(false, succeeded ? "Completed" : "Failed", message);
  setCondition(status, succeeded ? condition::kComplete : condition::kFailed, true, reason, message,
               draft.snapshot.now, draft.snapshot.generation);
}

// One Warning Event per quota that refuses creates, not one per refusal: said again only when
// the status did not already name that quota.
void tellQuotaRefusal(Draft& draft, const std::string& serverMessage) {
  const api::Condition* running = findCondition(draft.snapshot.job.status, condition::kRunning);
  const bool told = running != nullptr && running->reason == queued::kQuotaExceeded &&
                    object::exceededQuota(running->message) == object::exceededQuota(serverMessage);
  if (!told) {
    draft.plan.events.push_back(quotaExceeded(serverMessage));
  }
}

// Why nothing is created while spec.queueName names no LocalQueue.
std::string localQueueMissing(const Draft& draft) {
  const api::AutotuneJob& job = draft.snapshot.job;
  return "Kueue LocalQueue " + job.spec.queueName +
         " (spec.queueName) does not exist in namespace " + job.namespaceName() +
         ": no trial is created until it does; create it, or name an existing one";
}

// An Event for what the Running condition says now, unless it said so already.
void tellOnce(Draft& draft, std::string_view reason, JobEvent event) {
  const api::Condition* running = findCondition(draft.snapshot.job.status, condition::kRunning);
  if (running == nullptr || running->reason != reason) {
    draft.plan.events.push_back(std::move(event));
  }
}

// What the trials in flight wait for: how many wait, and one of each kind, named, for the
// Running condition to say.
struct Waits {
  int pending = 0;
  int queued = 0;
  int awaitingAdmission = 0;
  std::string queuedFor;
  std::string admissionFor;
  std::string cannotStart;
};

Waits waitsOf(const std::vector<TrialRunState>& inFlight) {
  Waits waits;
  for (const auto& state : inFlight) {
    if (state.phase == Phase::kRunning) {
      continue;
    }
    ++waits.pending;
    if (state.phase == Phase::kQueued && state.awaitingAdmission) {
      ++waits.queued;
      ++waits.awaitingAdmission;
      waits.admissionFor = state.run.name + " " + state.message;
    } else if (state.phase == Phase::kQueued && state.heldBack) {
      ++waits.queued;
      waits.queuedFor = state.run.name + ": " + state.message;
    } else if (containerCannotStart(state)) {
      waits.cannotStart = state.run.name + ": " + state.message;
    }
  }
  return waits;
}

// The Running condition and the status message: what holds the search back, first things first,
// else that it searches.
void sayWhatHoldsItBack(Draft& draft, const Waits& waits) {
  api::Status& status = draft.status();
  const bool someRun = status.trials.running > 0;
  const auto say = [&](std::string_view reason, std::string message) {
    status.message = std::move(message);
    draft.setRunning(someRun, reason, status.message);
  };
  if (draft.launchesRefused) {
    say("LaunchRefused", "no more trials are launched (" + *draft.launchesRefused +
                             "); the job fails once the trials in flight are recorded");
  } else if (draft.snapshot.queue == QueueState::kMissing) {
    const std::string message = localQueueMissing(draft);
    tellOnce(draft, queued::kLocalQueueNotFound, localQueueNotFound(message));
    say(queued::kLocalQueueNotFound, message);
  } else if (draft.quotaRefusal) {
    tellQuotaRefusal(draft, draft.quotaRefusal->message);
    say(queued::kQuotaExceeded, "a trial waits for quota: " + draft.quotaRefusal->message);
  } else if (!waits.admissionFor.empty()) {
    say(queued::kWaitingForAdmission, "a trial " + waits.admissionFor);
  } else if (!waits.queuedFor.empty()) {
    say(queued::kQueued, "a trial is queued: " + waits.queuedFor);
  } else if (!waits.cannotStart.empty()) {
    say("ContainerCannotStart", "a trial's container cannot start: " + waits.cannotStart);
  } else if (draft.notCreatedForGpus > 0) {
    say(queued::kWaitingForGpus, "waiting for free nvidia.com/gpu slots");
  } else {
    status.message = draft.decision.message;
    draft.setRunning(true, "Searching",
                     "trials in flight: " + std::to_string(draft.inFlight.size()));
  }
}

}  // namespace

// The search goes on: how many trials wait and run, and the Running condition saying what
// holds it back, if anything does.
void goOn(Draft& draft) {
  summarise(draft);
  api::Status& status = draft.status();
  const Waits waits = waitsOf(draft.inFlight);
  status.trials.pending = waits.pending;
  status.trials.running = static_cast<int>(draft.inFlight.size()) - waits.pending;
  status.trials.queued =
      waits.queued + draft.notCreatedForGpus + draft.notCreatedRefused + draft.notCreatedForQueue;
  status.trials.awaitingAdmission = waits.awaitingAdmission;
  status.phase = phaseOf(draft);
  if (!draft.slots.schedulable) {
    const GpuCapacity& capacity = draft.snapshot.capacity;
    const bool noModel = modelUnavailable(capacity);
    status.message = noModel ? modelUnavailableBecause(capacity)
                             : unschedulableBecause(draft.spec().resources, capacity);
    draft.setRunning(false, noModel ? "GpuModelUnavailable" : "Unschedulable", status.message);
    draft.plan.waitsForNode = true;
    draft.plan.requeueAfter = kWaitingRecheck;
    return;
  }
  sayWhatHoldsItBack(draft, waits);
  draft.plan.requeueAfter = nextDeadline(draft);
  if (const auto overdue = draft.snapshot.workloadOverdueAt) {
    draft.requeueWithin(*overdue - draft.snapshot.now);
  }
  draft.plan.waitsForRoom = draft.notCreatedForGpus > 0 || draft.quotaRefusal.has_value();
  if (draft.notCreatedForGpus > 0) {
    const int gpus = draft.notCreatedForGpus * draft.spec().resources.gpusPerTrial;
    draft.plan.gpusWaitedFor = std::min(gpus, draft.snapshot.capacity.total());
    draft.requeueWithin(kWaitingRecheck);
  }
}

void failQueueTimedOut(Draft& draft, const std::string& subject, const std::string& message) {
  summarise(draft);
  const std::string said =
      message + "; the job stops here, keeping its results: create it again to go on";
  endRunning(draft, false, "QueueTimeout", said);
  draft.status().inFlight.clear();
  draft.plan.events.push_back(queueTimedOut(subject, said));
}

void failLaunchRefused(Draft& draft) {
  summarise(draft);
  const std::string said = *draft.launchesRefused +
                           "; no trial of this job can run: mend the template (or what refused it) "
                           "and create the job again";
  endRunning(draft, false, "LaunchRefused", said);
  draft.plan.events.push_back(searchFailed(said));
}

// A trial that never started on any of its attempts: nothing is known of its config, and the
// search cannot go on without it. The job fails, saying why; its results stay.
void failNotMeasured(Draft& draft, const TrialRunState& state) {
  summarise(draft);
  const std::string message = "trial " + state.trialName + " was not measured in " +
                              std::to_string(state.attempt + 1) + " attempts, the last " +
                              state.message +
                              "; nothing is known of its config, so the search cannot go on: "
                              "remove the cause and create the job again";
  endRunning(draft, false, "TrialNotMeasured", message);
  draft.status().inFlight.clear();
  draft.plan.events.push_back(trialNotMeasured(state.trialName, message));
  draft.plan.deletions.push_back(state.run);
}

// The end of the search: the output, then the final status.
void endSearch(Draft& draft) {
  summarise(draft);
  const Snapshot& snapshot = draft.snapshot;
  const tuning::Decision& decision = draft.decision;
  const api::Spec& spec = draft.spec();
  api::Status& status = draft.status();
  status.trials.pending = 0;
  status.trials.running = 0;
  status.message = decision.message;
  const bool succeeded =
      decision.state == tuning::Decision::State::kSucceeded && decision.best.has_value();
  if (!succeeded) {
    endRunning(draft, false, "SearchFailed", decision.message);
    draft.plan.events.push_back(searchFailed(decision.message));
    return;
  }
  if (draft.learned.outputRefused) {
    awaitOutput(draft.plan, *draft.learned.outputRefused, spec.output.configMapName, snapshot.now,
                snapshot.generation);
    return;
  }
  const double elapsed = std::chrono::duration<double>(
                             snapshot.now - parseTime(status.startTime).value_or(snapshot.now))
                             .count();
  api::AutotuneJob recorded = snapshot.job;
  recorded.status = status;
  draft.plan.output = outputConfigMap(recorded, *decision.best, decision.trials, elapsed);
  if (status.best) {
    status.best->config = tuning::optimalConfig(*decision.best, spec);
  }
  const std::string& configMap = spec.output.configMapName;
  setCondition(status, condition::kOutputWritten, true, "Written", "ConfigMap " + configMap,
               snapshot.now, snapshot.generation);
  const std::string afterTuningName = afterTuningJobName(snapshot.job.name());
  if (spec.afterTuning && draft.learned.afterTuningTaken) {
    setCondition(status, condition::kAfterTuningFailed, true, "NameTaken",
                 "Job " + afterTuningName + " exists and is not this job's (" +
                     *draft.learned.afterTuningTaken + ")",
                 snapshot.now, snapshot.generation);
    draft.plan.events.push_back(
        afterTuningNameTaken(afterTuningName, *draft.learned.afterTuningTaken));
  } else if (spec.afterTuning && draft.learned.afterTuningRefused) {
    setCondition(status, condition::kAfterTuningFailed, true, "CreateRefused",
                 api::headOf(*draft.learned.afterTuningRefused, kConditionMessageBytes),
                 snapshot.now, snapshot.generation);
    draft.plan.events.push_back(afterTuningRefused(*draft.learned.afterTuningRefused));
  } else if (spec.afterTuning) {
    draft.plan.afterTuning = afterTuningJob(snapshot.job, *decision.best);
    status.afterTuningJob = afterTuningName;
  }
  endRunning(draft, true, "SearchCompleted", decision.message);
  draft.plan.events.push_back(searchCompleted(*status.best, decision.message, configMap));
}

}  // namespace autotune::controller::plan_steps

namespace autotune::controller {

void awaitOutput(Plan& plan, const OutputRefusal& refusal, const std::string& configMap,
                 Timestamp now, std::int64_t generation) {
  const std::string why = refusal.reason == kOutputConflict
                              ? "it exists and is not this job's output (" + refusal.detail +
                                    "), so it is left as it is; delete it, or create the job "
                                    "again with another spec.output.configMapName"
                              : refusal.detail;
  const std::string message =
      api::headOf("ConfigMap " + configMap + " could not be written: " + why, kEventMessageBytes);
  const api::Condition* told = findCondition(plan.status, condition::kOutputWritten);
  if (told == nullptr || told->status != "False" || told->message != message) {
    plan.events.push_back(outputNotWritten(refusal.reason, message));
  }
  setCondition(plan.status, condition::kOutputWritten, false, refusal.reason, message, now,
               generation);
  setCondition(plan.status, condition::kRunning, false, "OutputPending",
               "the search is over; " + message, now, generation);
}

}  // namespace autotune::controller
