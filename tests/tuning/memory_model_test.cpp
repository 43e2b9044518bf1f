#include "tuning/memory_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace {

using autotune::tuning::estimateMemory;
using autotune::tuning::kFixedOverheadBytes;
using autotune::tuning::largestMicroBatch;
using autotune::tuning::MemoryEstimate;
using autotune::tuning::ModelSize;
using autotune::tuning::Parallelism;
using autotune::tuning::Precision;
using autotune::tuning::precisionOf;
using autotune::tuning::samplesAsInt;
using nlohmann::json;

constexpr std::int64_t kMillion = 1'000'000;
constexpr std::int64_t kV100Memory = 34359738368;  // 32 GiB
constexpr std::int64_t kGpt2LargeParameters = 774'000'000;
constexpr std::int64_t kGpt2LargeActivationBytes = 9'600'000'000;

// A DeepSpeed config with the given precision section ("fp16", "bf16" or "" for fp32) and stage.
json config(const std::string& precision, int stage) {
  json result = {{"zero_optimization", {{"stage", stage}}}};
  if (!precision.empty()) {
    result[precision] = {{"enabled", true}};
  }
  return result;
}

MemoryEstimate estimate(const json& trialConfig, int gpus = 4, int modelParallel = 1) {
  return estimateMemory(ModelSize{kMillion, std::nullopt}, trialConfig,
                        Parallelism{gpus, modelParallel});
}

// Bytes per parameter of each model state, in one GPU's memory.
struct PerParameter {
  double parameters;
  double gradients;
  double optimizerStates;
};

PerParameter perParameter(const MemoryEstimate& memory) {
  const auto n = static_cast<double>(kMillion);
  return {memory.parameters / n, memory.gradients / n, memory.optimizerStates / n};
}

void expectPerParameter(const MemoryEstimate& memory, PerParameter expected) {
  const PerParameter actual = perParameter(memory);
  EXPECT_DOUBLE_EQ(actual.parameters, expected.parameters);
  EXPECT_DOUBLE_EQ(actual.gradients, expected.gradients);
  EXPECT_DOUBLE_EQ(actual.optimizerStates, expected.optimizerStates);
}

std::optional<int> gpt2LargeMicroBatch(int stage) {
  const MemoryEstimate memory =
      estimateMemory(ModelSize{kGpt2LargeParameters, kGpt2LargeActivationBytes},
                     config("fp16", stage), Parallelism{16, 1});
  return largestMicroBatch(memory, kV100Memory);
}

TEST(MemoryModel, Fp16KeepsTwoPlusTwoPlusTwelveBytesPerParameterWithoutZero) {
  expectPerParameter(estimate(config("fp16", 0)), {2, 2, 12});
}

TEST(MemoryModel, Fp32KeepsFourPlusFourPlusEightBytesPerParameterWithoutZero) {
  expectPerParameter(estimate(config("", 0)), {4, 4, 8});
}

TEST(MemoryModel, Zero1PartitionsOptimizerStatesOverDataParallelGpus) {
  expectPerParameter(estimate(config("fp16", 1)), {2, 2, 3});
  expectPerParameter(estimate(config("", 1)), {4, 4, 2});
}

TEST(MemoryModel, Zero2AlsoPartitionsGradients) {
  expectPerParameter(estimate(config("fp16", 2)), {2, 0.5, 3});
  expectPerParameter(estimate(config("", 2)), {4, 1, 2});
}

TEST(MemoryModel, Zero3AlsoPartitionsParameters) {
  expectPerParameter(estimate(config("fp16", 3)), {0.5, 0.5, 3});
  expectPerParameter(estimate(config("", 3)), {1, 1, 2});
}

TEST(MemoryModel, Bf16NeedsAsMuchMemoryAsFp16) {
  for (int stage = 0; stage <= 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const PerParameter bf16 = perParameter(estimate(config("bf16", stage)));
    const PerParameter fp16 = perParameter(estimate(config("fp16", stage)));
    EXPECT_DOUBLE_EQ(bf16.parameters, fp16.parameters);
    EXPECT_DOUBLE_EQ(bf16.gradients, fp16.gradients);
    EXPECT_DOUBLE_EQ(bf16.optimizerStates, fp16.optimizerStates);
  }
}

TEST(MemoryModel, PartitionsOverTheDataParallelDegreeNotAllGpus) {
  // 8 GPUs with model parallelism 2: each GPU holds half the model, and ZeRO partitions that
  // half over the 4 data-parallel replicas.
  const MemoryEstimate zero0 = estimate(config("fp16", 0), 8, 2);
  const MemoryEstimate zero3 = estimate(config("fp16", 3), 8, 2);
  EXPECT_DOUBLE_EQ(zero0.parameters, kMillion / 2.0 * 2);
  EXPECT_DOUBLE_EQ(zero3.parameters, zero0.parameters / 4);
  EXPECT_DOUBLE_EQ(zero3.gradients, zero0.gradients / 4);
  EXPECT_DOUBLE_EQ(zero3.optimizerStates, zero0.optimizerStates / 4);
}

TEST(MemoryModel, OffloadingTheOptimizerToCpuFreesOptimizerStates) {
  json trial = config("fp16", 2);
  trial["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
  const MemoryEstimate memory = estimate(trial);
  EXPECT_EQ(memory.optimizerStates, 0);
  EXPECT_GT(memory.parameters, 0);
  EXPECT_GT(memory.gradients, 0);
}

TEST(MemoryModel, OffloadingParametersFreesParameters) {
  json trial = config("fp16", 3);
  trial["zero_optimization"]["offload_param"] = {{"device", "nvme"}};
  const MemoryEstimate memory = estimate(trial);
  EXPECT_EQ(memory.parameters, 0);
  EXPECT_GT(memory.optimizerStates, 0);
}

TEST(MemoryModel, OffloadToDeviceNoneKeepsStatesOnTheGpu) {
  json trial = config("fp16", 3);
  trial["zero_optimization"]["offload_optimizer"] = {{"device", "none"}};
  trial["zero_optimization"]["offload_param"] = {{"device", "none"}};
  const MemoryEstimate memory = estimate(trial);
  EXPECT_GT(memory.parameters, 0);
  EXPECT_GT(memory.optimizerStates, 0);
}

TEST(MemoryModel, TotalAddsActivationsPerSampleAndOverhead) {
  const MemoryEstimate memory =
      estimateMemory(ModelSize{kMillion, 1000}, config("fp16", 0), Parallelism{1, 1});
  ASSERT_TRUE(memory.total(3).has_value());
  EXPECT_DOUBLE_EQ(*memory.total(3), 16.0 * kMillion + kFixedOverheadBytes + 3000);
}

TEST(LargestMicroBatch, Gpt2LargeOn16V100sFitsTwoThenThreeSamplesPerStage) {
  EXPECT_EQ(gpt2LargeMicroBatch(0), 2);
  EXPECT_EQ(gpt2LargeMicroBatch(1), 3);
  EXPECT_EQ(gpt2LargeMicroBatch(2), 3);
  EXPECT_EQ(gpt2LargeMicroBatch(3), 3);
}

TEST(LargestMicroBatch, IsZeroWhenModelStatesAloneDoNotFit) {
  const MemoryEstimate memory =
      estimateMemory(ModelSize{10'000'000'000, 1000}, config("fp16", 0), Parallelism{16, 1});
  EXPECT_EQ(largestMicroBatch(memory, kV100Memory), 0);
}

// One byte of activations a sample, as a broken trial may report: the largest micro-batch is
// int's largest, never a negative number from an overflowing conversion.
TEST(LargestMicroBatch, SaturatesRatherThanOverflows) {
  const MemoryEstimate memory =
      estimateMemory(ModelSize{kGpt2LargeParameters, 1}, config("fp16", 1), Parallelism{16, 1});
  EXPECT_EQ(largestMicroBatch(memory, kV100Memory), std::numeric_limits<int>::max());
  EXPECT_EQ(samplesAsInt(std::nan("")), 0);
  EXPECT_EQ(samplesAsInt(-1e300), std::numeric_limits<int>::min());
  EXPECT_EQ(samplesAsInt(41.0), 41);
}

TEST(LargestMicroBatch, IsUnknownWithoutActivationMemory) {
  const MemoryEstimate memory = estimateMemory(ModelSize{kGpt2LargeParameters, std::nullopt},
                                               config("fp16", 1), Parallelism{16, 1});
  EXPECT_EQ(largestMicroBatch(memory, kV100Memory), std::nullopt);
  EXPECT_EQ(memory.total(1), std::nullopt);
}

TEST(PrecisionOf, ReadsTheEnabledPrecisionSection) {
  EXPECT_EQ(precisionOf(config("fp16", 0)), Precision::kFp16);
  EXPECT_EQ(precisionOf(config("bf16", 0)), Precision::kBf16);
  EXPECT_EQ(precisionOf(json::object()), Precision::kFp32);
}

TEST(PrecisionOf, DisabledSectionsMeanFp32) {
  EXPECT_EQ(precisionOf({{"fp16", {{"enabled", false}}}}), Precision::kFp32);
  EXPECT_EQ(precisionOf({{"bf16", {{"enabled", false}}}}), Precision::kFp32);
}

// Hugging Face's templates leave precision to the Trainer's --fp16 / --bf16 flags.
TEST(PrecisionOf, AutoIsAssumedSixteenBitMixedPrecision) {
  const json automatic = {{"fp16", {{"enabled", "auto"}}},
                          {"bf16", {{"enabled", "auto"}}},
                          {"zero_optimization", {{"stage", 2}}}};
  EXPECT_EQ(precisionOf(automatic), Precision::kHalfAuto);
  expectPerParameter(estimate(automatic), {2, 2.0 / 4, 12.0 / 4});
  EXPECT_EQ(precisionOf({{"bf16", {{"enabled", "auto"}}}, {"fp16", {{"enabled", true}}}}),
            Precision::kFp16);
}

}  // namespace
