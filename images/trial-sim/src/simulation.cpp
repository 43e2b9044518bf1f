#include "simulation.h"

#include <algorithm>
#include <array>
#include <cstdio>

namespace autotune::trialsim {
namespace {

constexpr double kMiB = 1024.0 * 1024;

std::string formatBytes(double bytes) {
  std::array<char, 32> text{};
  if (bytes >= kGiB) {
    std::snprintf(text.data(), text.size(), "%.2f GiB", bytes / kGiB);
  } else {
    std::snprintf(text.data(), text.size(), "%.2f MiB", bytes / kMiB);
  }
  return text.data();
}

bool stageFails(const Profile& profile, int stage) {
  return profile.failingStages.at(static_cast<std::size_t>(stage));
}

}  // namespace

LaunchResult simulate(const Profile& profile, const CheckedConfig& config,
                      std::uint64_t environmentSeed) {
  const TrainingRun& run = config.run;
  const double needed = memoryPerGpu(profile, run).total();
  if (config.outputs.profileModel) {
    // DeepSpeed reports the model during the first forward and exits, so a stage that fails later
    // in its step (failingStages) still profiles; only running out of memory stops it.
    if (needed > profile.gpuMemoryBytes) {
      return OutOfMemory{outOfMemoryMessage(profile.gpuMemoryBytes, needed)};
    }
    return ModelReport{profile.numParameters, profile.reportedActivationBytes()};
  }
  if (stageFails(profile, run.stage)) {
    // The published failures of these stages are out-of-memory errors whatever the micro-batch.
    return outOfMemoryAnyway(profile, run);
  }
  if (!fits(profile, run)) {
    return OutOfMemory{outOfMemoryMessage(profile.gpuMemoryBytes, needed)};
  }
  return measure(profile, run, noiseFactor(profile, run, environmentSeed));
}

OutOfMemory outOfMemoryAnyway(const Profile& profile, const TrainingRun& run) {
  const double overshoot = std::max(memoryPerGpu(profile, run).total(), profile.gpuMemoryBytes) +
                           profile.activationBytesPerSample;
  return OutOfMemory{outOfMemoryMessage(profile.gpuMemoryBytes, overshoot)};
}

nlohmann::json toJson(const ModelReport& report) {
  return {{"num_params", report.numParameters},
          {"trainable_num_params", report.numParameters},
          {"activation_mem_per_gpu", static_cast<std::int64_t>(report.activationBytesPerGpu)},
          {"rank", 0}};
}

nlohmann::json toJson(const Measurement& measurement) {
  return {{"fwd", measurement.times.forward},
          {"bwd", measurement.times.backward},
          {"step", measurement.times.step},
          {"latency", measurement.latencyMicros},
          {"FLOPS_per_gpu", measurement.flopsPerGpu},
          {"throughput", measurement.throughput},
          {"rank", 0}};
}

nlohmann::json effectiveValues(const TrainingRun& run) {
  return {{"train_micro_batch_size_per_gpu", run.microBatch},
          {"gradient_accumulation_steps", run.gradientAccumulation},
          {"zero_optimization.stage", run.stage},
          {"dp_world_size", run.parallelism.dataParallel()}};
}

std::string outOfMemoryMessage(double capacity, double needed) {
  // The allocator holds a little more than it hands out, and the CUDA context keeps the rest. The
  // allocation that fails is one tensor: more than is free, at most a sixteenth of the GPU.
  const double allocated = 0.94 * capacity;
  const double reserved = 0.95 * capacity;
  const double free = 0.04 * capacity;
  const double smallest = free + 20 * kMiB;
  const double request =
      std::clamp(needed - allocated, smallest, std::max(smallest, capacity / 16));
  return "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate " +
         formatBytes(request) + " (GPU 0; " + formatBytes(capacity) + " total capacity; " +
         formatBytes(allocated) + " already allocated; " + formatBytes(free) + " free; " +
         formatBytes(reserved) + " reserved in total by PyTorch)";
}

}  // namespace autotune::trialsim
