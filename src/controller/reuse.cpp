#include "controller/reuse.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "controller/plan.h"

namespace autotune::controller {
namespace {

// The results of `launch` kept before, in its order; the trials without one are left to run.
std::vector<tuning::RecordedExit> measuredBefore(Snapshot& snapshot, const RanOn& ranOn,
                                                 const std::vector<tuning::Trial>& launch,
                                                 const MeasurementLookup& lookup) {
  const api::AutotuneJob& job = snapshot.job;
  std::vector<tuning::RecordedExit> hits;
  for (const auto& trial : launch) {
    const MeasurementIdentity identity =
        identityOf(job.namespaceName(), job.spec, trial.config, ranOn);
    const auto kept = lookup(job.namespaceName(), identity.name());
    if (!kept) {
      continue;
    }
    auto reused = reusedRecord(*kept, identity, trial.name, trial.space, job.spec.search.metric);
    if (!reused) {
      std::string why =
          "ConfigMap " + kept->name + " (trial " + trial.name + "): " + reused.error();
      if (std::ranges::find(snapshot.measurementsIgnored, why) ==
          snapshot.measurementsIgnored.end()) {
        snapshot.measurementsIgnored.push_back(std::move(why));
      }
      continue;
    }
    hits.push_back(std::move(*reused));
  }
  return hits;
}

}  // namespace

tuning::Decision reuseMeasured(Snapshot& snapshot, tuning::Decision decision,
                               const MeasurementLookup& lookup) {
  const api::Spec& spec = snapshot.job.spec;
  if (spec.reuse != api::Reuse::kEnabled || hasEnded(snapshot.job.status.phase)) {
    return decision;
  }
  const auto ranOn = expectedRanOn(spec, snapshot.capacity);
  if (!ranOn) {
    return decision;
  }
  // Each round records at least one trial, of which the search launches at most maxTrials.
  for (int round = 0;
       round <= spec.search.maxTrials && decision.state == tuning::Decision::State::kContinue;
       ++round) {
    auto hits = measuredBefore(snapshot, *ranOn, decision.launch, lookup);
    if (hits.empty()) {
      break;
    }
    for (auto& [record, model] : hits) {
      if (model) {
        snapshot.model = model;
      }
      snapshot.results.push_back(record);
      snapshot.reused.push_back(std::move(record));
    }
    decision = tuning::decide(question(snapshot));
  }
  return decision;
}

}  // namespace autotune::controller
