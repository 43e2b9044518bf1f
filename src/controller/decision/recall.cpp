#include "controller/decision/recall.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "controller/decision/plan.h"

namespace autotune::controller {
namespace {

// A trial's result taken from a kept measurement, and that measurement.
struct Hit {
  tuning::RecordedExit exit;
  Shared<MeasurementObject> measurement;
};

// The results of the `wanted` trials kept before, in its order; the trials without one are left
// to run. Why kept measurements could not stand for their trial goes to measurementsIgnored.
std::vector<Hit> measuredBefore(Snapshot& snapshot, const Recallable& recallable,
                                const std::vector<tuning::Trial>& wanted) {
  const api::AutotuneJob& job = snapshot.job;
  std::vector<Hit> hits;
  for (const auto& trial : wanted) {
    const MeasurementIdentity identity =
        identityOf(job.namespaceName(), job.spec, trial, recallable.ranOn);
    const auto found = recallable.byName.find(identity.name());
    if (found == recallable.byName.end()) {
      continue;
    }
    auto reused = reusedRecord(
        *found->second, identity,
        {trial.name, trial.space, job.spec.search.metric, snapshot.now, recallable.maxAge});
    if (!reused) {
      std::string why =
          "ConfigMap " + found->second->name + " (trial " + trial.name + "): " + reused.error();
      if (std::ranges::find(snapshot.measurementsIgnored, why) ==
          snapshot.measurementsIgnored.end()) {
        snapshot.measurementsIgnored.push_back(std::move(why));
      }
      continue;
    }
    hits.push_back({std::move(*reused), found->second});
  }
  return hits;
}

}  // namespace

Recalled recall(Snapshot snapshot) {
  Recalled recalled{.snapshot = std::move(snapshot), .decision = {}, .taken = {}};
  Snapshot& taking = recalled.snapshot;
  recalled.decision = tuning::decide(question(taking));
  if (!taking.recallable) {
    return recalled;
  }
  const Recallable& recallable = *taking.recallable;
  // Each round records at least one trial, of which the search launches at most maxTrials.
  for (int round = 0; round <= taking.job.spec.search.maxTrials &&
                      recalled.decision.state == tuning::Decision::State::kContinue;
       ++round) {
    // What the engine wants, the GPUs not counted: a reused result takes none, so a job on a full
    // cluster still takes what was measured before.
    auto hits = measuredBefore(taking, recallable, recalled.decision.wanted);
    if (hits.empty()) {
      break;
    }
    for (auto& [exit, measurement] : hits) {
      auto& [record, model] = exit;
      if (model) {
        taking.model = model;
      }
      taking.results.push_back(record);
      taking.reused.push_back(std::move(record));
      recalled.taken.push_back(std::move(measurement));
    }
    recalled.decision = tuning::decide(question(taking));
  }
  return recalled;
}

}  // namespace autotune::controller
