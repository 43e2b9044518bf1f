// The `grid`, `random` and `model-based` strategies: one memory-pruned list of every configuration
// in the space, taken in grid order, in a seeded random order, or in the order a surrogate model
// ranks them after each result.

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "tuning/strategy.h"

namespace autotune::tuning {
namespace {

constexpr int kMaxUnknownMemoryMicroBatch = 128;
constexpr std::size_t kInitialModelBasedTrials = 2;

std::vector<int> microBatchCandidates(const SearchContext& context, int stage, int gas) {
  const TuningSpace& space = context.space;
  if (space.microBatch.kind != api::BatchChoice::Kind::kAuto) {
    return space.microBatch.values;
  }
  const api::Search& search = space.search;
  const MicroBatchLadder& ladder = space.microBatches;
  const auto estimate = context.estimatedLargestMicroBatch(makeFastTrial(space, stage, 1, gas));
  std::vector<int> candidates;
  if (!estimate) {
    // Without a memory model, powers of two (or, for a fixed global batch, every size that
    // divides it); OOM outcomes tell where they stop fitting.
    const int largest = std::min(search.maxMicroBatchSize, kMaxUnknownMemoryMicroBatch);
    if (ladder.batchPerReplica()) {
      return ladder.between(search.minMicroBatchSize, largest);
    }
    for (int m = search.minMicroBatchSize; m <= largest; m *= 2) {
      candidates.push_back(m);
    }
    return candidates;
  }
  const std::optional<int> largest = ladder.atMost(std::min(*estimate, search.maxMicroBatchSize));
  if (!largest) {
    // Pruned by the memory model, with its reason.
    return {ladder.atLeast(search.minMicroBatchSize).value_or(search.minMicroBatchSize)};
  }
  const int lowest = std::max(search.minMicroBatchSize, *largest / 2);
  if (ladder.batchPerReplica()) {
    return ladder.between(lowest, *largest);
  }
  const int stride = std::max(1, (*largest - lowest) / search.numTuningMicroBatchSizes);
  for (int m = lowest; m < *largest; m += stride) {
    candidates.push_back(m);
  }
  candidates.push_back(*largest);
  return candidates;
}

std::vector<int> accumulationCandidates(const TuningSpace& space) {
  if (space.gradientAccumulation.kind == api::BatchChoice::Kind::kAuto) {
    return {1};
  }
  return space.gradientAccumulation.values;
}

// Every configuration of the space in grid order; pruned ones go to `pruned`.
std::vector<Trial> enumerate(const SearchContext& context, std::vector<PrunedTrial>& pruned) {
  const TuningSpace& space = context.space;
  const std::vector<std::string> paths = pathsOf(space.dimensions);
  std::vector<Trial> trials;
  std::set<std::string> seenConfigs;
  for (const int stage : space.stages) {
    const std::vector<std::string> naming = orderForSpace(stage, paths);
    const std::string spaceName =
        paths.empty() ? "z" + std::to_string(stage) : knobSpaceName(stage, naming);
    for (const int gas : accumulationCandidates(space)) {
      for (const int microBatch : microBatchCandidates(context, stage, gas)) {
        const int accumulation = space.microBatches.gradientAccumulationFor(microBatch, gas);
        for (auto& knobs : combinations(space.dimensions, naming)) {
          Trial trial = paths.empty() ? makeFastTrial(space, stage, microBatch, accumulation)
                                      : makeKnobTrial(space, stage, microBatch, accumulation,
                                                      std::move(knobs), spaceName);
          if (!seenConfigs.insert(trial.config.dump()).second) {
            continue;
          }
          if (const auto reason = context.pruneReason(trial)) {
            pruned.push_back({trial.name, *reason});
            continue;
          }
          trials.push_back(std::move(trial));
        }
      }
    }
  }
  return trials;
}

// Fisher-Yates with the raw engine output, so the order is the same on every platform.
void shuffle(std::vector<Trial>& trials, std::uint64_t seed) {
  std::mt19937_64 random(seed);
  for (std::size_t i = trials.size(); i > 1; --i) {
    std::swap(trials[i - 1], trials[random() % i]);
  }
}

// Features of a trial for the surrogate: stage, log micro-batch, log accumulation and the
// position of each other key's value in its candidate list, each scaled to [0, 1].
std::vector<double> features(const TuningSpace& space, const Trial& trial) {
  constexpr double kMaxStage = 3;
  std::vector<double> result = {
      trial.stage / kMaxStage,
      std::log2(trial.microBatch) / std::log2(space.search.maxMicroBatchSize + 1),
      std::log2(trial.gradientAccumulation) / 10};
  for (const auto& dimension : space.dimensions) {
    const auto knob = std::find_if(trial.knobs.begin(), trial.knobs.end(),
                                   [&](const auto& k) { return k.first == dimension.path; });
    const auto position =
        std::find(dimension.values.begin(), dimension.values.end(),
                  knob == trial.knobs.end() ? dimension.values.front() : knob->second) -
        dimension.values.begin();
    result.push_back(dimension.values.size() > 1
                         ? static_cast<double>(position) /
                               static_cast<double>(dimension.values.size() - 1)
                         : 0);
  }
  return result;
}

// Inverse-distance-weighted prediction of each untried trial's score from the finished ones;
// trials that did not succeed count as a little worse than the worst success.
std::vector<Trial> rankBySurrogate(const SearchContext& context, std::vector<Trial> untried,
                                   const std::vector<Trial>& finished) {
  std::vector<std::pair<std::vector<double>, std::optional<double>>> observed;
  double worst = 0;
  double bestSeen = 0;
  bool anySuccess = false;
  for (const auto& trial : finished) {
    const auto score = context.score(trial.name);
    observed.emplace_back(features(context.space, trial), score);
    if (score) {
      worst = anySuccess ? std::min(worst, *score) : *score;
      bestSeen = anySuccess ? std::max(bestSeen, *score) : *score;
      anySuccess = true;
    }
  }
  const double failureScore = worst - 0.1 * std::abs(bestSeen - worst) - 1e-9;
  std::vector<std::pair<double, std::size_t>> predicted;
  for (std::size_t i = 0; i < untried.size(); ++i) {
    const std::vector<double> x = features(context.space, untried[i]);
    double weighted = 0;
    double weights = 0;
    for (const auto& [point, score] : observed) {
      double distance = 0;
      for (std::size_t f = 0; f < x.size(); ++f) {
        distance += (x[f] - point[f]) * (x[f] - point[f]);
      }
      const double weight = 1 / (distance + 1e-6);
      weighted += weight * score.value_or(failureScore);
      weights += weight;
    }
    predicted.emplace_back(weights > 0 ? weighted / weights : 0, i);
  }
  std::stable_sort(predicted.begin(), predicted.end(),
                   [](const auto& l, const auto& r) { return l.first > r.first; });
  std::vector<Trial> ranked;
  ranked.reserve(predicted.size());
  for (const auto& [score, index] : predicted) {
    ranked.push_back(std::move(untried[index]));
  }
  return ranked;
}

// The untried trials in the order the strategy takes them.
std::vector<Trial> order(const SearchContext& context, const std::vector<Trial>& all) {
  std::vector<Trial> untried;
  std::vector<Trial> finished;
  for (const auto& trial : all) {
    if (context.observation(trial.name)) {
      finished.push_back(trial);
    } else if (!context.inFlight.contains(trial.name)) {
      untried.push_back(trial);
    }
  }
  const api::Strategy strategy = context.space.search.strategy;
  if (strategy == api::Strategy::kRandom) {
    std::vector<Trial> shuffled = all;
    shuffle(shuffled, context.seed);
    std::erase_if(shuffled, [&](const Trial& t) {
      return context.observation(t.name) || context.inFlight.contains(t.name);
    });
    return shuffled;
  }
  if (strategy == api::Strategy::kModelBased) {
    const std::size_t started = finished.size() + context.inFlight.size();
    if (started < kInitialModelBasedTrials) {
      // The first trial in grid order, then one drawn at random, before the model has data.
      std::vector<Trial> shuffled = untried;
      shuffle(shuffled, context.seed);
      if (started == 0 && !untried.empty()) {
        shuffled.insert(shuffled.begin(), untried.front());
      }
      return shuffled;
    }
    return rankBySurrogate(context, std::move(untried), finished);
  }
  return untried;
}

}  // namespace

Proposal proposeFromList(const SearchContext& context) {
  Proposal proposal;
  proposal.known = enumerate(context, proposal.pruned);
  const int patience = context.space.search.earlyStopping;
  if (patience > 0 &&
      trialsSinceImprovement(context, namesOf(proposal.known), std::nullopt) >= patience) {
    proposal.stopReason =
        "early stopping: " + std::to_string(patience) + " trials without improvement";
    return proposal;
  }
  std::set<std::string> taken;
  for (auto& trial : order(context, proposal.known)) {
    if (proposal.wanted.size() >= static_cast<std::size_t>(std::max(1, context.wantedSlots))) {
      break;
    }
    if (taken.insert(trial.name).second) {
      proposal.wanted.push_back(std::move(trial));
    }
  }
  return proposal;
}

}  // namespace autotune::tuning
