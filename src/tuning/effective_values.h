#pragma once
// What a trial reports it trained with, held to what its config asks. A trial adds to its metrics
// file an object "effective" of the values its engine ran, by dotted config path
// ("train_micro_batch_size_per_gpu", "zero_optimization.stage", ...) and "dp_world_size" (the
// data-parallel ranks), read back from DeepSpeed's engine (docs/trial-protocol.md).

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/job.h"

namespace autotune::tuning {

inline constexpr std::string_view kEffectiveKey = "effective";
inline constexpr std::string_view kDataParallelKey = "dp_world_size";

// What a runner says of a trial whose engine ran another config than asked.
inline constexpr std::string_view kNotAppliedAdvice =
    "the command does not pass the trial's config, or the script or DeepSpeed overrides it";

// The value at a dotted path of nested objects ("zero_optimization.stage"), if there is one. Keys
// are compared whole, so a key holding "~" or "/" is found like any other.
const nlohmann::json* atDottedPath(const nlohmann::json& config, std::string_view path);

struct EffectiveCheck {
  int checked = 0;                           // keys held to what the trial asks
  std::optional<std::string> contradiction;  // the first that differs, named with both values
};

// The trial `trialName` of `spec` against its `effective` values. Checked: the ZeRO stage,
// micro-batch and gradient accumulation its name gives; the data-parallel ranks of the spec; a
// tuned key, by the candidate its name spells; a key the spec fixes, by its value. Numbers compare
// as numbers (1 and 1.0 agree).
// Keys that say nothing of the trial ("auto", unknown, a list, a name cut short) are passed over.
EffectiveCheck checkEffective(const api::Spec& spec, std::string_view trialName,
                              const nlohmann::json& effective);

}  // namespace autotune::tuning
