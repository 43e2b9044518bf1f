// The `deepspeed` strategy's last part, as in DeepSpeed's fast mode: once the micro-batch search
// is done, a grid over the other keys at the best trial's micro-batch.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "api/deepspeed_keys.h"
#include "tuning/strategy_deepspeed.h"

namespace autotune::tuning::deepspeed {
namespace {

// Default ZeRO knobs DeepSpeed's full mode tunes per stage, for keys the user left unset.
std::vector<Dimension> defaultKnobs(const SearchContext& context, int stage) {
  if (context.space.search.fast || stage == 0) {
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
  const nlohmann::json zero = context.space.base.value(api::kZeroKey, nlohmann::json::object());
  std::erase_if(knobs, [&](const Dimension& knob) {
    const std::string key = knob.path.substr(knob.path.find('.') + 1);
    return zero.contains(key);
  });
  return knobs;
}

}  // namespace

void tuneOtherKeys(const SearchContext& context, const std::vector<StageResult>& stages,
                   ProposalBuilder& builder) {
  const api::Search& search = context.space.search;
  const auto best = std::max_element(stages.begin(), stages.end(), [](auto& l, auto& r) {
    return l.bestScore.value_or(kDidNotRun) < r.bestScore.value_or(kDidNotRun);
  });
  if (best == stages.end() || !best->bestTrial) {
    return;
  }
  const Trial anchor =
      *std::find_if(builder.proposal().known.begin(), builder.proposal().known.end(),
                    [&](const Trial& t) { return t.name == *best->bestTrial; });
  std::vector<Dimension> dimensions = context.space.dimensions;
  for (auto& knob : defaultKnobs(context, anchor.stage)) {
    dimensions.push_back(std::move(knob));
  }
  std::vector<int> accumulations = {anchor.gradientAccumulation};
  if (context.space.gradientAccumulation.kind == api::BatchChoice::Kind::kList) {
    accumulations = context.space.gradientAccumulation.values;
  }
  if (dimensions.empty() && accumulations.size() == 1) {
    return;
  }
  const std::vector<std::string> paths = orderForSpace(anchor.stage, pathsOf(dimensions));
  const std::string spaceName = knobSpaceName(anchor.stage, paths);

  std::vector<Trial> candidates;
  for (const int gas : accumulations) {
    for (auto& knobs : combinations(dimensions, paths)) {
      Trial trial = makeKnobTrial(context.space, anchor.stage, anchor.microBatch, gas,
                                  std::move(knobs), spaceName);
      if (trial.config == anchor.config) {
        continue;
      }
      if (const auto reason = context.pruneReason(trial)) {
        builder.prune(trial, *reason);
        continue;
      }
      builder.remember(trial);
      candidates.push_back(std::move(trial));
    }
  }
  if (search.earlyStopping > 0 && trialsSinceImprovement(context, namesOf(candidates),
                                                         best->bestScore) >= search.earlyStopping) {
    builder.stop("early stopping: " + std::to_string(search.earlyStopping) + " trials in " +
                 spaceName + " without improvement");
    return;
  }
  for (const auto& trial : candidates) {
    if (!context.observation(trial.name) &&
        builder.proposal().wanted.size() < static_cast<std::size_t>(context.wantedSlots)) {
      builder.want(trial);
    }
  }
}

}  // namespace autotune::tuning::deepspeed
