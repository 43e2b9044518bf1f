// The `deepspeed` strategy: DeepSpeed's fast mode (every ZeRO stage, the micro-batch of each,
// then other keys at the best) in fewer launches. Each runnable stage is screened once at equal
// memory use, which ranks the stages without running out of memory; the best stage's throughput
// curve is bracketed until no gap can hold a better point; the memory boundary is climbed only
// while the best is the largest micro-batch that ran; stages that screened close to the best get
// one probe at the best's memory use, and a search of their own only when that probe is close too.
// Then, in full mode or when the user listed other keys, a grid over those keys at the best.

#include "tuning/strategy_deepspeed.h"

#include <algorithm>
#include <cmath>

namespace autotune::tuning {
namespace {

using deepspeed::allowedWithin;
using deepspeed::bestMicroBatch;
using deepspeed::Curve;
using deepspeed::curveProbes;
using deepspeed::ProposalBuilder;
using deepspeed::Stage;
using deepspeed::StageBounds;
using deepspeed::StageResult;
using deepspeed::tuneOtherKeys;

// After running out of memory before anything fitted, the next probe of the stage.
constexpr double kBackOff = 0.7;
// A stage whose screen is within spec.search.plateauThreshold of the best screen is a contender:
// it gets a search of its own when its probe at the best's memory use is within this of the best.
constexpr double kContenderProbe = 0.01;

class DeepSpeedSearch {
 public:
  explicit DeepSpeedSearch(const SearchContext& context) : context_(context) {}

  Proposal propose() {
    finishedTrials_ = fastTrialsNamed(context_.launchOrder);
    for (const auto& trial : fastTrialsNamed(context_.inFlight)) {
      runningStages_.insert(trial.stage);
    }
    std::vector<Stage> stages;
    for (const int stage : context_.space.stages) {
      if (auto bounds = boundsFor(stage)) {
        stages.push_back({*bounds, curveOf(*bounds)});
      }
    }
    bool complete = true;
    if (context_.space.microBatch.kind == api::BatchChoice::Kind::kList) {
      for (const auto& stage : stages) {
        complete &= runListedMicroBatches(stage.bounds);
      }
    } else {
      complete = searchStages(stages);
    }
    if (complete) {
      std::vector<StageResult> results;
      results.reserve(stages.size());
      for (const auto& stage : stages) {
        results.push_back(bestOfStage(stage.bounds.stage));
      }
      tuneOtherKeys(context_, results, builder_);
    }
    return builder_.take();
  }

 private:
  const api::Search& search() const { return context_.space.search; }

  int userGradientAccumulation() const { return context_.space.gradientAccumulation.first(1); }

  const MicroBatchLadder& ladder() const { return context_.space.microBatches; }

  // A trial of the micro-batch search: at the stage's gradient accumulation, or at the one that
  // completes a fixed global batch.
  Trial probe(const StageBounds& bounds, int microBatch) {
    Trial trial = unremembered(bounds, microBatch);
    builder_.remember(trial);
    return trial;
  }

  // The same trial, only to ask the memory model about it.
  Trial unremembered(const StageBounds& bounds, int microBatch) const {
    return makeFastTrial(context_.space, bounds.stage, microBatch,
                         ladder().gradientAccumulationFor(microBatch, bounds.gradientAccumulation));
  }

  // The stage's limits, or nothing when the stage is pruned.
  std::optional<StageBounds> boundsFor(int stage) {
    StageBounds bounds;
    bounds.stage = stage;
    bounds.gradientAccumulation = userGradientAccumulation();
    bounds.cap = search().maxMicroBatchSize;
    if (search().maxTrainBatchSize && !ladder().batchPerReplica()) {
      const int perStep = context_.space.parallelism.dataParallel() * bounds.gradientAccumulation;
      bounds.cap = std::min(bounds.cap, *search().maxTrainBatchSize / perStep);
    }
    bounds.cap = ladder().atMost(bounds.cap).value_or(0);
    bounds.lowest =
        ladder().atLeast(search().minMicroBatchSize).value_or(search().minMicroBatchSize);
    const Trial first = probe(bounds, std::min(bounds.lowest, std::max(bounds.cap, 1)));
    if (bounds.cap < search().minMicroBatchSize) {
      builder_.prune(first, "spec.search.maxTrainBatchSize leaves no micro-batch of at least " +
                                std::to_string(search().minMicroBatchSize));
      return std::nullopt;
    }
    if (const auto reason = inconsistency(context_.space, first)) {
      builder_.prune(first, *reason);
      return std::nullopt;
    }
    bounds.estimate = context_.estimatedLargestMicroBatch(first);
    if (bounds.estimate && *bounds.estimate < search().minMicroBatchSize) {
      builder_.prune(first, "the memory model leaves no room for a micro-batch of " +
                                std::to_string(search().minMicroBatchSize) + " at ZeRO stage " +
                                std::to_string(stage));
      return std::nullopt;
    }
    return bounds;
  }

  // The micro-batch search's trials among `names`, in their order.
  std::vector<Trial> fastTrialsNamed(const auto& names) const {
    std::vector<Trial> trials;
    for (const auto& name : names) {
      if (auto trial = fastTrialNamed(context_.space, name)) {
        trials.push_back(std::move(*trial));
      }
    }
    return trials;
  }

  Curve curveOf(const StageBounds& bounds) {
    Curve curve;
    std::vector<int> ran;  // in launch order
    for (const auto& trial : finishedTrials_) {
      if (trial.stage != bounds.stage ||
          trial.gradientAccumulation !=
              ladder().gradientAccumulationFor(trial.microBatch, bounds.gradientAccumulation)) {
        continue;
      }
      builder_.remember(trial);
      if (const auto score = context_.score(trial.name)) {
        curve.scores[trial.microBatch] = *score;
        ran.push_back(trial.microBatch);
      } else if (!curve.smallestMiss || trial.microBatch < *curve.smallestMiss) {
        curve.smallestMiss = trial.microBatch;
        const auto observed = context_.observation(trial.name);
        curve.missFailed = observed && observed->outcome == api::Outcome::kFailed;
      }
    }
    // Above a failure, runs say nothing of the memory boundary: the search stays below it.
    if (curve.smallestMiss) {
      std::erase_if(curve.scores,
                    [&](const auto& entry) { return entry.first > *curve.smallestMiss; });
      std::erase_if(ran, [&](int microBatch) { return microBatch > *curve.smallestMiss; });
    }
    if (!ran.empty()) {
      curve.firstFit = ran.front();
    }
    return curve;
  }

  // The micro-batch of `to` that uses the memory `from` uses at `microBatch`, to the nearest
  // sample, by the memory model (the same micro-batch without one).
  int equalMemory(const StageBounds& from, int microBatch, const StageBounds& to) {
    const MemoryEstimate source = context_.memory(unremembered(from, microBatch));
    const MemoryEstimate target = context_.memory(unremembered(to, microBatch));
    int equal = microBatch;
    if (context_.model && source.activationsPerSample && *source.activationsPerSample > 0) {
      equal = samplesAsInt(std::round((*source.total(microBatch) - target.modelStates()) /
                                      *source.activationsPerSample));
    }
    equal = std::clamp(equal, to.lowest, std::max(to.lowest, to.cap));
    return ladder().atMost(equal).value_or(to.lowest);
  }

  // Where a stage is first tried: at the memory model's estimate, else the user's micro-batch,
  // else the smallest.
  std::optional<int> screenStart(const StageBounds& bounds) const {
    int start = bounds.lowest;
    if (bounds.estimate) {
      start = *bounds.estimate;
    } else if (context_.space.microBatch.kind == api::BatchChoice::Kind::kStart) {
      start = context_.space.microBatch.values.front();
    }
    return allowedWithin(ladder(), bounds.lowest, bounds.cap, start);
  }

  // Where a stage that has not run yet is tried next, or nothing when it cannot run. Every stage
  // starts where the memory model expects its largest micro-batch (all at the same memory use),
  // backing off after running out of memory until the first stage (the anchor) runs. When the
  // anchor had to back off, the others move to where they fit by a model corrected to what the
  // anchor showed; a stage that does not run there is dropped.
  std::optional<int> screenProbe(const Stage& stage, const Stage* anchor) {
    const StageBounds& bounds = stage.bounds;
    const std::optional<int> miss = stage.curve.smallestMiss;
    if (anchor != nullptr && anchor->curve.smallestMiss &&
        *anchor->curve.smallestMiss <= screenStart(anchor->bounds).value_or(0)) {
      const int corrected = correctedLargest(*anchor, bounds);
      if (miss && *miss <= corrected) {
        return std::nullopt;
      }
      return corrected;
    }
    if (!miss) {
      return screenStart(bounds);
    }
    if (anchor != nullptr) {
      return std::nullopt;  // out of memory where the model ranks it equal to the anchor
    }
    if (stage.curve.missFailed) {
      // A config DeepSpeed rejects, or a script that breaks, fails at any micro-batch: the
      // smallest tells that apart from a failure of the larger one alone, in one launch.
      return allowedWithin(ladder(), bounds.lowest, *miss - 1, bounds.lowest);
    }
    const int backedOff = static_cast<int>(std::floor(kBackOff * *miss));
    return allowedWithin(ladder(), bounds.lowest, *miss - 1, backedOff);
  }

  // The largest micro-batch of `to` by a memory model that charges each sample all the room the
  // anchor's first run left for its samples. Whether the model erred in the activation memory or
  // in the fixed overhead, this is no more than what fits.
  int correctedLargest(const Stage& anchor, const StageBounds& to) {
    const int ran = *anchor.curve.firstFit;
    int largest = ran;
    if (context_.model && context_.gpuMemoryBytes) {
      const auto capacity = static_cast<double>(*context_.gpuMemoryBytes);
      const double anchorRoom =
          capacity - context_.memory(unremembered(anchor.bounds, ran)).modelStates();
      const double room = capacity - context_.memory(unremembered(to, ran)).modelStates();
      if (anchorRoom > 0 && room > 0) {
        largest = samplesAsInt(std::floor(ran * room / anchorRoom));
      }
    }
    return allowedWithin(ladder(), to.lowest, std::max(to.lowest, to.cap), largest)
        .value_or(to.lowest);
  }

  // Screens every stage, then searches the best one and its contenders. True when done.
  bool searchStages(std::vector<Stage>& stages) {
    const Stage* anchor = nullptr;
    bool screened = true;
    for (auto& stage : stages) {
      if (stage.curve.firstFit) {
        anchor = anchor != nullptr ? anchor : &stage;
        continue;
      }
      if (runningStages_.contains(stage.bounds.stage)) {
        screened = false;  // its outcome decides where it goes next
      } else if (const auto next = screenProbe(stage, anchor)) {
        builder_.want(probe(stage.bounds, *next));
        screened = false;
      }
    }
    if (!screened) {
      return false;
    }
    const Stage* best = nullptr;
    for (const auto& stage : stages) {
      if (stage.screen() && (best == nullptr || *stage.screen() > *best->screen())) {
        best = &stage;
      }
    }
    if (best == nullptr) {
      return true;  // no stage runs
    }
    if (!wantCurveProbes(*best)) {
      return false;
    }
    return searchContenders(stages, *best);
  }

  // Stages whose screen came close to the best's: one probe at the memory use of the best
  // stage's best micro-batch, and a search of their own when that probe is close too.
  bool searchContenders(const std::vector<Stage>& stages, const Stage& leader) {
    const double leaderScreen = *leader.screen();
    const int leaderBest = bestMicroBatch(leader.curve);
    // Against the leader's best, not the best so far: a contender's own finds keep it one.
    const double best = leader.curve.scores.at(leaderBest);
    bool complete = true;
    for (const auto& stage : stages) {
      if (&stage == &leader || !stage.screen() ||
          *stage.screen() < leaderScreen - search().plateauThreshold * std::abs(leaderScreen)) {
        continue;
      }
      const auto at = allowedWithin(ladder(), stage.bounds.lowest, stage.highest(),
                                    equalMemory(leader.bounds, leaderBest, stage.bounds));
      if (!at) {
        continue;
      }
      const auto measured = stage.curve.scores.find(*at);
      if (measured == stage.curve.scores.end()) {
        const Trial trial = probe(stage.bounds, *at);
        if (!context_.observation(trial.name)) {
          builder_.want(trial);
          complete = false;
        }
        continue;
      }
      if (measured->second >= best - kContenderProbe * std::abs(best)) {
        complete &= wantCurveProbes(stage);
      }
    }
    return complete;
  }

  // Wants the next probes of the stage's curve search; true when it needs none.
  bool wantCurveProbes(const Stage& stage) {
    const std::vector<int> probes = curveProbes(stage, ladder());
    const auto useful = std::min<std::size_t>(probes.size(), context_.wantedSlots > 1 ? 2 : 1);
    for (std::size_t i = 0; i < useful; ++i) {
      builder_.want(probe(stage.bounds, probes[i]));
    }
    return probes.empty();
  }

  // Listed micro-batches: each one that can run. True when every one has run.
  bool runListedMicroBatches(const StageBounds& bounds) {
    bool complete = true;
    for (const int microBatch : context_.space.microBatch.values) {
      const Trial trial = probe(bounds, microBatch);
      if (const auto reason = context_.pruneReason(trial)) {
        builder_.prune(trial, *reason);
      } else if (!context_.observation(trial.name)) {
        builder_.want(trial);
        complete = false;
      }
    }
    return complete;
  }

  StageResult bestOfStage(int stage) const {
    StageResult result{stage, {}, {}};
    for (const auto& trial : builder_.proposal().known) {
      const auto score = context_.score(trial.name);
      if (trial.stage == result.stage && score &&
          (!result.bestScore || *score > *result.bestScore)) {
        result.bestScore = score;
        result.bestTrial = trial.name;
      }
    }
    return result;
  }

  const SearchContext& context_;
  ProposalBuilder builder_;
  std::vector<Trial> finishedTrials_;  // the micro-batch search's, in launch order
  std::set<int> runningStages_;        // stages with a micro-batch trial in flight
};

}  // namespace

Proposal proposeDeepSpeed(const SearchContext& context) {
  return DeepSpeedSearch(context).propose();
}

}  // namespace autotune::tuning
