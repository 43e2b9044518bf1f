#include "controller/decision/plan.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "controller/decision/plan_steps.h"
#include "controller/objects/trial_pod.h"

namespace autotune::controller {
namespace {

using namespace plan_steps;

// A trial's run as created now, before any watch reports it: queued until the scheduler places
// it.
TrialRunState pendingAttempt(const Snapshot& snapshot, const std::string& trial,
                             const RunOrdinal& ordinal) {
  TrialRunState state;
  state.phase = Phase::kQueued;
  state.trialName = trial;
  state.attempt = ordinal.attempt;
  state.preemptions = ordinal.preemptions;
  state.wantedSince = ordinal.wantedSince;
  state.run = trialRunOf(snapshot.job, trial, ordinal.attempt);
  state.created = snapshot.now;
  return state;
}

RunLaunch launchOf(const api::AutotuneJob& job, const tuning::Trial& trial,
                   const RunOrdinal& ordinal) {
  RunLaunch launch{trial.name, trialRunOf(job, trial.name, ordinal.attempt), {}, std::nullopt, {}};
  if (launch.run.carrier == TrialRun::Carrier::kPod) {
    launch.object = trialPod(job, trial, ordinal);
  } else {
    launch.object = trialBatchJob(job, trial, ordinal);
    launch.service = trialService(job, trial, ordinal.attempt);
  }
  return launch;
}

// The refusal of this reconcile's create of the trial's run, if there was one.
const RefusedCreate* refusalFor(const Learned& learned, const std::string& trial) {
  const auto found = std::ranges::find(learned.refusedCreates, trial, &RefusedCreate::trial);
  return found == learned.refusedCreates.end() ? nullptr : &*found;
}

// A create that waits (a quota, the server failing) is tried again, with backoff; one refused for
// good stops the launches.
void takeRefusal(Draft& draft, const RefusedCreate& refused, const TrialRun& run) {
  switch (refused.refusal) {
    case Refusal::kForGood:
      draft.launchesRefused =
          run.describe() + " of trial " + refused.trial + " was refused: " + refused.message;
      return;
    case Refusal::kQuota:
      draft.quotaRefusal = refused;
      break;
    case Refusal::kTransient:
      break;
  }
  ++draft.notCreatedRefused;
  draft.plan.retry = true;
}

// --- record what ended ------------------------------------------------------------------------

// The trials that finished on a node the cache holds, with a verdict on their config
// (isVerdict), are kept beyond the job, under the identity each ran with: together, in as few
// ConfigMaps as hold them.
void keepMeasurements(Draft& draft) {
  const auto& trials = draft.decision.trials;
  const api::AutotuneJob& job = draft.snapshot.job;
  std::vector<ToKeep> measurements;
  for (const auto& concluded : draft.snapshot.concluded) {
    const auto& record = concluded.result.record;
    const auto trial = std::ranges::find(trials, record.name, &tuning::Trial::name);
    if (concluded.ranOn && trial != trials.end() && isVerdict(record.outcome)) {
      measurements.push_back({identityOf(job.namespaceName(), job.spec, *trial, *concluded.ranOn),
                              record, concluded.result.measured});
    }
  }
  auto writes = measurementConfigMaps(measurements, job);
  draft.plan.measurements = std::move(writes.configMaps);
  for (const auto& trial : writes.tooLarge) {
    draft.plan.events.push_back(measurementNotKept(
        {trial},
        "its ConfigMap would be larger than " + std::to_string(kMeasurementBytes / 1024) + " KiB"));
  }
}

// The GPU models the results say their trials ran on.
std::set<std::string> gpuModelsOf(const std::vector<api::TrialRecord>& results) {
  std::set<std::string> models;
  for (const auto& record : results) {
    if (!record.gpuModel.empty()) {
      models.insert(record.gpuModel);
    }
  }
  return models;
}

// A job of no GPU model whose trials have just come to span two models is told so, once: its
// search mixes measurements of GPUs whose best configs differ.
void warnOfMixedModels(Draft& draft) {
  if (!draft.spec().gpuModels.empty()) {
    return;
  }
  const auto models = gpuModelsOf(draft.snapshot.results);
  if (models.size() > 1 && gpuModelsOf(draft.snapshot.job.status.results).size() <= 1) {
    draft.plan.events.push_back(mixedGpuModels(models));
  }
}

// The results of the trials that ended go into the status, and their runs, with the stale ones,
// to deletion once it is written.
void recordEnded(Draft& draft) {
  const Snapshot& snapshot = draft.snapshot;
  for (const auto& concluded : snapshot.concluded) {
    const TrialRunState& state = concluded.state;
    if (const auto wanted = state.wantedSince ? state.wantedSince : state.created;
        wanted && state.containerStarted) {
      draft.plan.pendingWaits.emplace_back(*state.containerStarted - *wanted);
    }
    draft.plan.finished.push_back(concluded.result.record);
    if (removable(state, draft.spec())) {
      draft.plan.deletions.push_back(state.run);
    }
  }
  keepMeasurements(draft);
  draft.status().results = snapshot.results;
  draft.status().model = snapshot.model;
  draft.plan.reused = snapshot.reused;
  if (!snapshot.reused.empty()) {
    draft.plan.events.push_back(trialsReused(snapshot.reused, draft.spec().search.metric));
  }
  warnOfMixedModels(draft);
  for (const auto& ignored : snapshot.measurementsIgnored) {
    draft.plan.events.push_back(measurementIgnored(ignored));
  }
  for (const auto& run : snapshot.staleRuns) {
    draft.plan.deletions.push_back(run);
  }
  draft.plan.releases = snapshot.settled;
}

// A trial whose run's name an object this job does not own holds is neither adopted nor deleted:
// it is recorded Failed, saying so, and the search moves on.
void recordTaken(Draft& draft, const tuning::Trial& trial, const TrialRun& run) {
  api::TrialRecord record;
  record.name = trial.name;
  record.space = trial.space;
  record.outcome = api::Outcome::kFailed;
  record.reason = run.describe() +
                  " exists and is not this job's; it is neither adopted nor deleted: delete it "
                  "to run this trial";
  record.startTime = formatTime(draft.snapshot.now);
  draft.status().results.push_back(record);
  draft.plan.finished.push_back(std::move(record));
}

// --- relaunch ---------------------------------------------------------------------------------

Relaunch whyRelaunched(const TrialRunState& state) {
  if (state.preempted) {
    return Relaunch::kPreempted;
  }
  return state.phase == Phase::kLost ? Relaunch::kLost : Relaunch::kNotMeasured;
}

// Trials whose runs were preempted, evicted or lost with their node, or never started, run again
// as a new attempt. A relaunch whose name another owner holds is recorded as a taken first name
// would be; one whose create waits keeps its trial as it was, to be relaunched again; once
// launches are refused for good, none is relaunched.
void relaunchLost(Draft& draft) {
  const Snapshot& snapshot = draft.snapshot;
  std::set<std::string> dropped;
  for (auto& state : draft.inFlight) {
    if (!shouldRelaunch(state)) {
      continue;
    }
    const auto& trials = draft.decision.trials;
    const auto trial = std::ranges::find(trials, state.trialName, &tuning::Trial::name);
    if (trial == trials.end()) {
      continue;
    }
    // Kueue would hold a new attempt as it would a first one: none until the queue exists.
    if (snapshot.queue == QueueState::kMissing) {
      continue;
    }
    const int attempt = state.attempt + 1;
    const int preemptions = state.preemptions + (state.preempted ? 1 : 0);
    const TrialRun run = trialRunOf(snapshot.job, trial->name, attempt);
    if (draft.launchesRefused || draft.nameTaken(run.name)) {
      if (!draft.launchesRefused) {
        recordTaken(draft, *trial, run);
      }
      dropped.insert(state.trialName);
      draft.plan.deletions.push_back(state.run);
      continue;
    }
    if (const RefusedCreate* refused = refusalFor(draft.learned, trial->name)) {
      takeRefusal(draft, *refused, run);
      continue;
    }
    // The trial has been wanted since its first attempt was: a relaunch's wait goes on.
    const RunOrdinal ordinal{attempt, preemptions,
                             state.wantedSince ? state.wantedSince : state.created};
    RunLaunch relaunch = launchOf(snapshot.job, *trial, ordinal);
    const Relaunch why = whyRelaunched(state);
    relaunch.replaces = RunLaunch::Replacing{
        state.run, why, trialRelaunched(trial->name, state.run, why, state.message)};
    draft.plan.launches.push_back(std::move(relaunch));
    state = pendingAttempt(snapshot, trial->name, ordinal);
  }
  std::erase_if(draft.inFlight,
                [&](const TrialRunState& state) { return dropped.contains(state.trialName); });
}

// --- launch -----------------------------------------------------------------------------------

// How many trials the engine wants started now, free GPU slots or not.
int wantedNow(const Draft& draft) {
  return static_cast<int>(std::max(draft.decision.launch.size(), draft.decision.wanted.size()));
}

void launchWanted(Draft& draft) {
  const Snapshot& snapshot = draft.snapshot;
  if (!continues(draft.decision) || !draft.slots.schedulable || draft.launchesRefused) {
    return;
  }
  // Kueue would hold every trial of a queue it does not have: none is created until it exists.
  if (snapshot.queue == QueueState::kMissing) {
    draft.notCreatedForQueue = static_cast<int>(draft.decision.launch.size());
    return;
  }
  for (const auto& trial : draft.decision.launch) {
    const TrialRun run = trialRunOf(snapshot.job, trial.name, 0);
    if (draft.nameTaken(run.name)) {
      recordTaken(draft, trial, run);
      continue;
    }
    if (const RefusedCreate* refused = refusalFor(draft.learned, trial.name)) {
      takeRefusal(draft, *refused, run);
      continue;
    }
    const RunOrdinal first{0, 0, snapshot.waitingSince};
    draft.plan.launches.push_back(launchOf(snapshot.job, trial, first));
    draft.inFlight.push_back(pendingAttempt(snapshot, trial.name, first));
  }
  draft.notCreatedForGpus =
      std::max(0, wantedNow(draft) - static_cast<int>(draft.decision.launch.size()));
}

// Trials on a node the Node cache lacks run on while the API server is asked about it.
void awaitMissingNodes(const Snapshot& snapshot, Plan& plan) {
  if (snapshot.missingNodes.awaited.empty() || api::hasEnded(plan.status.phase)) {
    return;
  }
  plan.nodesToLookUp = snapshot.missingNodes.toLookUp;
  const auto recheck = requeueFor(kNodeRecheck);
  plan.requeueAfter = std::min(plan.requeueAfter.value_or(recheck), recheck);
}

// The first trial queued past spec.queueTimeout, and why, if one is.
std::optional<std::pair<std::string, std::string>> queuedTooLong(const Draft& draft) {
  for (const auto& state : draft.inFlight) {
    if (auto why = queueTimedOut(state, draft.spec(), draft.snapshot.now)) {
      return std::pair{state.trialName, "trial " + state.trialName + " was " + std::move(*why)};
    }
  }
  return std::nullopt;
}

// Trials not created for lack of room (GPU slots, a quota) have no creation time of their own: the
// job waits with nothing running since its Running condition turned False for a queueing reason.
std::optional<std::string> waitedTooLong(const Draft& draft) {
  const api::Spec& spec = draft.spec();
  const api::Condition* running = findCondition(draft.snapshot.job.status, condition::kRunning);
  const bool waiting = draft.notCreatedForGpus + draft.notCreatedRefused > 0;
  const bool nothingRuns = std::ranges::none_of(
      draft.inFlight, [](const TrialRunState& state) { return state.phase == Phase::kRunning; });
  if (!spec.queueTimeout || !waiting || !nothingRuns || running == nullptr ||
      running->status != "False" ||
      (running->reason != queued::kWaitingForGpus && running->reason != queued::kQuotaExceeded)) {
    return std::nullopt;
  }
  const auto since = parseTime(running->lastTransitionTime);
  if (!since || draft.snapshot.now - *since < spec.queueTimeout->value()) {
    return std::nullopt;
  }
  return "trials were queued longer than spec.queueTimeout (" + spec.queueTimeout->text() +
         "): " + running->message;
}

// The WaitingForRoom condition, set while trials wait for room and put back to False once none
// does; a job that never waited has none.
void dateWaitForRoom(Draft& draft) {
  api::Status& status = draft.status();
  const api::Condition* before = findCondition(status, condition::kWaitingForRoom);
  const Snapshot& snapshot = draft.snapshot;
  if (draft.plan.waitsForRoom) {
    const bool forQuota = draft.quotaRefusal.has_value();
    setCondition(status, condition::kWaitingForRoom, true,
                 forQuota ? queued::kQuotaExceeded : queued::kWaitingForGpus,
                 forQuota ? "a trial waits for quota" : "trials wait for free nvidia.com/gpu slots",
                 snapshot.now, snapshot.generation);
  } else if (before != nullptr && before->status == "True") {
    setCondition(status, condition::kWaitingForRoom, false, "NotWaiting",
                 "no trial waits for GPUs or quota", snapshot.now, snapshot.generation);
  }
}

// Whether the job ends here, before launching, because a trial cannot run at all: it never
// started on any of its attempts, or it was queued past spec.queueTimeout.
bool failedBeforeLaunch(Draft& draft) {
  if (const auto unmeasured = std::ranges::find_if(draft.inFlight, exhaustedUnmeasured);
      unmeasured != draft.inFlight.end()) {
    failNotMeasured(draft, *unmeasured);
    return true;
  }
  if (const auto queued = queuedTooLong(draft)) {
    failQueueTimedOut(draft, queued->first, queued->second);
    return true;
  }
  return false;
}

}  // namespace

Slots slotsOf(const Snapshot& snapshot) {
  const api::Resources& resources = snapshot.job.spec.resources;
  const int lost = static_cast<int>(std::ranges::count_if(snapshot.inFlight, shouldRelaunch));
  Slots slots;
  slots.byParallelism = snapshot.job.spec.parallelism - static_cast<int>(snapshot.inFlight.size());
  // Kueue admits a queued job's trials as its quota allows: the operator counts no GPUs for it.
  slots.byGpus = snapshot.job.spec.queueName.empty() ? freeSlotsFor(snapshot.capacity, resources) -
                                                           lost - snapshot.slotsHeldForOlderJobs
                                                     : slots.byParallelism;
  slots.schedulable = fitsSomeNodes(snapshot.capacity, resources);
  return slots;
}

tuning::EngineInput question(const Snapshot& snapshot) {
  const api::Spec& spec = snapshot.job.spec;
  tuning::EngineInput input;
  input.spec = spec;
  input.jobUid = snapshot.job.uid();
  input.measured = snapshot.model;
  input.gpuMemoryBytes = gpuMemoryBytes(snapshot.capacity, spec.resources);
  input.finished = snapshot.results;
  for (const auto& state : snapshot.inFlight) {
    input.inFlight.push_back(state.trialName);
  }
  const Slots slots = slotsOf(snapshot);
  input.freeSlots = tuning::freeSlots(slots.byParallelism, slots.byGpus);
  input.roomSlots = std::max(0, slots.byParallelism);
  return input;
}

namespace plan_steps {

std::chrono::milliseconds requeueFor(std::chrono::system_clock::duration wait) {
  constexpr auto kMinRequeue = std::chrono::seconds(1);
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::max<std::chrono::system_clock::duration>(wait, kMinRequeue));
}

Draft::Draft(const Snapshot& snapshot, const tuning::Decision& decision, const Learned& learned)
    : snapshot(snapshot),
      decision(decision),
      learned(learned),
      slots(slotsOf(snapshot)),
      inFlight(snapshot.inFlight) {
  plan.status = snapshot.job.status;
  if (const api::Condition* refused = findCondition(plan.status, condition::kLaunchRefused);
      refused != nullptr && refused->status == "True") {
    launchesRefused = refused->message;
  }
}

}  // namespace plan_steps

Plan plan(const Snapshot& snapshot, const tuning::Decision& decision, const Learned& learned) {
  Draft draft(snapshot, decision, learned);
  for (const auto& pod : snapshot.foreignPods) {
    draft.plan.events.push_back(foreignPod(*pod));
  }
  if (api::hasEnded(snapshot.job.status.phase)) {
    draft.plan.deletions = snapshot.staleRuns;
    draft.plan.releases = snapshot.settled;
    draft.status().observedGeneration = snapshot.generation;
    return std::move(draft.plan);
  }
  recordEnded(draft);
  relaunchLost(draft);
  if (failedBeforeLaunch(draft)) {
    dateWaitForRoom(draft);
    return std::move(draft.plan);
  }
  launchWanted(draft);
  if (const auto waited = waitedTooLong(draft)) {
    failQueueTimedOut(draft, "waiting", *waited);
  } else if (draft.launchesRefused && draft.inFlight.empty()) {
    failLaunchRefused(draft);
  } else if (!continues(decision) && draft.inFlight.empty()) {
    endSearch(draft);
  } else {
    goOn(draft);
  }
  dateWaitForRoom(draft);
  Plan paced = pace(std::move(draft));
  awaitMissingNodes(snapshot, paced);
  return paced;
}

Plan refuse(const CachedAutotuneJob& job, const api::FieldErrors& errors, Timestamp now) {
  const std::string message = listed(errors, kConditionMessageBytes);
  Plan refused;
  api::Status& status = refused.status;
  status = job.status;
  status.phase = api::Phase::kFailed;
  status.observedGeneration = job.generation;
  status.message = message;
  setCondition(status, condition::kSpecValid, false, "InvalidSpec", message, now, job.generation);
  setCondition(status, condition::kFailed, true, "InvalidSpec", message, now, job.generation);
  refused.events.push_back(invalidSpec(message));
  return refused;
}

Plan reconcileThrew(const CachedAutotuneJob& job, const std::string& message, Timestamp now) {
  Plan threw;
  threw.status = job.status;
  setCondition(threw.status, condition::kReconciled, false, "ReconcileException", message, now,
               job.generation);
  threw.events.push_back(reconcileException(message));
  return threw;
}

}  // namespace autotune::controller
