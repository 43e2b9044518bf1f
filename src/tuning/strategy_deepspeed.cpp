// The `deepspeed` strategy: DeepSpeed's fast mode (every ZeRO stage, the micro-batch of each,
// then other keys at the best) in fewer launches. Each runnable stage is screened once at equal
// memory use, which ranks the stages without running out of memory; the best stage's throughput
// curve is bracketed until no gap can hold a better point; the memory boundary is climbed only
// while the best is the largest micro-batch that ran; stages that screened close to the best get
// one probe at the best's memory use, and a search of their own only when that probe is close too.
// Then, in full mode or when the user listed other keys, a grid over those keys at the best.

#include <algorithm>
#include <cmath>
#include <limits>

#include "api/deepspeed_keys.h"
#include "tuning/strategy.h"

namespace autotune::tuning {
namespace {

constexpr double kDidNotRun = -std::numeric_limits<double>::infinity();
// The first step away from a lone measurement, as a share of its micro-batch.
constexpr double kLocalStep = 0.1;
// Gaps no wider than this share of the best micro-batch are not split further.
constexpr double kResolution = 0.03;
// A gap is closed once the slopes around it bound what it could hold to this share above the best.
constexpr double kGainTolerance = 0.003;
// How much each step down grows while the lower probe keeps winning (the golden ratio).
constexpr double kExpansion = 1.618;
constexpr double kGoldenSection = 0.382;
// After running out of memory before anything fitted, the next probe of the stage.
constexpr double kBackOff = 0.7;
// A stage whose screen is within spec.search.plateauThreshold of the best screen is a contender:
// it gets a search of its own when its probe at the best's memory use is within this of the best.
constexpr double kContenderProbe = 0.01;

// Where one stage's micro-batch search may go.
struct StageBounds {
  int stage = 0;
  int lowest = 1;  // the smallest allowed micro-batch
  int cap = 1;     // the largest allowed by the spec
  int gradientAccumulation = 1;
  std::optional<int> estimate;  // the memory model's largest micro-batch
};

// What the finished trials of one stage (at its gradient accumulation) measured.
struct Curve {
  std::map<int, double> scores;     // micro-batches that ran
  std::optional<int> firstFit;      // the first to run, in launch order: the stage's screen
  std::optional<int> smallestMiss;  // the smallest that did not run (out of memory or failed)
  bool missFailed = false;          // that one failed for another reason than memory
};

struct Stage {
  StageBounds bounds;
  Curve curve;

  std::optional<double> screen() const {
    return curve.firstFit ? std::optional(curve.scores.at(*curve.firstFit)) : std::nullopt;
  }
  // The largest micro-batch the search may still try.
  int highest() const {
    return curve.smallestMiss ? std::min(bounds.cap, *curve.smallestMiss - 1) : bounds.cap;
  }
};

struct StageResult {
  int stage = 0;
  std::optional<std::string> bestTrial;
  std::optional<double> bestScore;
};

// The straight line through two measurements, extended past them.
struct Line {
  double x0 = 0;
  double y0 = 0;
  double slope = 0;
  double at(double x) const { return y0 + slope * (x - x0); }
};

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
      tuneOtherKeys(results);
    }
    return std::move(proposal_);
  }

 private:
  const api::Search& search() const { return context_.space.search; }

  int userGradientAccumulation() const { return context_.space.gradientAccumulation.first(1); }

  const MicroBatchLadder& ladder() const { return context_.space.microBatches; }

  // A trial of the micro-batch search: at the stage's gradient accumulation, or at the one that
  // completes a fixed global batch.
  Trial probe(const StageBounds& bounds, int microBatch) {
    Trial trial = unremembered(bounds, microBatch);
    remember(trial);
    return trial;
  }

  // The same trial, only to ask the memory model about it.
  Trial unremembered(const StageBounds& bounds, int microBatch) const {
    return makeFastTrial(context_.space, bounds.stage, microBatch,
                         ladder().gradientAccumulationFor(microBatch, bounds.gradientAccumulation));
  }

  void remember(const Trial& trial) {
    if (remembered_.insert(trial.name).second) {
      proposal_.known.push_back(trial);
    }
  }

  void want(const Trial& trial) {
    if (wanted_.insert(trial.name).second) {
      proposal_.wanted.push_back(trial);
    }
  }

  void prune(const Trial& trial, std::string reason) {
    remember(trial);
    proposal_.pruned.push_back({trial.name, std::move(reason)});
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
      remember(trial);
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

  // The allowed micro-batch nearest `aim` within [low, high], if any.
  std::optional<int> allowedWithin(int low, int high, int aim) const {
    if (low > high) {
      return std::nullopt;
    }
    return ladder().closestBetween(low - 1, high + 1, std::clamp(aim, low, high));
  }

  // The micro-batch of `to` that uses the memory `from` uses at `microBatch`, to the nearest
  // sample, by the memory model (the same micro-batch without one).
  int equalMemory(const StageBounds& from, int microBatch, const StageBounds& to) {
    const MemoryEstimate source = context_.memory(unremembered(from, microBatch));
    const MemoryEstimate target = context_.memory(unremembered(to, microBatch));
    int equal = microBatch;
    if (context_.model && source.activationsPerSample && *source.activationsPerSample > 0) {
      equal = static_cast<int>(std::round((*source.total(microBatch) - target.modelStates()) /
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
    return allowedWithin(bounds.lowest, bounds.cap, start);
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
      return allowedWithin(bounds.lowest, *miss - 1, bounds.lowest);
    }
    const int backedOff = static_cast<int>(std::floor(kBackOff * *miss));
    return allowedWithin(bounds.lowest, *miss - 1, backedOff);
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
        largest = static_cast<int>(std::floor(ran * room / anchorRoom));
      }
    }
    return allowedWithin(to.lowest, std::max(to.lowest, to.cap), largest).value_or(to.lowest);
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
        want(probe(stage.bounds, *next));
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

  static int bestMicroBatch(const Curve& curve) {
    int best = curve.scores.begin()->first;
    for (const auto& [microBatch, score] : curve.scores) {
      if (score >= curve.scores.at(best)) {
        best = microBatch;  // ties go to the larger micro-batch
      }
    }
    return best;
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
      const auto at = allowedWithin(stage.bounds.lowest, stage.highest(),
                                    equalMemory(leader.bounds, leaderBest, stage.bounds));
      if (!at) {
        continue;
      }
      const auto measured = stage.curve.scores.find(*at);
      if (measured == stage.curve.scores.end()) {
        const Trial trial = probe(stage.bounds, *at);
        if (!context_.observation(trial.name)) {
          want(trial);
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
    const std::vector<int> probes = curveProbes(stage);
    const auto useful = std::min<std::size_t>(probes.size(), context_.wantedSlots > 1 ? 2 : 1);
    for (std::size_t i = 0; i < useful; ++i) {
      want(probe(stage.bounds, probes[i]));
    }
    return probes.empty();
  }

  // The most a gap next to the best could hold, by the lines through the measurements on either
  // side of it (a unimodal curve lies below both), or nothing when neither side bounds it.
  std::optional<double> gapBound(const Curve& curve, int best, int edge, bool up) const {
    const auto& scores = curve.scores;
    std::optional<Line> fromBest;
    std::optional<Line> fromEdge;
    const auto bestAt = scores.find(best);
    if (up ? bestAt != scores.begin() : std::next(bestAt) != scores.end()) {
      const auto other = up ? std::prev(bestAt) : std::next(bestAt);
      fromBest = Line{static_cast<double>(best), bestAt->second,
                      (bestAt->second - other->second) / (best - other->first)};
    }
    const auto edgeAt = scores.find(edge);
    const bool beyondEdge = edgeAt != scores.end() &&
                            (up ? std::next(edgeAt) != scores.end() : edgeAt != scores.begin());
    if (beyondEdge) {
      const auto beyond = up ? std::next(edgeAt) : std::prev(edgeAt);
      const double slope = (beyond->second - edgeAt->second) / (beyond->first - edge);
      if ((up && slope <= 0) || (!up && slope >= 0)) {  // falling away from the best
        fromEdge = Line{static_cast<double>(edge), edgeAt->second, slope};
      }
    }
    if (!fromBest && !fromEdge) {
      return std::nullopt;
    }
    const int step = up ? 1 : -1;
    std::vector<double> points = {static_cast<double>(best + step),
                                  static_cast<double>(edge - step)};
    if (fromBest && fromEdge && fromBest->slope != fromEdge->slope) {
      const double crossing = (fromEdge->y0 - fromBest->y0 + fromBest->slope * fromBest->x0 -
                               fromEdge->slope * fromEdge->x0) /
                              (fromBest->slope - fromEdge->slope);
      points.push_back(
          std::clamp(crossing, std::min(points[0], points[1]), std::max(points[0], points[1])));
    }
    double most = kDidNotRun;
    for (const double x : points) {
      double bound = std::numeric_limits<double>::infinity();
      for (const auto& line : {fromBest, fromEdge}) {
        if (line) {
          bound = std::min(bound, line->at(x));
        }
      }
      most = std::max(most, bound);
    }
    return most;
  }

  // Whether the micro-batches strictly between best and edge could beat the best by more than
  // the tolerance.
  bool mayHoldBetter(const Curve& curve, int best, int edge, bool up) const {
    const double bestScore = curve.scores.at(best);
    const auto bound = gapBound(curve, best, edge, up);
    return !bound || *bound > bestScore + kGainTolerance * std::abs(bestScore);
  }

  // A gap worth splitting: wider than the resolution, and it may hold a better point.
  bool gapOpen(const Curve& curve, int best, int edge, bool up) const {
    return std::abs(edge - best) > resolutionAt(best) && mayHoldBetter(curve, best, edge, up);
  }

  // The next micro-batches the stage's curve search wants, most useful first: below a best with
  // nothing measured under it; above a best that is the largest that ran, up to the memory
  // boundary (a climb can find much more than a gap); else inside the gaps around the best that
  // could still hold a better point, the wider first.
  std::vector<int> curveProbes(const Stage& stage) {
    const Curve& curve = stage.curve;
    const StageBounds& bounds = stage.bounds;
    const int best = bestMicroBatch(curve);
    const auto at = curve.scores.find(best);
    const int below = at == curve.scores.begin() ? 0 : std::prev(at)->first;  // 0: none
    const int above = std::next(at) == curve.scores.end() ? 0 : std::next(at)->first;
    const bool unexploredBelow = below == 0 && best > bounds.lowest;
    const bool climb = above == 0 && best < stage.highest() &&
                       mayHoldBetter(curve, best, stage.highest() + 1, true);

    std::optional<int> lower;
    if (unexploredBelow) {
      const double step = above != 0 ? kExpansion * (above - best) : kLocalStep * best;
      lower = allowedWithin(bounds.lowest, best - 1,
                            best - static_cast<int>(std::max(1.0, std::round(step))));
    } else if (below != 0 && gapOpen(curve, best, below, false)) {
      lower = allowedWithin(below + 1, best - 1, golden(best, below));
    }
    std::optional<int> upper;
    if (climb) {
      upper = allowedWithin(best + 1, stage.highest(), best + climbStep(stage, best, below));
    } else if (above != 0 && gapOpen(curve, best, above, true)) {
      upper = allowedWithin(best + 1, above - 1, golden(best, above));
    }
    const bool upperFirst =
        !unexploredBelow && upper && (climb || !lower || *upper - best > best - *lower);
    std::vector<std::optional<int>> probes =
        upperFirst ? std::vector{upper, lower} : std::vector{lower, upper};
    std::vector<int> wanted;
    for (const auto& probe : probes) {
      if (probe && !curve.scores.contains(*probe)) {
        wanted.push_back(*probe);
      }
    }
    // Below a lone best the lower probe alone: where the optimum lies below the screen, a climb
    // beside it would be a launch spent for nothing.
    if (unexploredBelow && wanted.size() > 1) {
      wanted.resize(1);
    }
    return wanted;
  }

  // From the screen, one resolution step proves a memory model that was right; after that the
  // climb doubles its last step (without a memory model, the micro-batch), and once a micro-batch
  // did not run it halves the distance to it.
  int climbStep(const Stage& stage, int best, int below) const {
    if (stage.curve.smallestMiss && *stage.curve.smallestMiss > best) {
      return std::max(1, (*stage.curve.smallestMiss - best) / 2);
    }
    const bool fromScreen = below == 0 || stage.curve.firstFit == best;
    if (!stage.bounds.estimate) {
      return fromScreen ? best : 2 * (best - below);
    }
    return fromScreen ? resolutionAt(best) : std::max(resolutionAt(best), 2 * (best - below));
  }

  static int resolutionAt(int microBatch) {
    return std::max(1, static_cast<int>(std::floor(kResolution * microBatch)));
  }

  static int golden(int best, int edge) {
    const int step =
        std::max(1, static_cast<int>(std::round(kGoldenSection * std::abs(edge - best))));
    return edge > best ? best + step : best - step;
  }

  // Listed micro-batches: each one that can run. True when every one has run.
  bool runListedMicroBatches(const StageBounds& bounds) {
    bool complete = true;
    for (const int microBatch : context_.space.microBatch.values) {
      const Trial trial = probe(bounds, microBatch);
      if (const auto reason = context_.pruneReason(trial)) {
        prune(trial, *reason);
      } else if (!context_.observation(trial.name)) {
        want(trial);
        complete = false;
      }
    }
    return complete;
  }

  StageResult bestOfStage(int stage) const {
    StageResult result{stage, {}, {}};
    for (const auto& trial : proposal_.known) {
      const auto score = context_.score(trial.name);
      if (trial.stage == result.stage && score &&
          (!result.bestScore || *score > *result.bestScore)) {
        result.bestScore = score;
        result.bestTrial = trial.name;
      }
    }
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
    const nlohmann::json zero = context_.space.base.value(api::kZeroKey, nlohmann::json::object());
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
    const Trial anchor = *std::find_if(proposal_.known.begin(), proposal_.known.end(),
                                       [&](const Trial& t) { return t.name == *best->bestTrial; });
    std::vector<Dimension> dimensions = context_.space.dimensions;
    for (auto& knob : defaultKnobs(anchor.stage)) {
      dimensions.push_back(std::move(knob));
    }
    std::vector<int> accumulations = {anchor.gradientAccumulation};
    if (context_.space.gradientAccumulation.kind == api::BatchChoice::Kind::kList) {
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
      proposal_.stopReason = "early stopping: " + std::to_string(search().earlyStopping) +
                             " trials in " + spaceName + " without improvement";
      return;
    }
    for (const auto& trial : candidates) {
      if (!context_.observation(trial.name) &&
          proposal_.wanted.size() < static_cast<std::size_t>(context_.wantedSlots)) {
        want(trial);
      }
    }
  }

  const SearchContext& context_;
  Proposal proposal_;
  std::set<std::string> remembered_;
  std::set<std::string> wanted_;
  std::vector<Trial> finishedTrials_;  // the micro-batch search's, in launch order
  std::set<int> runningStages_;        // stages with a micro-batch trial in flight
};

}  // namespace

Proposal proposeDeepSpeed(const SearchContext& context) {
  return DeepSpeedSearch(context).propose();
}

}  // namespace autotune::tuning
