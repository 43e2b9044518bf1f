#include "tuning/memory_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string_view>

#include "api/deepspeed_keys.h"

namespace autotune::tuning {
namespace {

// Bytes per parameter with Adam: fp16 and bf16 keep half-precision weights and gradients and
// fp32 master weights, momentum and variance (2 + 2 + 12); fp32 keeps 4 + 4 + 8.
struct BytesPerParameter {
  double parameters;
  double gradients;
  double optimizerStates;
};

BytesPerParameter bytesPerParameter(Precision precision) {
  if (precision == Precision::kFp32) {
    return {4, 4, 8};
  }
  return {2, 2, 12};
}

// A precision section's `enabled`: true, false, or "auto" (nothing when unset).
std::optional<nlohmann::json> enabledFlag(const nlohmann::json& config, std::string_view section) {
  const auto found = config.find(section);
  if (found == config.end() || !found->is_object()) {
    return std::nullopt;
  }
  const auto flag = found->find(api::kEnabledKey);
  return flag == found->end() ? std::nullopt : std::optional<nlohmann::json>(*flag);
}

bool enabled(const nlohmann::json& config, std::string_view section) {
  return enabledFlag(config, section) == nlohmann::json(true);
}

bool automatic(const nlohmann::json& config, std::string_view section) {
  return enabledFlag(config, section) == nlohmann::json("auto");
}

}  // namespace

std::optional<double> MemoryEstimate::total(int microBatch) const {
  if (!activationsPerSample) {
    return std::nullopt;
  }
  return modelStates() + *activationsPerSample * microBatch;
}

Precision precisionOf(const nlohmann::json& deepspeedConfig) {
  if (enabled(deepspeedConfig, api::kFp16Key)) {
    return Precision::kFp16;
  }
  if (enabled(deepspeedConfig, api::kBf16Key) || enabled(deepspeedConfig, api::kBfloat16Key)) {
    return Precision::kBf16;
  }
  if (automatic(deepspeedConfig, api::kFp16Key) || automatic(deepspeedConfig, api::kBf16Key) ||
      automatic(deepspeedConfig, api::kBfloat16Key)) {
    return Precision::kHalfAuto;
  }
  return Precision::kFp32;
}

MemoryEstimate estimateMemory(const ModelSize& model, const nlohmann::json& trialConfig,
                              const Parallelism& parallelism) {
  const nlohmann::json zero = trialConfig.value(api::kZeroKey, nlohmann::json::object());
  const int stage = zero.value(api::kStageKey, 0);
  const BytesPerParameter bytes = bytesPerParameter(precisionOf(trialConfig));
  const double parametersPerGpu =
      static_cast<double>(model.numParameters) / parallelism.modelParallel;
  const double dataParallel = parallelism.dataParallel();

  MemoryEstimate estimate;
  estimate.parameters = parametersPerGpu * bytes.parameters / (stage >= 3 ? dataParallel : 1);
  estimate.gradients = parametersPerGpu * bytes.gradients / (stage >= 2 ? dataParallel : 1);
  estimate.optimizerStates =
      parametersPerGpu * bytes.optimizerStates / (stage >= 1 ? dataParallel : 1);
  if (offloads(zero, api::kOffloadOptimizerKey)) {
    estimate.optimizerStates = 0;
  }
  if (offloads(zero, api::kOffloadParamKey)) {
    estimate.parameters = 0;
  }
  if (model.activationBytesPerSample) {
    estimate.activationsPerSample = static_cast<double>(*model.activationBytesPerSample);
  }
  return estimate;
}

int samplesAsInt(double samples) {
  if (std::isnan(samples)) {
    return 0;
  }
  constexpr auto kLowest = static_cast<double>(std::numeric_limits<int>::min());
  constexpr auto kHighest = static_cast<double>(std::numeric_limits<int>::max());
  return static_cast<int>(std::clamp(samples, kLowest, kHighest));
}

std::optional<int> largestMicroBatch(const MemoryEstimate& estimate, std::int64_t gpuMemoryBytes) {
  if (!estimate.activationsPerSample || *estimate.activationsPerSample <= 0) {
    return std::nullopt;
  }
  const double room = static_cast<double>(gpuMemoryBytes) - estimate.modelStates();
  if (room <= 0) {
    return 0;
  }
  return samplesAsInt(std::floor(room / *estimate.activationsPerSample));
}

bool offloads(const nlohmann::json& zeroOptimization, std::string_view section) {
  const auto found = zeroOptimization.find(section);
  if (found == zeroOptimization.end() || !found->is_object()) {
    return false;
  }
  const std::string device = found->value("device", "none");
  return device == "cpu" || device == "nvme";
}

std::string formatBytes(double bytes) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.2f GiB", bytes / kGiB);
  return text.data();
}

}  // namespace autotune::tuning
