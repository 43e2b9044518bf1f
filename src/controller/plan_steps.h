#pragma once
// The steps plan() (plan.h) chains, shared by the files that hold them: plan.cpp records what
// ended, relaunches, launches and paces; summary.cpp says where the search stands. Nothing else
// includes this.

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "controller/conditions.h"
#include "controller/plan.h"

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
runtime::Duration requeueFor(std::chrono::system_clock::duration wait);

// The plan in the making, passed from step to step.
struct Draft {
  const Snapshot& snapshot;
  const tuning::Decision& decision;
  const Slots slots;
  std::vector<TrialRunState> inFlight;  // after this plan's relaunches and launches
  Plan plan;

  api::Status& status() { return plan.status; }
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

}  // namespace autotune::controller::plan_steps
