#include "model.h"

#include <cmath>

namespace autotune::trialsim {
namespace {

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

double usedFraction(const Profile& profile, const TrainingRun& run) {
  return memoryPerGpu(profile, run).total() / profile.gpuMemoryBytes;
}

// Near a full GPU the caching allocator frees and retries, and steps slow down.
double pressureSlowdown(const Profile& profile, const TrainingRun& run) {
  const double used = usedFraction(profile, run);
  if (used <= profile.pressureStart) {
    return 1;
  }
  const double depth = (used - profile.pressureStart) / (1 - profile.pressureStart);
  return 1 + profile.pressureSlowdown * depth * depth;
}

// Forward and backward of one micro-batch, in µs.
double microStepMicros(const Profile& profile, const TrainingRun& run) {
  const double samples = static_cast<double>(run.microBatch) / run.parallelism.modelParallel;
  double micros = profile.fixedStepMicros + profile.microsPerSample * samples;
  micros *= profile.stageCost.at(static_cast<std::size_t>(run.stage));
  micros *= pressureSlowdown(profile, run);
  if (run.offloadOptimizer) {
    micros *= profile.offloadOptimizerCost;
  }
  if (run.offloadParameters) {
    micros *= profile.offloadParamCost;
  }
  return micros;
}

// The Adam update once per optimizer step, over this GPU's share of the parameters.
double optimizerStepMicros(const Profile& profile, const TrainingRun& run) {
  const double partitions = run.stage >= 1 ? run.parallelism.dataParallel() : 1;
  return profile.optimizerStepMicros / run.parallelism.modelParallel / partitions;
}

std::uint64_t splitMix(std::uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27U)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31U);
}

}  // namespace

MemoryUse memoryPerGpu(const Profile& profile, const TrainingRun& run) {
  const BytesPerParameter bytes = bytesPerParameter(profile.precision);
  const double parameters =
      static_cast<double>(profile.numParameters) / run.parallelism.modelParallel;
  const double dataParallel = run.parallelism.dataParallel();
  MemoryUse use;
  use.parameters = parameters * bytes.parameters / (run.stage >= 3 ? dataParallel : 1);
  use.gradients = parameters * bytes.gradients / (run.stage >= 2 ? dataParallel : 1);
  use.optimizerStates = parameters * bytes.optimizerStates / (run.stage >= 1 ? dataParallel : 1);
  if (run.offloadOptimizer) {
    use.optimizerStates = 0;
  }
  if (run.offloadParameters) {
    use.parameters = 0;
  }
  use.activations = profile.activationBytesPerSample * static_cast<double>(run.microBatch);
  use.fixedOverhead = profile.fixedOverheadBytes;
  return use;
}

bool fits(const Profile& profile, const TrainingRun& run) {
  return !profile.failingStages.at(static_cast<std::size_t>(run.stage)) &&
         memoryPerGpu(profile, run).total() <= profile.gpuMemoryBytes;
}

std::int64_t largestMicroBatch(const Profile& profile, const TrainingRun& run) {
  if (profile.failingStages.at(static_cast<std::size_t>(run.stage))) {
    return 0;
  }
  const auto fitsWith = [&](std::int64_t microBatch) {
    TrainingRun probe = run;
    probe.microBatch = microBatch;
    return fits(profile, probe);
  };
  TrainingRun empty = run;
  empty.microBatch = 0;
  const double room = profile.gpuMemoryBytes - memoryPerGpu(profile, empty).total();
  if (room <= 0) {
    return 0;
  }
  // The closed form, then settled against fits() itself so the two never disagree on rounding.
  auto largest = static_cast<std::int64_t>(std::floor(room / profile.activationBytesPerSample));
  while (fitsWith(largest + 1)) {
    ++largest;
  }
  while (largest > 0 && !fitsWith(largest)) {
    --largest;
  }
  return largest;
}

Measurement measure(const Profile& profile, const TrainingRun& run, double speed) {
  const double micro = microStepMicros(profile, run) / speed;
  const double optimizer = optimizerStepMicros(profile, run) / speed;
  const auto accumulation = static_cast<double>(run.gradientAccumulation);
  Measurement measured;
  // Backward costs about twice the forward.
  measured.times.forward = micro / 3;
  measured.times.backward = micro * 2 / 3;
  measured.times.step = optimizer / accumulation;
  measured.latencyMicros =
      (measured.times.forward + measured.times.backward + measured.times.step) * accumulation;
  // DeepSpeed: the profiled forward flops × 3 for forward and backward, ≈ 6 × parameters × tokens.
  const double flopsPerMicroStep = 6.0 * static_cast<double>(profile.numParameters) *
                                   profile.tokensPerSample * static_cast<double>(run.microBatch) /
                                   run.parallelism.modelParallel;
  measured.flopsPerGpu = flopsPerMicroStep * 1e6 * accumulation / measured.latencyMicros;
  measured.throughput = static_cast<double>(run.trainBatch) * 1e6 / measured.latencyMicros;
  return measured;
}

double noiseFactor(const Profile& profile, const TrainingRun& run, std::uint64_t environmentSeed) {
  std::uint64_t hash = splitMix(profile.seed);
  for (const std::uint64_t part :
       {static_cast<std::uint64_t>(run.stage), static_cast<std::uint64_t>(run.microBatch),
        static_cast<std::uint64_t>(run.gradientAccumulation), environmentSeed}) {
    hash = splitMix(hash ^ part);
  }
  const double uniform = static_cast<double>(hash >> 11U) * 0x1.0p-53;  // in [0, 1)
  return 1 + profile.noise * (2 * uniform - 1);
}

}  // namespace autotune::trialsim
