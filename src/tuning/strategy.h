#pragma once
// Internal to the engine: what a search strategy sees and what it answers.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/job.h"
#include "tuning/engine.h"
#include "tuning/memory_model.h"
#include "tuning/space.h"

namespace autotune::tuning {

struct Observation {
  api::Outcome outcome = api::Outcome::kSucceeded;
  std::optional<double> value;

  bool succeeded() const { return outcome == api::Outcome::kSucceeded && value.has_value(); }
};

struct SearchContext {
  TuningSpace space;
  std::optional<ModelSize> model;
  std::optional<std::int64_t> gpuMemoryBytes;
  std::map<std::string, Observation> finished;
  std::vector<std::string> launchOrder;  // finished trials, in launch order
  std::set<std::string> inFlight;
  int wantedSlots = 1;  // how many trials in flight at once are useful (in flight + free)
  std::uint64_t seed = 0;

  // The metric oriented so that larger is always better (latency is negated).
  std::optional<double> score(const std::string& name) const;
  std::optional<Observation> observation(const std::string& name) const;
  MemoryEstimate memory(const Trial& trial) const;
  // The largest micro-batch the memory model expects to fit, when it can tell.
  std::optional<int> estimatedLargestMicroBatch(const Trial& trial) const;
  // Why the trial cannot run (config rules or memory), if it cannot.
  std::optional<std::string> pruneReason(const Trial& trial) const;
};

// What a strategy proposes, given what has run: the trials to run next and the ones it rules out.
struct Proposal {
  std::vector<Trial> wanted;  // trials whose outcome the strategy wants now, most urgent first
  std::vector<Trial> known;   // every trial the strategy has considered, for looking up names
  std::vector<PrunedTrial> pruned;
  std::string stopReason;  // why it wants nothing more, when it stopped early
};

Proposal proposeDeepSpeed(const SearchContext& context);
Proposal proposeFromList(const SearchContext& context);

// The number of finished trials in `names` (launch order) since the best among them, with
// `baseline` as the score to beat at the start.
int trialsSinceImprovement(const SearchContext& context, const std::vector<std::string>& names,
                           std::optional<double> baseline);

}  // namespace autotune::tuning
