#pragma once
// The simulator's physics: how much memory a training run needs on each GPU, whether it fits, and
// how long its steps take. Pure functions of a profile and a run.

#include <cstdint>

#include "deepspeed_config.h"
#include "profile.h"

namespace autotune::trialsim {

struct MemoryUse {
  double parameters = 0;
  double gradients = 0;
  double optimizerStates = 0;
  double activations = 0;
  double fixedOverhead = 0;
  double total() const {
    return parameters + gradients + optimizerStates + activations + fixedOverhead;
  }
};

// Per GPU, with Adam: fp16 and bf16 keep 2 + 2 + 12 bytes per parameter (half-precision weights
// and gradients, fp32 master weights, momentum and variance), fp32 keeps 4 + 4 + 8. ZeRO-1
// partitions optimizer states, ZeRO-2 also gradients, ZeRO-3 also parameters, over the
// data-parallel degree; offloaded states leave the GPU; model parallelism splits everything.
MemoryUse memoryPerGpu(const Profile& profile, const TrainingRun& run);

// Whether the run fits in GPU memory and its stage is not one the profile declares broken.
bool fits(const Profile& profile, const TrainingRun& run);

// The largest micro-batch that fits at this run's stage, offloading and parallelism; 0 when none.
std::int64_t largestMicroBatch(const Profile& profile, const TrainingRun& run);

// The step times DeepSpeed's timers report at the end of an autotuning run: means per micro-step
// over the last optimizer step, in µs. The optimizer's work happens once per optimizer step, so
// its mean over the gradient-accumulation micro-steps is that time ÷ gas.
struct StepTimes {
  double forward = 0;
  double backward = 0;
  double step = 0;
};

struct Measurement {
  StepTimes times;
  double latencyMicros = 0;  // one optimizer step: (fwd + bwd + step) × gas
  double flopsPerGpu = 0;    // floating-point operations per second on each GPU
  double throughput = 0;     // samples/s: train_batch_size × 1e6 ÷ latency
};

// The run measured with its steps sped up by `speed` (the noise factor, 1 for the model itself).
Measurement measure(const Profile& profile, const TrainingRun& run, double speed = 1.0);

// 1 + ε with |ε| ≤ profile.noise, the same for the same profile seed, stage, micro-batch,
// gradient accumulation and environment seed (AUTOTUNE_SIM_SEED).
double noiseFactor(const Profile& profile, const TrainingRun& run, std::uint64_t environmentSeed);

}  // namespace autotune::trialsim
