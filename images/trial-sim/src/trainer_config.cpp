#include "trainer_config.h"

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autotune::trialsim {
namespace {

constexpr std::int64_t kDefaultPerDeviceTrainBatchSize = 8;
constexpr std::int64_t kDefaultGradientAccumulationSteps = 1;

bool isAuto(const nlohmann::json& value) {
  return value.is_string() && value.get_ref<const std::string&>() == "auto";
}

// Python's == between a number of the config and the Trainer's integer, so 16.0 matches 16.
bool sameNumber(const nlohmann::json& number, std::int64_t integer) {
  if (number.is_number_float()) {
    return number.get<double>() == static_cast<double>(integer);
  }
  if (number.is_number_unsigned()) {
    return integer >= 0 && number.get<std::uint64_t>() == static_cast<std::uint64_t>(integer);
  }
  return number.get<std::int64_t>() == integer;
}

// The Trainer's train_batch_size: world size × per-device batch × accumulation steps, where the
// world size is the data-parallel degree, as in DeepSpeed's own batch check. Python's integers do
// not overflow; a product beyond 64 bits, which DeepSpeed's check refuses anyway, stays at the
// largest value.
std::int64_t trainerTrainBatch(std::int64_t micro, std::int64_t accumulation, std::int64_t world) {
  const std::int64_t perGpu = micro * accumulation;  // both fit in 32 bits
  constexpr std::int64_t kLargest = std::numeric_limits<std::int64_t>::max();
  return perGpu > kLargest / world ? kLargest : perGpu * world;
}

// One batch key as the Trainer sees it.
struct BatchFill {
  std::string_view key;          // the DeepSpeed key
  std::int64_t value = 0;        // the Trainer's value for it
  std::string_view trainerName;  // how the Trainer names its value in a mismatch
  bool mustMatch = false;        // whether a number in the config must equal the value
};

// The Trainer's fill_match on a top-level batch key: "auto" takes the Trainer's value; a number
// that differs from it, where it must match, is a mismatch line in the Trainer's words. Anything
// else (absent, null, a string) stays for DeepSpeed to judge.
std::optional<std::string> fillMatch(nlohmann::json& config, const BatchFill& fill) {
  const auto found = config.find(fill.key);
  if (found == config.end()) {
    return std::nullopt;
  }
  if (isAuto(*found)) {
    *found = fill.value;
    return std::nullopt;
  }
  if (!fill.mustMatch || !found->is_number() || sameNumber(*found, fill.value)) {
    return std::nullopt;
  }
  return "- ds " + std::string(fill.key) + "=" + found->dump() + " vs hf " +
         std::string(fill.trainerName) + "=" + std::to_string(fill.value);
}

// The Trainer's fill for `section`.enabled (fp16, bf16): "auto" takes the flag. The simulated
// precision is the profile's, so a number or a boolean there is left alone.
void fillEnabled(nlohmann::json& config, std::string_view section, bool enabled) {
  const auto node = config.find(section);
  if (node == config.end() || !node->is_object()) {
    return;
  }
  if (const auto value = node->find("enabled"); value != node->end() && isAuto(*value)) {
    *value = enabled;
  }
}

std::string mismatchError(const std::vector<std::string>& mismatches) {
  std::string message =
      "ValueError: Please correct the following DeepSpeed config values that mismatch "
      "TrainingArguments values:\n";
  for (const auto& mismatch : mismatches) {
    message += mismatch + "\n";
  }
  return message + "The easiest method is to set these DeepSpeed config values to 'auto'.";
}

}  // namespace

tl::expected<nlohmann::json, std::string> applyTrainerArguments(const nlohmann::json& config,
                                                                const TrainerArguments& trainer,
                                                                const Parallelism& parallelism) {
  // A plain DeepSpeed script hands over its config untouched. A config that is not an object, or
  // a world size that model parallelism does not divide, is DeepSpeed's to refuse.
  if (!trainer.given() || !config.is_object() || !parallelism.consistent()) {
    return config;
  }
  const std::int64_t micro =
      trainer.perDeviceTrainBatchSize.value_or(kDefaultPerDeviceTrainBatchSize);
  const std::int64_t accumulation =
      trainer.gradientAccumulationSteps.value_or(kDefaultGradientAccumulationSteps);
  // The Trainer compares a number in the config with its values, defaults included; the
  // simulator compares only with flags the command line gave, so that a config written for
  // DeepSpeed alone keeps working next to a Trainer flag it does not contradict.
  const std::array<BatchFill, 3> fills = {{
      {"train_micro_batch_size_per_gpu", micro, "per_device_train_batch_size",
       trainer.perDeviceTrainBatchSize.has_value()},
      {"gradient_accumulation_steps", accumulation, "gradient_accumulation_steps",
       trainer.gradientAccumulationSteps.has_value()},
      {"train_batch_size", trainerTrainBatch(micro, accumulation, parallelism.dataParallel()),
       "train_batch_size (calculated)", trainer.givesABatch()},
  }};
  nlohmann::json resolved = config;
  std::vector<std::string> mismatches;
  for (const BatchFill& fill : fills) {
    if (auto mismatch = fillMatch(resolved, fill)) {
      mismatches.push_back(std::move(*mismatch));
    }
  }
  if (!mismatches.empty()) {
    return tl::unexpected(mismatchError(mismatches));
  }
  fillEnabled(resolved, "fp16", trainer.fp16.value_or(false));
  fillEnabled(resolved, "bf16", trainer.bf16.value_or(false));
  return resolved;
}

}  // namespace autotune::trialsim
