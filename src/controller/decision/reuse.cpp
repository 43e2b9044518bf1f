#include "controller/decision/reuse.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "controller/decision/plan.h"

namespace autotune::controller {
namespace {

// The results of `launch` kept before, in its order; the trials without one are left to run.
std::vector<tuning::RecordedExit> measuredBefore(Snapshot& snapshot, const RanOn& ranOn,
                                                 const std::vector<tuning::Trial>& launch,
                                                 const KeptMeasurements& kept) {
  const api::AutotuneJob& job = snapshot.job;
  std::vector<tuning::RecordedExit> hits;
  for (const auto& trial : launch) {
    const MeasurementIdentity identity = identityOf(job.namespaceName(), job.spec, trial, ranOn);
    const auto found = kept.named(job.namespaceName(), identity.name());
    if (!found) {
      continue;
    }
    auto reused = reusedRecord(
        *found, identity,
        {trial.name, trial.space, job.spec.search.metric, snapshot.now, kept.limits.maxAge});
    if (!reused) {
      std::string why =
          "ConfigMap " + found->name + " (trial " + trial.name + "): " + reused.error();
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

// The digest the job's own trials ran their image as, if the runtime reported one: those that
// ended now, else those it kept measurements of.
std::string digestRunBefore(const Snapshot& snapshot, const KeptMeasurements& kept) {
  for (const auto& concluded : snapshot.concluded) {
    if (concluded.ranOn && !concluded.ranOn->imageDigest.empty()) {
      return concluded.ranOn->imageDigest;
    }
  }
  const api::AutotuneJob& job = snapshot.job;
  for (const auto& made : kept.madeBy(job.namespaceName(), job.uid())) {
    if (auto digest = imageDigestOf(*made); !digest.empty()) {
      return digest;
    }
  }
  return "";
}

// What the engine would launch with room for the job's whole parallelism: a reused result takes
// no GPU, so a job on a full cluster still takes what was measured before.
std::vector<tuning::Trial> wantedWithRoom(const Snapshot& snapshot) {
  return wantedWith(snapshot, std::max(1, snapshot.job.spec.parallelism));
}

}  // namespace

tuning::Decision reuseMeasured(Snapshot& snapshot, tuning::Decision decision,
                               const KeptMeasurements& kept) {
  const api::Spec& spec = snapshot.job.spec;
  if (spec.reuse != api::Reuse::kEnabled || hasEnded(snapshot.job.status.phase)) {
    return decision;
  }
  auto ranOn = expectedRanOn(spec, snapshot.capacity);
  if (!ranOn) {
    return decision;
  }
  if (ranOn->imageDigest.empty()) {
    ranOn->imageDigest = digestRunBefore(snapshot, kept);
  }
  // Each round records at least one trial, of which the search launches at most maxTrials.
  for (int round = 0;
       round <= spec.search.maxTrials && decision.state == tuning::Decision::State::kContinue;
       ++round) {
    auto hits = measuredBefore(snapshot, *ranOn, wantedWithRoom(snapshot), kept);
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
