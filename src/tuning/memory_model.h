#pragma once
// Per-GPU memory of a training configuration: model states by precision and ZeRO stage,
// partitioned over the data-parallel degree, minus what is offloaded, plus activations. It
// prunes what cannot fit and gives the search its first guess; OOM outcomes give the truth.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace autotune::tuning {

// kHalfAuto: fp16 or bf16 `enabled: "auto"`, the training script's to decide (Hugging Face takes
// it from --fp16 / --bf16); the memory model assumes 16-bit mixed precision.
enum class Precision { kFp16, kBf16, kFp32, kHalfAuto };

// Memory the model needs regardless of the micro-batch: CUDA context, allocator reserve and
// communication buffers.
inline constexpr double kFixedOverheadBytes = 1024.0 * 1024 * 1024;

struct ModelSize {
  std::int64_t numParameters = 0;
  std::optional<std::int64_t> activationBytesPerSample;  // at micro-batch 1
};

struct Parallelism {
  int gpus = 1;           // GPUs per trial
  int modelParallel = 1;  // tensor/pipeline degree; data-parallel degree = gpus / modelParallel
  int dataParallel() const { return gpus / modelParallel; }
};

struct MemoryEstimate {
  double parameters = 0;
  double gradients = 0;
  double optimizerStates = 0;
  double overhead = kFixedOverheadBytes;
  std::optional<double> activationsPerSample;

  double modelStates() const { return parameters + gradients + optimizerStates + overhead; }
  // Bytes per GPU at a micro-batch size, when activations are known.
  std::optional<double> total(int microBatch) const;
};

// Precision from the config's fp16/bf16 sections (fp32 when none is enabled or "auto").
Precision precisionOf(const nlohmann::json& deepspeedConfig);

// Estimate for one concrete trial config (its zero_optimization section decides stage and
// offload).
MemoryEstimate estimateMemory(const ModelSize& model, const nlohmann::json& trialConfig,
                              const Parallelism& parallelism);

// A count of samples worked out in bytes, as an int: what a trial or a kept measurement reports
// may make it far beyond int's range (1 byte of activations a sample), where a plain conversion
// is undefined, in practice a negative micro-batch. Saturates at int's bounds; NaN is 0.
int samplesAsInt(double samples);

// The largest micro-batch that fits in `gpuMemoryBytes`, 0 when even the model states do not
// fit, nothing when activations are unknown.
std::optional<int> largestMicroBatch(const MemoryEstimate& estimate, std::int64_t gpuMemoryBytes);

// Whether a zero_optimization section moves a state off the GPU: its `section` (offload_param or
// offload_optimizer) names the cpu or nvme device.
bool offloads(const nlohmann::json& zeroOptimization, std::string_view section);

std::string formatBytes(double bytes);

}  // namespace autotune::tuning
