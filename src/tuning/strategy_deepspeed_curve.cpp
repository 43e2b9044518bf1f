// The `deepspeed` strategy's search of one stage's throughput curve: bracket the best micro-batch
// until no gap beside it can hold a better point, and climb to the memory boundary only while the
// best is the largest micro-batch that ran.

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "tuning/strategy_deepspeed.h"

namespace autotune::tuning::deepspeed {
namespace {

// The first step away from a lone measurement, as a share of its micro-batch.
constexpr double kLocalStep = 0.1;
// Gaps no wider than this share of the best micro-batch are not split further.
constexpr double kResolution = 0.03;
// A gap is closed once the slopes around it bound what it could hold to this share above the best.
constexpr double kGainTolerance = 0.003;
// How much each step down grows while the lower probe keeps winning (the golden ratio).
constexpr double kExpansion = 1.618;
constexpr double kGoldenSection = 0.382;

// The straight line through two measurements, extended past them.
struct Line {
  double x0 = 0;
  double y0 = 0;
  double slope = 0;
  double at(double x) const { return y0 + slope * (x - x0); }
};

// The most a gap next to the best could hold, by the lines through the measurements on either
// side of it (a unimodal curve lies below both), or nothing when neither side bounds it.
std::optional<double> gapBound(const Curve& curve, int best, int edge, bool up) {
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
  const bool beyondEdge =
      edgeAt != scores.end() && (up ? std::next(edgeAt) != scores.end() : edgeAt != scores.begin());
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
  std::vector<double> points = {static_cast<double>(best + step), static_cast<double>(edge - step)};
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
bool mayHoldBetter(const Curve& curve, int best, int edge, bool up) {
  const double bestScore = curve.scores.at(best);
  const auto bound = gapBound(curve, best, edge, up);
  return !bound || *bound > bestScore + kGainTolerance * std::abs(bestScore);
}

int resolutionAt(int microBatch) {
  return std::max(1, static_cast<int>(std::floor(kResolution * microBatch)));
}

// A gap worth splitting: wider than the resolution, and it may hold a better point.
bool gapOpen(const Curve& curve, int best, int edge, bool up) {
  return std::abs(edge - best) > resolutionAt(best) && mayHoldBetter(curve, best, edge, up);
}

// From the screen, one resolution step proves a memory model that was right; after that the
// climb doubles its last step (without a memory model, the micro-batch), and once a micro-batch
// did not run it halves the distance to it.
int climbStep(const Stage& stage, int best, int below) {
  if (stage.curve.smallestMiss && *stage.curve.smallestMiss > best) {
    return std::max(1, (*stage.curve.smallestMiss - best) / 2);
  }
  const bool fromScreen = below == 0 || stage.curve.firstFit == best;
  if (!stage.bounds.estimate) {
    return fromScreen ? best : 2 * (best - below);
  }
  return fromScreen ? resolutionAt(best) : std::max(resolutionAt(best), 2 * (best - below));
}

int golden(int best, int edge) {
  const int step =
      std::max(1, static_cast<int>(std::round(kGoldenSection * std::abs(edge - best))));
  return edge > best ? best + step : best - step;
}

}  // namespace

std::optional<int> allowedWithin(const MicroBatchLadder& ladder, int low, int high, int aim) {
  if (low > high) {
    return std::nullopt;
  }
  return ladder.closestBetween(low - 1, high + 1, std::clamp(aim, low, high));
}

int bestMicroBatch(const Curve& curve) {
  int best = curve.scores.begin()->first;
  for (const auto& [microBatch, score] : curve.scores) {
    if (score >= curve.scores.at(best)) {
      best = microBatch;  // ties go to the larger micro-batch
    }
  }
  return best;
}

// The next micro-batches the stage's curve search wants, most useful first: below a best with
// nothing measured under it; above a best that is the largest that ran, up to the memory
// boundary (a climb can find much more than a gap); else inside the gaps around the best that
// could still hold a better point, the wider first.
std::vector<int> curveProbes(const Stage& stage, const MicroBatchLadder& ladder) {
  const Curve& curve = stage.curve;
  const StageBounds& bounds = stage.bounds;
  const int best = bestMicroBatch(curve);
  const auto at = curve.scores.find(best);
  const int below = at == curve.scores.begin() ? 0 : std::prev(at)->first;  // 0: none
  const int above = std::next(at) == curve.scores.end() ? 0 : std::next(at)->first;
  const bool unexploredBelow = below == 0 && best > bounds.lowest;
  const bool climb =
      above == 0 && best < stage.highest() && mayHoldBetter(curve, best, stage.highest() + 1, true);

  std::optional<int> lower;
  if (unexploredBelow) {
    const double step = above != 0 ? kExpansion * (above - best) : kLocalStep * best;
    lower = allowedWithin(ladder, bounds.lowest, best - 1,
                          best - static_cast<int>(std::max(1.0, std::round(step))));
  } else if (below != 0 && gapOpen(curve, best, below, false)) {
    lower = allowedWithin(ladder, below + 1, best - 1, golden(best, below));
  }
  std::optional<int> upper;
  if (climb) {
    upper = allowedWithin(ladder, best + 1, stage.highest(), best + climbStep(stage, best, below));
  } else if (above != 0 && gapOpen(curve, best, above, true)) {
    upper = allowedWithin(ladder, best + 1, above - 1, golden(best, above));
  }
  const bool upperFirst =
      !unexploredBelow && upper && (climb || !lower || *upper - best > best - *lower);
  const std::vector<std::optional<int>> probes =
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

}  // namespace autotune::tuning::deepspeed
