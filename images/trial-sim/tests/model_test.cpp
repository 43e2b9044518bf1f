#include "model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>

#include "simulation.h"

namespace autotune::trialsim {
namespace {

constexpr double kMillion = 1e6;

// A model small enough that its numbers can be checked by hand.
Profile handProfile() {
  Profile profile;
  profile.name = "hand";
  profile.numParameters = 1'000'000;
  profile.precision = Precision::kFp16;
  profile.gpus = 4;
  profile.gpuMemoryBytes = 100 * kMillion;
  profile.tokensPerSample = 100;
  profile.activationBytesPerSample = 10 * kMillion;
  profile.fixedOverheadBytes = 0;
  profile.fixedStepMicros = 1000;
  profile.microsPerSample = 100;
  profile.optimizerStepMicros = 400;
  profile.stageCost = {1.0, 1.0, 1.5, 2.0};
  profile.pressureStart = 0.9;
  profile.pressureSlowdown = 0;
  profile.noise = 0.01;
  profile.seed = 7;
  return profile;
}

TrainingRun runAt(int stage, std::int64_t microBatch, std::int64_t accumulation = 1,
                  Parallelism parallelism = {4, 1}) {
  TrainingRun run;
  run.stage = stage;
  run.microBatch = microBatch;
  run.gradientAccumulation = accumulation;
  run.trainBatch = microBatch * accumulation * parallelism.dataParallel();
  run.parallelism = parallelism;
  return run;
}

TEST(Memory, EachStagePartitionsOneMoreStateOverTheDataParallelDegree) {
  const Profile profile = handProfile();
  EXPECT_DOUBLE_EQ(memoryPerGpu(profile, runAt(0, 0)).total(), 16 * kMillion);
  EXPECT_DOUBLE_EQ(memoryPerGpu(profile, runAt(1, 0)).total(), (2 + 2 + 3) * kMillion);
  EXPECT_DOUBLE_EQ(memoryPerGpu(profile, runAt(2, 0)).total(), (2 + 0.5 + 3) * kMillion);
  EXPECT_DOUBLE_EQ(memoryPerGpu(profile, runAt(3, 0)).total(), 4 * kMillion);
}

TEST(Memory, Fp32KeepsFourFourAndEightBytesPerParameter) {
  Profile profile = handProfile();
  profile.precision = Precision::kFp32;
  const MemoryUse use = memoryPerGpu(profile, runAt(0, 0));
  EXPECT_DOUBLE_EQ(use.parameters, 4 * kMillion);
  EXPECT_DOUBLE_EQ(use.gradients, 4 * kMillion);
  EXPECT_DOUBLE_EQ(use.optimizerStates, 8 * kMillion);
}

TEST(Memory, OffloadedStatesLeaveTheGpu) {
  const Profile profile = handProfile();
  TrainingRun run = runAt(3, 1);
  run.offloadOptimizer = true;
  run.offloadParameters = true;
  const MemoryUse use = memoryPerGpu(profile, run);
  EXPECT_EQ(use.optimizerStates, 0);
  EXPECT_EQ(use.parameters, 0);
  EXPECT_DOUBLE_EQ(use.gradients, 0.5 * kMillion);
}

TEST(Memory, ModelParallelismSplitsTheModelStates) {
  const Profile profile = handProfile();
  EXPECT_DOUBLE_EQ(memoryPerGpu(profile, runAt(0, 0, 1, {4, 2})).total(), 8 * kMillion);
}

TEST(Memory, TheLargestMicroBatchIsTheLastThatFits) {
  Profile profile = handProfile();
  // ZeRO-0: 16 MB of states leave 84 MB, eight 10 MB samples.
  EXPECT_EQ(largestMicroBatch(profile, runAt(0, 1)), 8);
  EXPECT_TRUE(fits(profile, runAt(0, 8)));
  EXPECT_FALSE(fits(profile, runAt(0, 9)));
  profile.failingStages = {false, false, true, false};
  EXPECT_EQ(largestMicroBatch(profile, runAt(2, 1)), 0);
  EXPECT_FALSE(fits(profile, runAt(2, 1)));
}

TEST(Timing, LatencyIsTheAccumulatedMicroStepsAndOneOptimizerStep) {
  const Profile profile = handProfile();
  // Micro-step (1000 + 100 × 2) µs; the optimizer step 400 µs at ZeRO-0.
  const Measurement measured = measure(profile, runAt(0, 2, 3));
  EXPECT_DOUBLE_EQ(measured.times.forward + measured.times.backward, 1200);
  EXPECT_DOUBLE_EQ(measured.times.backward, 2 * measured.times.forward);
  EXPECT_DOUBLE_EQ(measured.times.step, 400.0 / 3);
  EXPECT_DOUBLE_EQ(measured.latencyMicros, 3 * 1200 + 400);
}

TEST(Timing, ThroughputIsTheTrainBatchOverTheLatency) {
  const Profile profile = handProfile();
  const TrainingRun run = runAt(0, 2, 3);
  const Measurement measured = measure(profile, run);
  EXPECT_DOUBLE_EQ(measured.throughput,
                   static_cast<double>(run.trainBatch) * 1e6 / measured.latencyMicros);
  EXPECT_DOUBLE_EQ(measured.flopsPerGpu, 6.0 * 1e6 * 100 * 2 * 1e6 * 3 / measured.latencyMicros);
}

TEST(Timing, ZeroOnePartitionsTheOptimizerStep) {
  const Profile profile = handProfile();
  EXPECT_DOUBLE_EQ(measure(profile, runAt(1, 2)).times.step, 100);
}

TEST(Timing, StagesCostTheirCommunication) {
  const Profile profile = handProfile();
  const double zeroOne = measure(profile, runAt(1, 2)).times.forward;
  EXPECT_DOUBLE_EQ(measure(profile, runAt(2, 2)).times.forward, 1.5 * zeroOne);
  EXPECT_DOUBLE_EQ(measure(profile, runAt(3, 2)).times.forward, 2.0 * zeroOne);
}

TEST(Timing, OffloadingSlowsEveryMicroStep) {
  const Profile profile = handProfile();
  TrainingRun run = runAt(3, 2);
  const double onGpu = measure(profile, run).times.forward;
  run.offloadOptimizer = true;
  EXPECT_DOUBLE_EQ(measure(profile, run).times.forward, onGpu * profile.offloadOptimizerCost);
  run.offloadParameters = true;
  EXPECT_DOUBLE_EQ(measure(profile, run).times.forward,
                   onGpu * profile.offloadOptimizerCost * profile.offloadParamCost);
}

TEST(Timing, AllocatorPressureSlowsStepsNearAFullGpu) {
  Profile profile = handProfile();
  profile.pressureSlowdown = 2;
  // ZeRO-0 at micro-batch 7 uses 86% of memory, at 8 96%: (0.96 − 0.9) / 0.1 = 0.6 deep.
  const double relaxed = measure(profile, runAt(0, 7)).times.forward;
  EXPECT_DOUBLE_EQ(relaxed, (1000 + 700) / 3.0);
  EXPECT_NEAR(measure(profile, runAt(0, 8)).times.forward, (1000 + 800) / 3.0 * (1 + 2 * 0.36),
              1e-9);
}

TEST(Noise, TheSameConfigurationMeasuresTheSame) {
  const Profile profile = handProfile();
  EXPECT_EQ(noiseFactor(profile, runAt(1, 2, 2), 0), noiseFactor(profile, runAt(1, 2, 2), 0));
}

TEST(Noise, StaysWithinTheProfilesBoundAndVaries) {
  const Profile profile = handProfile();
  std::set<double> factors;
  for (int stage = 0; stage < kZeroStages; ++stage) {
    for (std::int64_t micro = 1; micro <= 8; ++micro) {
      for (std::uint64_t seed = 0; seed < 4; ++seed) {
        const double factor = noiseFactor(profile, runAt(stage, micro), seed);
        EXPECT_LE(std::abs(factor - 1), profile.noise);
        factors.insert(factor);
      }
    }
  }
  EXPECT_EQ(factors.size(), 4U * 8 * 4);
}

TEST(Noise, ScalesTheThroughputByItsFactor) {
  const Profile profile = handProfile();
  const TrainingRun run = runAt(1, 4);
  const LaunchResult result = simulate(profile, {run, {}}, 3);
  const auto* measured = std::get_if<Measurement>(&result);
  ASSERT_NE(measured, nullptr);
  EXPECT_NEAR(measured->throughput, measure(profile, run).throughput * noiseFactor(profile, run, 3),
              1e-9);
}

TEST(Simulation, AMicroBatchThatDoesNotFitIsPyTorchsOutOfMemoryError) {
  const Profile profile = handProfile();
  const LaunchResult result = simulate(profile, {runAt(0, 9), {}}, 0);
  const auto* outOfMemory = std::get_if<OutOfMemory>(&result);
  ASSERT_NE(outOfMemory, nullptr);
  EXPECT_TRUE(outOfMemory->message.starts_with(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate "))
      << outOfMemory->message;
  EXPECT_NE(outOfMemory->message.find("(GPU 0; 95.37 MiB total capacity;"), std::string::npos)
      << outOfMemory->message;
}

TEST(Simulation, AFailingStageRunsOutOfMemoryAtAnyMicroBatchButStillProfiles) {
  Profile profile = handProfile();
  profile.failingStages = {false, false, false, true};
  const LaunchResult training = simulate(profile, {runAt(3, 1), {}}, 0);
  EXPECT_TRUE(std::holds_alternative<OutOfMemory>(training));
  CheckedConfig profiling{runAt(3, 1), {}};
  profiling.outputs.profileModel = true;
  EXPECT_TRUE(std::holds_alternative<ModelReport>(simulate(profile, profiling, 0)));
}

TEST(Simulation, AProfilingRunThatDoesNotFitRunsOutOfMemory) {
  CheckedConfig profiling{runAt(0, 9), {}};
  profiling.outputs.profileModel = true;
  EXPECT_TRUE(std::holds_alternative<OutOfMemory>(simulate(handProfile(), profiling, 0)));
}

TEST(Simulation, TheReportsAreDeepSpeedsJson) {
  const nlohmann::json report = toJson(ModelReport{335144976, 324358144});
  EXPECT_EQ(report, nlohmann::json::parse(R"({"num_params": 335144976,
      "trainable_num_params": 335144976, "activation_mem_per_gpu": 324358144, "rank": 0})"));
  const nlohmann::json metrics = toJson(measure(handProfile(), runAt(1, 2)));
  for (const auto* key : {"fwd", "bwd", "step", "latency", "FLOPS_per_gpu", "throughput"}) {
    EXPECT_TRUE(metrics.at(key).is_number_float()) << key;
  }
  EXPECT_EQ(metrics.at("rank"), 0);
}

TEST(Simulation, OutOfMemoryMessagesReadLikePyTorchsOnAV100) {
  const std::string message = outOfMemoryMessage(32 * kGiB, 32.01 * kGiB);
  EXPECT_NE(message.find("Tried to allocate 1.93 GiB (GPU 0; 32.00 GiB total capacity; 30.08 GiB "
                         "already allocated; 1.28 GiB free; 30.40 GiB reserved in total by "
                         "PyTorch)"),
            std::string::npos)
      << message;
  // However far over, the failing allocation is one tensor.
  EXPECT_NE(outOfMemoryMessage(32 * kGiB, 64 * kGiB).find("Tried to allocate 2.00 GiB"),
            std::string::npos);
}

}  // namespace
}  // namespace autotune::trialsim
