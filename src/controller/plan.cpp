#include "controller/plan.h"

#include <algorithm>
#include <utility>

#include "controller/plan_steps.h"
#include "controller/trial_pod.h"

namespace autotune::controller {
namespace {

using namespace plan_steps;

// How long a status write that would only move trials between pending and running waits for the
// next write that records something, so that Pods starting cost no write each.
constexpr auto kLiveCountsInterval = std::chrono::seconds(30);
// How long a trial that ended waits for others of its job to end, to be recorded with them.
constexpr auto kConclusionBatch = std::chrono::seconds(5);

// A trial's run as created now, before any watch reports it.
TrialRunState pendingAttempt(const Snapshot& snapshot, const std::string& trial, int attempt) {
  TrialRunState state;
  state.trialName = trial;
  state.attempt = attempt;
  state.run = trialRunOf(snapshot.job, trial, attempt);
  state.created = snapshot.now;
  return state;
}

RunLaunch launchOf(const api::AutotuneJob& job, const tuning::Trial& trial, int attempt) {
  RunLaunch launch{trial.name, trialRunOf(job, trial.name, attempt), {}, std::nullopt, {}};
  if (launch.run.carrier == TrialRun::Carrier::kPod) {
    launch.object = trialPod(job, trial, attempt);
  } else {
    launch.object = trialBatchJob(job, trial, attempt);
    launch.service = trialService(job, trial, attempt);
  }
  return launch;
}

// --- record what ended ------------------------------------------------------------------------

// The results of the trials that ended go into the status, and their runs, with the stale ones,
// to deletion once it is written.
void recordEnded(Draft& draft) {
  const Snapshot& snapshot = draft.snapshot;
  for (const auto& [state, result] : snapshot.concluded) {
    if (state.created && state.containerStarted) {
      draft.plan.pendingWaits.emplace_back(*state.containerStarted - *state.created);
    }
    draft.plan.finished.push_back(result.record);
    if (removable(state, draft.spec())) {
      draft.plan.deletions.push_back(state.run);
    }
  }
  draft.status().results = snapshot.results;
  draft.status().model = snapshot.model;
  for (const auto& run : snapshot.staleRuns) {
    draft.plan.deletions.push_back(run);
  }
}

// --- relaunch ---------------------------------------------------------------------------------

// Trials whose runs were evicted or lost with their node, or never started, run again as a new
// attempt.
void relaunchLost(Draft& draft) {
  for (auto& state : draft.inFlight) {
    if (!shouldRelaunch(state)) {
      continue;
    }
    const auto& trials = draft.decision.trials;
    const auto trial = std::ranges::find(trials, state.trialName, &tuning::Trial::name);
    if (trial == trials.end()) {
      continue;
    }
    RunLaunch relaunch = launchOf(draft.snapshot.job, *trial, state.attempt + 1);
    const Relaunch why = state.phase == Phase::kLost ? Relaunch::kLost : Relaunch::kNotMeasured;
    relaunch.replaces = RunLaunch::Replacing{
        state.run, why, trialRelaunched(trial->name, state.run, why, state.message)};
    draft.plan.launches.push_back(std::move(relaunch));
    state = pendingAttempt(draft.snapshot, trial->name, state.attempt + 1);
  }
}

// --- launch -----------------------------------------------------------------------------------

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

void launchWanted(Draft& draft) {
  if (!continues(draft.decision) || !draft.slots.schedulable) {
    return;
  }
  for (const auto& trial : draft.decision.launch) {
    const TrialRun run = trialRunOf(draft.snapshot.job, trial.name, 0);
    if (draft.snapshot.namesTaken.contains(run.name)) {
      recordTaken(draft, trial, run);
      continue;
    }
    draft.plan.launches.push_back(launchOf(draft.snapshot.job, trial, 0));
    draft.inFlight.push_back(pendingAttempt(draft.snapshot, trial.name, 0));
  }
}

// --- pace -------------------------------------------------------------------------------------

// When the trials that ended may be recorded together with those about to end: they ended while
// others of the job run on, and their results start nothing new. Nothing is lost meanwhile:
// their runs stay until the status holds them. Nothing when they are to be recorded now.
std::optional<Timestamp> conclusionsDue(const Snapshot& snapshot,
                                        const tuning::Decision& decision) {
  if (snapshot.concluded.empty() || hasEnded(snapshot.job.status.phase) ||
      snapshot.inFlight.empty() || !continues(decision) || !decision.launch.empty() ||
      std::ranges::any_of(snapshot.inFlight, shouldRelaunch) ||
      std::ranges::any_of(snapshot.inFlight, exhaustedUnmeasured)) {
    return std::nullopt;
  }
  std::optional<Timestamp> earliest;
  for (const auto& [state, result] : snapshot.concluded) {
    // An end after now means the node's clock runs ahead: waiting on it could last that long.
    if (!state.containerFinished || *state.containerFinished > snapshot.now) {
      return std::nullopt;
    }
    earliest = std::min(earliest.value_or(*state.containerFinished), *state.containerFinished);
  }
  const Timestamp due = *earliest + kConclusionBatch;
  return snapshot.now < due ? std::optional(due) : std::nullopt;
}

// Whether `planned` differs from `written` only in how many trials wait and run.
bool onlyLiveCountsChanged(const api::Status& planned, const api::Status& written) {
  if (planned.trials == written.trials) {
    return false;
  }
  api::Status same = planned;
  same.trials.pending = written.trials.pending;
  same.trials.running = written.trials.running;
  return same == written;
}

// The last step: whether the status is written now. Trials that ended wait a few seconds for
// their siblings, so that one write and one Event record them all; counts that only moved
// between pending and running wait for the next write, or for kLiveCountsInterval after the
// last one. Either way the written status stays, and the job looks again when the wait ends.
Plan pace(Draft draft) {
  const Snapshot& snapshot = draft.snapshot;
  if (const auto due = conclusionsDue(snapshot, draft.decision)) {
    Plan held;
    held.status = snapshot.job.status;
    held.deletions = snapshot.staleRuns;
    held.requeueAfter = requeueFor(*due - snapshot.now);
    return held;
  }
  const api::Status& written = snapshot.job.status;
  if (snapshot.statusWrittenAt && onlyLiveCountsChanged(draft.status(), written)) {
    if (const auto due = *snapshot.statusWrittenAt + kLiveCountsInterval; snapshot.now < due) {
      draft.status() = written;
      draft.requeueWithin(due - snapshot.now);
    }
  }
  return std::move(draft.plan);
}

// Trials on a node the Node cache lacks run on while the API server is asked about it.
void awaitMissingNodes(const Snapshot& snapshot, Plan& plan) {
  if (snapshot.missingNodes.awaited.empty() || hasEnded(plan.status.phase)) {
    return;
  }
  plan.nodesToLookUp = snapshot.missingNodes.toLookUp;
  const auto recheck = requeueFor(kNodeRecheck);
  plan.requeueAfter = std::min(plan.requeueAfter.value_or(recheck), recheck);
}

}  // namespace

namespace plan_steps {

runtime::Duration requeueFor(std::chrono::system_clock::duration wait) {
  constexpr auto kMinRequeue = std::chrono::seconds(1);
  return std::chrono::duration_cast<runtime::Duration>(
      std::max<std::chrono::system_clock::duration>(wait, kMinRequeue));
}

}  // namespace plan_steps

int Slots::free() const { return std::max(0, std::min(byParallelism, byGpus)); }

Slots slotsOf(const Snapshot& snapshot) {
  const api::Resources& resources = snapshot.job.spec.resources;
  const TrialShape shape{resources.gpusPerTrial, resources.nodesPerTrial};
  const int lost = static_cast<int>(std::ranges::count_if(snapshot.inFlight, shouldRelaunch));
  Slots slots;
  slots.byParallelism = snapshot.job.spec.parallelism - static_cast<int>(snapshot.inFlight.size());
  slots.byGpus = freeSlotsFor(snapshot.capacity, shape) - lost - snapshot.slotsHeldForOlderJobs;
  slots.schedulable = fitsSomeNodes(snapshot.capacity, shape);
  return slots;
}

tuning::EngineInput question(const Snapshot& snapshot) {
  const api::Spec& spec = snapshot.job.spec;
  tuning::EngineInput input;
  input.spec = spec;
  input.jobUid = snapshot.job.uid();
  input.measured = snapshot.model;
  input.gpuMemoryBytes = gpuMemoryBytes(
      snapshot.capacity, TrialShape{spec.resources.gpusPerTrial, spec.resources.nodesPerTrial});
  input.finished = snapshot.results;
  for (const auto& state : snapshot.inFlight) {
    input.inFlight.push_back(state.trialName);
  }
  input.freeSlots = slotsOf(snapshot).free();
  return input;
}

Plan plan(const Snapshot& snapshot, const tuning::Decision& decision) {
  Draft draft{snapshot, decision, slotsOf(snapshot), snapshot.inFlight, {}};
  draft.plan.status = snapshot.job.status;
  if (hasEnded(snapshot.job.status.phase)) {
    draft.plan.deletions = snapshot.staleRuns;
    return std::move(draft.plan);
  }
  recordEnded(draft);
  relaunchLost(draft);
  if (const auto unmeasured = std::ranges::find_if(draft.inFlight, exhaustedUnmeasured);
      unmeasured != draft.inFlight.end()) {
    const TrialRunState given = *unmeasured;
    failNotMeasured(draft, given);
    return std::move(draft.plan);
  }
  launchWanted(draft);
  if (!continues(decision) && draft.inFlight.empty()) {
    endSearch(draft);
  } else {
    goOn(draft);
  }
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

api::Status reconcileThrew(const CachedAutotuneJob& job, const std::string& message,
                           Timestamp now) {
  api::Status status = job.status;
  setCondition(status, condition::kReconciled, false, "ReconcileException", message, now,
               job.generation);
  return status;
}

}  // namespace autotune::controller
