#pragma once
// A model/hardware profile: what the simulator knows of one model trained on one kind of GPU.
// The built-in profiles are the eight models of DeepSpeed's published autotuning results on
// 16 × V100-32GB; custom profiles are JSON files with the same fields (README.md).

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace autotune::trialsim {

enum class Precision { kFp16, kBf16, kFp32 };

inline constexpr int kZeroStages = 4;
inline constexpr double kGiB = 1024.0 * 1024 * 1024;

struct Profile {
  std::string name;

  // Model and hardware.
  std::int64_t numParameters = 0;
  Precision precision = Precision::kFp16;
  int gpus = 1;  // the world size when the launch does not say
  double gpuMemoryBytes = 32 * kGiB;
  int tokensPerSample = 1024;  // for FLOPS only

  // Memory per GPU beyond the model states (which follow from precision and stage): activations
  // grow with the micro-batch, the fixed overhead does not (CUDA context, allocator cache,
  // communication buckets).
  double activationBytesPerSample = 0;
  double fixedOverheadBytes = kGiB;
  // What the profiling run reports as activation_mem_per_gpu. DeepSpeed measures it at ZeRO-3 and
  // micro-batch 1 around the first forward, which also counts gathered parameters and temporary
  // buffers, so it can overstate the true per-sample activation. Unset: the true value.
  std::optional<double> profiledActivationBytes = std::nullopt;

  // Time of one micro-step (forward and backward) in µs:
  //   (fixedStepMicros + microsPerSample × micro-batch) × stageCost[stage] × pressure × offload,
  // and once per optimizer step the Adam update, over all parameters at ZeRO-0 and over this
  // GPU's partition from ZeRO-1 on.
  double fixedStepMicros = 0;
  double microsPerSample = 0;
  double optimizerStepMicros = 0;
  std::array<double, kZeroStages> stageCost = {1, 1, 1, 1};
  double offloadOptimizerCost = 1.5;  // multiplies the micro-step when optimizer states are on CPU
  double offloadParamCost = 2.0;      // multiplies the micro-step when parameters are on CPU

  // Allocator pressure: above pressureStart (a fraction of GPU memory) steps slow down by
  // pressureSlowdown × ((used/capacity − pressureStart) / (1 − pressureStart))².
  double pressureStart = 0.9;
  double pressureSlowdown = 0;

  // Stages that fail with an out-of-memory error at any micro-batch (published as failed).
  std::array<bool, kZeroStages> failingStages = {false, false, false, false};

  // Throughput jitter: |ε| ≤ noise, the same for the same configuration.
  double noise = 0.005;
  std::uint64_t seed = 0;

  double reportedActivationBytes() const {
    return profiledActivationBytes.value_or(activationBytesPerSample);
  }
};

const std::vector<Profile>& builtInProfiles();

// The built-in profile of that name, or an error that lists the names there are.
tl::expected<Profile, std::string> builtInProfile(std::string_view name);

// A profile from a custom profile file's JSON; the error names the field.
tl::expected<Profile, std::string> profileFromJson(const nlohmann::json& document);

std::string_view precisionName(Precision precision);

}  // namespace autotune::trialsim
