// The `deepspeed` strategy: DeepSpeed's fast mode with its defects fixed. Per ZeRO stage, in
// ascending order: find the largest micro-batch that fits (a probe at the memory model's estimate,
// one just above or below it, then bisection, stopping early when throughput plateaus); then
// search the unimodal metric curve below that boundary at constant batch; later stages are tried
// only where they fit a larger micro-batch. Then, in full mode or when the user listed other
// keys, a grid over those keys at the best stage's micro-batch.

#include <algorithm>
#include <cmath>
#include <limits>

#include "tuning/strategy.h"

namespace autotune::tuning {
namespace {

constexpr double kProbeAboveEstimate = 1.05;
constexpr double kProbeBelowFailure = 0.95;
constexpr double kDidNotRun = -std::numeric_limits<double>::infinity();

// What a walk of the search knows about one trial.
struct Known {
  bool fits = false;
  std::optional<double> score;  // nothing when the trial is only assumed to fit
};

// Real outcomes, plus outcomes assumed while speculating on trials that have not finished.
class Knowledge {
 public:
  explicit Knowledge(const SearchContext& context) : context_(&context) {}

  std::optional<Known> get(const std::string& name) const {
    if (const auto assumed = assumed_.find(name); assumed != assumed_.end()) {
      return assumed->second;
    }
    const auto observed = context_->observation(name);
    if (!observed) {
      return std::nullopt;
    }
    if (!observed->succeeded()) {
      return Known{false, std::nullopt};
    }
    return Known{true, context_->score(name)};
  }

  Knowledge assuming(const std::string& name, bool fits) const {
    Knowledge next = *this;
    next.assumed_[name] = Known{fits, std::nullopt};
    return next;
  }

 private:
  const SearchContext* context_;
  std::map<std::string, Known> assumed_;
};

// Where one stage's micro-batch search starts and how far it may go.
struct StageBounds {
  int stage = 0;
  int start = 1;
  int cap = 1;
  int gradientAccumulation = 1;
  std::optional<int> estimate;
  bool firstStage = true;
};

// The outcome of walking a stage's boundary search with what is known so far.
struct BoundaryWalk {
  std::optional<Trial> need;  // the trial whose outcome it waits for
  bool failed = false;        // the stage did not run even at its start
  int top = 0;                // the largest micro-batch known to fit
};

struct StageResult {
  int stage = 0;
  bool complete = false;
  std::optional<std::string> bestTrial;
  std::optional<double> bestScore;
};

class DeepSpeedSearch {
 public:
  explicit DeepSpeedSearch(const SearchContext& context) : context_(context) {}

  Plan plan() {
    int previousTop = 0;
    std::vector<StageResult> results;
    for (const int stage : context_.space.stages) {
      auto bounds = boundsFor(stage, previousTop);
      if (!bounds) {
        continue;
      }
      if (context_.space.microBatch.kind == BatchChoice::Kind::kList) {
        results.push_back(runListedMicroBatches(*bounds));
        continue;
      }
      const BoundaryWalk boundary = walkBoundary(*bounds, Knowledge(context_));
      if (boundary.need) {
        speculate(*bounds);
        results.push_back({stage, false, {}, {}});
        break;  // later stages start from this stage's boundary
      }
      if (boundary.failed) {
        results.push_back({stage, true, {}, {}});
        continue;
      }
      const bool largerThanBefore = boundary.top > previousTop;
      results.push_back(largerThanBefore ? searchBelowBoundary(*bounds, boundary.top)
                                         : bestOfStage(stage));
      previousTop = std::max(previousTop, boundary.top);
    }
    const bool allComplete = std::all_of(results.begin(), results.end(),
                                         [](const auto& result) { return result.complete; });
    if (allComplete) {
      tuneOtherKeys(results);
    }
    return std::move(plan_);
  }

 private:
  const api::Search& search() const { return context_.space.search; }

  int userGradientAccumulation() const { return context_.space.gradientAccumulation.first(1); }

  const MicroBatchLadder& ladder() const { return context_.space.microBatches; }

  // A trial of the boundary search: at the stage's gradient accumulation, or at the one that
  // completes a fixed global batch.
  Trial probe(const StageBounds& bounds, int microBatch) {
    return fast(bounds.stage, microBatch,
                ladder().gradientAccumulationFor(microBatch, bounds.gradientAccumulation));
  }

  Trial fast(int stage, int microBatch, int gradientAccumulation) {
    Trial trial = makeFastTrial(context_.space, stage, microBatch, gradientAccumulation);
    remember(trial);
    return trial;
  }

  void remember(const Trial& trial) {
    if (remembered_.insert(trial.name).second) {
      plan_.known.push_back(trial);
    }
  }

  void want(const Trial& trial) {
    if (wanted_.insert(trial.name).second) {
      plan_.wanted.push_back(trial);
    }
  }

  void prune(const Trial& trial, std::string reason) {
    remember(trial);
    plan_.pruned.push_back({trial.name, std::move(reason)});
  }

  // Where the stage's search starts, or nothing when the stage is pruned.
  std::optional<StageBounds> boundsFor(int stage, int previousTop) {
    StageBounds bounds;
    bounds.stage = stage;
    bounds.gradientAccumulation = userGradientAccumulation();
    bounds.firstStage = previousTop == 0;
    bounds.cap = search().maxMicroBatchSize;
    if (search().maxTrainBatchSize && !ladder().batchPerReplica()) {
      const int perStep = context_.space.parallelism.dataParallel() * bounds.gradientAccumulation;
      bounds.cap = std::min(bounds.cap, *search().maxTrainBatchSize / perStep);
    }
    bounds.cap = ladder().atMost(bounds.cap).value_or(0);
    const int userStart = context_.space.microBatch.kind == BatchChoice::Kind::kStart
                              ? context_.space.microBatch.values.front()
                              : search().minMicroBatchSize;
    const int start = std::clamp(bounds.firstStage ? userStart : previousTop,
                                 search().minMicroBatchSize, std::max(bounds.cap, 1));
    bounds.start = ladder().atMost(start).value_or(ladder().atLeast(start).value_or(start));
    const Trial first = probe(bounds, bounds.start);
    if (bounds.cap < search().minMicroBatchSize) {
      prune(first, "spec.search.maxTrainBatchSize leaves no micro-batch of at least " +
                       std::to_string(search().minMicroBatchSize));
      return std::nullopt;
    }
    if (const auto reason = inconsistency(context_.space, first)) {
      prune(first, *reason);
      return std::nullopt;
    }
    bounds.estimate = context_.estimatedLargestMicroBatch(first);
    if (bounds.estimate && *bounds.estimate < search().minMicroBatchSize) {
      prune(first, "the memory model leaves no room for a micro-batch of " +
                       std::to_string(search().minMicroBatchSize) + " at ZeRO stage " +
                       std::to_string(stage));
      return std::nullopt;
    }
    if (!bounds.firstStage && bounds.estimate && *bounds.estimate < previousTop) {
      prune(first, "ZeRO stage " + std::to_string(stage) + " is expected to fit at most " +
                       std::to_string(*bounds.estimate) +
                       " per GPU, less than a lower stage already runs");
      return std::nullopt;
    }
    return bounds;
  }

  // Below the estimate, probe the estimate; above it, climb in steps that start at 5% and
  // double (or double the micro-batch when there is no estimate); after a failure, probe 5% below
  // it once, then bisect. Each probe is the allowed micro-batch nearest that aim; nothing when no
  // allowed one is left to try.
  std::optional<int> nextProbe(const StageBounds& bounds, int low, std::optional<int> high,
                               int probesAbove, int failures) const {
    if (!high) {
      if (low >= bounds.cap) {
        return std::nullopt;
      }
      int aim = 0;
      if (bounds.estimate && low < *bounds.estimate) {
        aim = std::min(*bounds.estimate, bounds.cap);
      } else {
        int step = low;
        if (bounds.estimate) {
          const double firstStep = (kProbeAboveEstimate - 1) * low;
          step = static_cast<int>(std::ceil(firstStep)) << std::min(probesAbove, 20);
        }
        aim = static_cast<int>(
            std::min<std::int64_t>(bounds.cap, static_cast<std::int64_t>(low) + std::max(1, step)));
      }
      return ladder().closestBetween(low, bounds.cap + 1, aim);
    }
    const int justBelow = static_cast<int>(std::floor(kProbeBelowFailure * *high));
    const bool probeJustBelow = failures == 1 && justBelow > low && justBelow < *high;
    return ladder().closestBetween(low, *high,
                                   probeJustBelow ? justBelow : low + (*high - low) / 2);
  }

  bool improves(std::optional<double> candidate, std::optional<double> reference) const {
    if (!candidate || !reference) {
      return true;  // assumed outcomes carry no value: keep climbing
    }
    return *candidate > *reference + search().plateauThreshold * std::abs(*reference);
  }

  BoundaryWalk walkBoundary(const StageBounds& bounds, const Knowledge& knowledge) {
    int low = bounds.start;
    std::optional<int> high;
    int failures = 0;
    Trial trial = probe(bounds, low);
    auto known = knowledge.get(trial.name);
    if (!known) {
      return {trial, false, 0};
    }
    if (!known->fits) {
      const int smallest = ladder().atLeast(search().minMicroBatchSize).value_or(low);
      if (!bounds.firstStage || low <= smallest) {
        return {std::nullopt, true, 0};
      }
      high = low;
      failures = 1;
      low = smallest;
      trial = probe(bounds, low);
      known = knowledge.get(trial.name);
      if (!known) {
        return {trial, false, 0};
      }
      if (!known->fits) {
        return {std::nullopt, true, 0};
      }
    }
    std::optional<double> lowScore = known->score;
    int probesAbove = 0;
    while (const std::optional<int> next = nextProbe(bounds, low, high, probesAbove, failures)) {
      trial = probe(bounds, *next);
      known = knowledge.get(trial.name);
      if (!known) {
        return {trial, false, 0};
      }
      if (!known->fits) {
        high = *next;
        ++failures;
        continue;
      }
      if (bounds.estimate && *next > *bounds.estimate) {
        ++probesAbove;
      }
      const bool plateau = !improves(known->score, lowScore);
      low = *next;
      lowScore = known->score;
      if (plateau) {
        break;
      }
    }
    return {std::nullopt, false, low};
  }

  // Fills free slots with the trials the boundary search would need next if the trials it waits
  // for end as the memory model expects (a micro-batch fits when it is at most the estimate;
  // without an estimate, when it is the stage's start). A wrong guess costs one trial; a right
  // one saves a round.
  void speculate(const StageBounds& bounds) {
    const auto budget = static_cast<std::size_t>(std::max(1, context_.wantedSlots));
    Knowledge knowledge(context_);
    for (std::size_t listed = 0; listed < budget; ++listed) {
      const BoundaryWalk walk = walkBoundary(bounds, knowledge);
      if (!walk.need) {
        return;
      }
      want(*walk.need);
      const int microBatch = walk.need->microBatch;
      const bool expectedToFit =
          bounds.estimate ? microBatch <= *bounds.estimate : microBatch == bounds.start;
      knowledge = knowledge.assuming(walk.need->name, expectedToFit);
    }
  }

  StageResult runListedMicroBatches(const StageBounds& bounds) {
    StageResult result{bounds.stage, true, {}, {}};
    for (const int microBatch : context_.space.microBatch.values) {
      const Trial trial = probe(bounds, microBatch);
      if (const auto reason = context_.pruneReason(trial)) {
        prune(trial, *reason);
      } else if (!context_.observation(trial.name)) {
        want(trial);
        result.complete = false;
      }
    }
    return withBest(result, plan_.known);
  }

  StageResult bestOfStage(int stage) { return withBest({stage, true, {}, {}}, plan_.known); }

  StageResult withBest(StageResult result, const std::vector<Trial>& trials) const {
    for (const auto& trial : trials) {
      const auto score = context_.score(trial.name);
      if (trial.stage == result.stage && score &&
          (!result.bestScore || *score > *result.bestScore)) {
        result.bestScore = score;
        result.bestTrial = trial.name;
      }
    }
    return result;
  }

  // The metric is unimodal in the micro-batch: bracket its peak between the lowest candidate and
  // the boundary, at constant per-GPU batch (gas = batch / micro-batch), to within
  // plateauThreshold of the peak's micro-batch (or the next allowed size, with a fixed batch).
  StageResult searchBelowBoundary(const StageBounds& bounds, int top) {
    const int gas = bounds.gradientAccumulation;
    const int perGpuBatch = top * gas;
    const int lowest =
        ladder().atLeast(std::max(search().minMicroBatchSize, top / 2)).value_or(top);
    const auto gasFor = [&](int microBatch) {
      return ladder().gradientAccumulationFor(microBatch, std::max(gas, perGpuBatch / microBatch));
    };

    std::map<int, double> scores;
    StageResult result{bounds.stage, false, {}, {}};
    for (const int microBatch : ladder().between(lowest, top)) {
      const std::string name = fastTrialName(bounds.stage, gasFor(microBatch), microBatch);
      if (const auto observed = context_.observation(name)) {
        fast(bounds.stage, microBatch, gasFor(microBatch));
        scores[microBatch] = context_.score(name).value_or(kDidNotRun);
        if (observed->succeeded() &&
            (!result.bestScore || scores[microBatch] >= *result.bestScore)) {
          result.bestScore = scores[microBatch];
          result.bestTrial = name;
        }
      }
    }
    if (scores.empty()) {
      want(fast(bounds.stage, top, gasFor(top)));
      return result;
    }
    int best = scores.begin()->first;
    for (const auto& [microBatch, score] : scores) {
      if (score >= scores[best]) {
        best = microBatch;  // ties go to the larger micro-batch
      }
    }
    const auto above = scores.upper_bound(best);
    const auto at = scores.find(best);
    const bool wallBelow = at == scores.begin();
    const bool wallAbove = above == scores.end();
    const int lowEdge = wallBelow ? lowest - 1 : std::prev(at)->first;
    const int highEdge = wallAbove ? top + 1 : above->first;
    const int resolution =
        std::max(1, static_cast<int>(std::floor(search().plateauThreshold * best)));
    const auto open = [&](int from, int to) {
      return to - from > resolution && ladder().closestBetween(from, to, from + 1).has_value();
    };
    const bool openBelow = open(lowEdge, best);
    const bool openAbove = open(best, highEdge);
    if (!openBelow && !openAbove) {
      result.complete = true;
      return result;
    }
    const bool goUp = openAbove && (!openBelow || highEdge - best >= best - lowEdge);
    std::optional<int> next;
    if (goUp) {
      const int step = wallBelow ? resolution : 2 * (best - lowEdge);
      const int aim = wallAbove ? std::min(top, best + step) : best + (highEdge - best + 1) / 2;
      next = ladder().closestBetween(best, highEdge, aim);
    } else {
      const int step = wallAbove ? resolution : 2 * (highEdge - best);
      const int aim =
          wallBelow ? std::max(lowest, best - step) : lowEdge + (best - lowEdge + 1) / 2;
      next = ladder().closestBetween(lowEdge, best, aim);
    }
    want(fast(bounds.stage, *next, gasFor(*next)));
    return result;
  }

  // Default ZeRO knobs DeepSpeed's full mode tunes per stage, for keys the user left unset.
  std::vector<Dimension> defaultKnobs(int stage) const {
    if (search().fast || stage == 0) {
      return {};
    }
    const nlohmann::json buckets = {50000000, 500000000, 1000000000};
    std::vector<Dimension> knobs = {{"zero_optimization.allgather_bucket_size", {}},
                                    {"zero_optimization.reduce_bucket_size", {}}};
    if (stage >= 2) {
      knobs.push_back({"zero_optimization.contiguous_gradients", {false, true}});
      knobs.push_back({"zero_optimization.overlap_comm", {true, false}});
      knobs.push_back({"zero_optimization.reduce_scatter", {false, true}});
    }
    if (stage == 3) {
      knobs.push_back({"zero_optimization.allgather_partitions", {true, false}});
    }
    for (auto& knob : knobs) {
      if (knob.values.empty()) {
        knob.values = {buckets.begin(), buckets.end()};
      }
    }
    const nlohmann::json zero =
        context_.space.base.value("zero_optimization", nlohmann::json::object());
    std::erase_if(knobs, [&](const Dimension& knob) {
      const std::string key = knob.path.substr(knob.path.find('.') + 1);
      return zero.contains(key);
    });
    return knobs;
  }

  // A grid over the user's other list-valued keys (and, in full mode, the ZeRO knobs) at the
  // micro-batch of the best stage, with early stopping.
  void tuneOtherKeys(const std::vector<StageResult>& stages) {
    const auto best = std::max_element(stages.begin(), stages.end(), [](auto& l, auto& r) {
      return l.bestScore.value_or(kDidNotRun) < r.bestScore.value_or(kDidNotRun);
    });
    if (best == stages.end() || !best->bestTrial) {
      return;
    }
    const Trial anchor = *std::find_if(plan_.known.begin(), plan_.known.end(),
                                       [&](const Trial& t) { return t.name == *best->bestTrial; });
    std::vector<Dimension> dimensions = context_.space.dimensions;
    for (auto& knob : defaultKnobs(anchor.stage)) {
      dimensions.push_back(std::move(knob));
    }
    std::vector<int> accumulations = {anchor.gradientAccumulation};
    if (context_.space.gradientAccumulation.kind == BatchChoice::Kind::kList) {
      accumulations = context_.space.gradientAccumulation.values;
    }
    if (dimensions.empty() && accumulations.size() == 1) {
      return;
    }
    const std::vector<std::string> paths = orderForSpace(anchor.stage, pathsOf(dimensions));
    const std::string spaceName = knobSpaceName(anchor.stage, paths);

    std::vector<Trial> candidates;
    for (const int gas : accumulations) {
      for (auto& knobs : combinations(dimensions, paths)) {
        Trial trial = makeKnobTrial(context_.space, anchor.stage, anchor.microBatch, gas,
                                    std::move(knobs), spaceName);
        if (trial.config == anchor.config) {
          continue;
        }
        if (const auto reason = context_.pruneReason(trial)) {
          prune(trial, *reason);
          continue;
        }
        remember(trial);
        candidates.push_back(std::move(trial));
      }
    }
    if (search().earlyStopping > 0 &&
        trialsSinceImprovement(context_, namesOf(candidates), best->bestScore) >=
            search().earlyStopping) {
      plan_.stopReason = "early stopping: " + std::to_string(search().earlyStopping) +
                         " trials in " + spaceName + " without improvement";
      return;
    }
    for (const auto& trial : candidates) {
      if (!context_.observation(trial.name) &&
          plan_.wanted.size() < static_cast<std::size_t>(context_.wantedSlots)) {
        want(trial);
      }
    }
  }

  const SearchContext& context_;
  Plan plan_;
  std::set<std::string> remembered_;
  std::set<std::string> wanted_;
};

}  // namespace

Plan planDeepSpeed(const SearchContext& context) { return DeepSpeedSearch(context).plan(); }

}  // namespace autotune::tuning
