#pragma once
// The steps plan() (plan.h) chains, shared by the files that hold them: plan.cpp records what
// ended, relaunches, launches and paces; summary.cpp says where the search stands. Nothing else
// includes this.

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "controller/decision/plan.h"
#include "controller/objects/conditions.h"

namespace autotune::controller::plan_steps {

using Phase = TrialRunState::Phase;

// How often a job that waits (for a node that can hold its trials, or for free GPUs) looks again,
// besides the wake-ups Node and Pod changes give it.
inline constexpr auto kWaitingRecheck = std::chrono::seconds(30);

inline bool continues(const tuning::Decision& decision) {
  return decision.state == tuning::Decision::State::kContinue;
}

inline bool exhaustedUnmeasured(const TrialRunState& state) {
  return state.phase == Phase::kNotMeasured && !shouldRelaunch(state);
}

// A wait, at least a second, as a requeue.
std::chrono::milliseconds requeueFor(std::chrono::system_clock::duration wait);

// The plan in the making, passed from step to step.
struct Draft {
  Draft(const Snapshot& snapshot, const tuning::Decision& decision, const Learned& learned);

  const Snapshot& snapshot;
  const tuning::Decision& decision;
  const Learned& learned;
  const Slots slots;
  std::vector<TrialRunState> inFlight;  // after this plan's relaunches and launches
  Plan plan;
  // Trials the engine wants started now that were not: for lack of free GPU slots by the
  // operator's count, and because their creates were refused (a quota, or the server failing).
  int notCreatedForGpus = 0;
  int notCreatedRefused = 0;
  int notCreatedForQueue = 0;                 // the job's Kueue LocalQueue does not exist
  std::optional<RefusedCreate> quotaRefusal;  // the last create a quota refused
  // Why the job launches nothing more: a create refused for good, now or by an earlier reconcile.
  std::optional<std::string> launchesRefused;

  api::Status& status() { return plan.status; }
  // Whether an object the job does not own holds the run's name, as observed or as a create found.
  bool nameTaken(const std::string& run) const {
    return snapshot.namesTaken.contains(run) || learned.namesTaken.contains(run);
  }
  const api::Spec& spec() const { return snapshot.job.spec; }

  void requeueWithin(std::chrono::system_clock::duration limit) {
    const auto within = requeueFor(limit);
    plan.requeueAfter = std::min(plan.requeueAfter.value_or(within), within);
  }

  void setRunning(bool value, std::string_view reason, const std::string& message) {
    setCondition(status(), condition::kRunning, value, reason, message, snapshot.now,
                 snapshot.generation);
  }
};

// The search goes on: how many trials wait and run, and what holds it back, if anything does.
void goOn(Draft& draft);
// The search is over: the output and the final status, or, while the output cannot be written,
// the results and the best saying so.
void endSearch(Draft& draft);
// A trial that never started on any of its attempts: the job fails, keeping its results.
void failNotMeasured(Draft& draft, const TrialRunState& state);
// Trials queued longer than spec.queueTimeout (`subject` names them): the job fails, keeping its
// results.
void failQueueTimedOut(Draft& draft, const std::string& subject, const std::string& message);
// Launches were refused for good and nothing runs any more: the job fails, keeping its results.
void failLaunchRefused(Draft& draft);
// The last step: whether the status is written now. Trials that ended wait a few seconds for
// their siblings, so that one write and one Event record them all; counts that only moved
// between pending and running, and messages whose figures alone changed, wait for the next write,
// or for 30 s (kLiveCountsInterval) after the last one. Either way the written status stays, and
// the job looks again when the wait ends.
Plan pace(Draft draft);

}  // namespace autotune::controller::plan_steps
