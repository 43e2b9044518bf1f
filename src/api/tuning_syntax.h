#pragma once
// The DeepSpeed config's tuning syntax, decoded once: which ZeRO stages to search, how
// the micro-batch and gradient accumulation are searched, and whether train_batch_size fixes the
// global batch. validate() reports what breaks it; the engine reads the typed value.

#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

namespace autotune::api {

// How the user gave train_micro_batch_size_per_gpu or gradient_accumulation_steps: "auto" (search
// it), an integer (where the search starts) or a list (exactly these values).
struct BatchChoice {
  enum class Kind { kAuto, kStart, kList };
  Kind kind = Kind::kAuto;
  std::vector<int> values;  // kStart: the start; kList: the values, in the user's order, distinct

  int first(int fallback) const { return values.empty() ? fallback : values.front(); }
};

// train_batch_size: a number fixes the global batch every trial keeps; "auto" is kept for the
// training script to fill (Hugging Face); absent or null, each trial gets micro-batch ×
// gradient accumulation × data-parallel size.
struct TrainBatch {
  std::optional<int> fixed;
  bool automatic = false;
};

struct TuningSyntax {
  // zero_optimization.stage: an integer, a list or "all" (0 to 3), ascending and distinct. Unset,
  // ZeRO is off as in DeepSpeed: stage 0, not searched.
  std::vector<int> stages = {0};
  BatchChoice microBatch;
  BatchChoice gradientAccumulation;
  // Whether the config sets gradient_accumulation_steps at all: DeepSpeed's trial names place it
  // by that.
  bool gradientAccumulationSet = false;
  TrainBatch trainBatch;
};

// The config's tuning syntax as the engine reads it. Validation reports whatever breaks it; a key
// that breaks it counts here as unset, and a stage listed twice counts once.
TuningSyntax tuningSyntaxOf(const nlohmann::json& deepspeedConfig);

// Whether a list at a dotted key path is one value rather than candidates: a list of numbers under
// optimizer.params or scheduler.params, such as Adam's betas. Every other list is a dimension of
// the search.
bool isValueList(std::string_view keyPath, const nlohmann::json& value);

}  // namespace autotune::api
