#pragma once
// Internal to the `deepspeed` strategy, whose parts have a file each: strategy_deepspeed.cpp
// screens the ZeRO stages and decides which curves to search; strategy_deepspeed_curve.cpp picks
// the next micro-batches of one stage's curve; strategy_deepspeed_knobs.cpp tunes the other keys
// at the best trial.

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tuning/space.h"
#include "tuning/strategy.h"

namespace autotune::tuning::deepspeed {

inline constexpr double kDidNotRun = -std::numeric_limits<double>::infinity();

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

// The best trial of one stage, when any of its trials succeeded.
struct StageResult {
  int stage = 0;
  std::optional<std::string> bestTrial;
  std::optional<double> bestScore;
};

// A Proposal as the strategy builds it: each trial known once and wanted once.
class ProposalBuilder {
 public:
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
  void stop(std::string reason) { proposal_.stopReason = std::move(reason); }

  const Proposal& proposal() const { return proposal_; }
  Proposal take() { return std::move(proposal_); }

 private:
  Proposal proposal_;
  std::set<std::string> remembered_;
  std::set<std::string> wanted_;
};

// The allowed micro-batch nearest `aim` within [low, high], if any.
std::optional<int> allowedWithin(const MicroBatchLadder& ladder, int low, int high, int aim);

// The micro-batch that scored best on the curve; ties go to the larger.
int bestMicroBatch(const Curve& curve);

// The next micro-batches the stage's curve search wants, most useful first; none once the curve
// holds no better point worth a launch.
std::vector<int> curveProbes(const Stage& stage, const MicroBatchLadder& ladder);

// A grid over the user's other list-valued keys (and, in full mode, the ZeRO knobs) at the
// micro-batch of the best stage, with early stopping.
void tuneOtherKeys(const SearchContext& context, const std::vector<StageResult>& stages,
                   ProposalBuilder& builder);

}  // namespace autotune::tuning::deepspeed
