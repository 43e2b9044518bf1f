#include "tuning/nothing_fits.h"

#include <array>
#include <cstdio>
#include <vector>

#include "api/deepspeed_keys.h"

namespace autotune::tuning {
namespace {

using nlohmann::json;

// Past this many GPUs a trial the advice is a smaller model, not more GPUs.
constexpr int kMostGpusAdvised = 4096;

// Bytes a GPU needs for `config` at a micro-batch of 1 (model states alone when activations are
// unknown).
double neededAtOne(const ModelSize& model, const json& config, const Parallelism& parallelism) {
  const MemoryEstimate estimate = estimateMemory(model, config, parallelism);
  return estimate.total(1).value_or(estimate.modelStates());
}

std::string timesOver(double needed, std::int64_t available) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.1fx", needed / static_cast<double>(available));
  return text.data();
}

// The config of a stage-`stage` trial at a micro-batch of 1, with these states offloaded to CPU.
json offloaded(const TuningSpace& space, int stage, bool optimizer, bool parameters) {
  json config = makeFastTrial(space, stage, 1, space.gradientAccumulation.first(1)).config;
  json& zero = config[api::kZeroKey];
  if (optimizer) {
    zero[api::kOffloadOptimizerKey] = {{"device", "cpu"}};
  }
  if (parameters) {
    zero[api::kOffloadParamKey] = {{"device", "cpu"}};
  }
  return config;
}

// What would fit, each a sentence of its own.
std::vector<std::string> whatWouldFit(const TuningSpace& space, const ModelSize& model,
                                      std::int64_t available) {
  std::vector<std::string> advice;
  const auto fits = [&](const json& config, const Parallelism& parallelism) {
    return neededAtOne(model, config, parallelism) <= static_cast<double>(available);
  };
  const json optimizerOff = offloaded(space, 3, true, false);
  const json bothOff = offloaded(space, 3, true, true);
  // DeepSpeed offloads only its own optimizer.
  const std::string optimizer =
      space.base.contains(api::kOptimizerKey) ? "" : " and an optimizer section";
  if (fits(optimizerOff, space.parallelism)) {
    advice.push_back("ZeRO stage 3 with zero_optimization.offload_optimizer: {device: cpu}" +
                     optimizer + " needs " +
                     formatBytes(neededAtOne(model, optimizerOff, space.parallelism)));
  } else if (fits(bothOff, space.parallelism)) {
    advice.push_back(
        "ZeRO stage 3 with offload_optimizer and offload_param on the CPU ({device: cpu})" +
        optimizer + " needs " + formatBytes(neededAtOne(model, bothOff, space.parallelism)));
  }
  const json partitioned = offloaded(space, 3, false, false);
  for (Parallelism wider = space.parallelism; wider.gpus <= kMostGpusAdvised; wider.gpus *= 2) {
    if (fits(partitioned, wider)) {
      advice.push_back(
          "ZeRO stage 3 on spec.resources.gpusPerTrial: " + std::to_string(wider.gpus) + " needs " +
          formatBytes(neededAtOne(model, partitioned, wider)) +
          " a GPU (spec.resources.nodesPerTrial to spread them over nodes)");
      break;
    }
  }
  advice.emplace_back("a smaller model fits as it is");
  return advice;
}

}  // namespace

std::optional<std::string> nothingFits(const TuningSpace& space, const ModelSize& model,
                                       std::int64_t gpuMemoryBytes) {
  if (space.stages.empty() || gpuMemoryBytes <= 0) {
    return std::nullopt;
  }
  std::string perStage;
  for (const int stage : space.stages) {
    const json config = makeFastTrial(space, stage, 1, space.gradientAccumulation.first(1)).config;
    const double needed = neededAtOne(model, config, space.parallelism);
    if (needed <= static_cast<double>(gpuMemoryBytes)) {
      return std::nullopt;
    }
    perStage += (perStage.empty() ? "" : ", ") + std::string("stage ") + std::to_string(stage) +
                " needs " + formatBytes(needed) + " (" + timesOver(needed, gpuMemoryBytes) + ")";
  }
  std::string message =
      "nothing fits: no ZeRO stage of the search leaves room for a micro-batch "
      "of 1 in " +
      formatBytes(static_cast<double>(gpuMemoryBytes)) + " a GPU (" + perStage +
      "). What would fit: ";
  const auto advice = whatWouldFit(space, model, gpuMemoryBytes);
  for (std::size_t i = 0; i < advice.size(); ++i) {
    message += (i == 0 ? "" : i + 1 == advice.size() ? "; or " : "; ") + advice[i];
  }
  return message + ".";
}

}  // namespace autotune::tuning
