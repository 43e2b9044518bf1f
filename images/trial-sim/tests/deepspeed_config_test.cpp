#include "deepspeed_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace autotune::trialsim {
namespace {

using nlohmann::json;

const Parallelism kSixteenGpus{16, 1};

CheckedConfig accepted(const json& config, const Parallelism& parallelism = kSixteenGpus) {
  const auto checked = checkConfig(config, parallelism);
  EXPECT_TRUE(checked) << checked.error();
  return checked.value_or(CheckedConfig{});
}

std::string refused(const json& config, const Parallelism& parallelism = kSixteenGpus) {
  const auto checked = checkConfig(config, parallelism);
  EXPECT_FALSE(checked) << config.dump();
  return checked ? std::string() : checked.error();
}

TEST(DeepSpeedConfig, MicroBatchAndAccumulationGiveTheTrainBatch) {
  const TrainingRun run =
      accepted({{"train_micro_batch_size_per_gpu", 3}, {"gradient_accumulation_steps", 2}}).run;
  EXPECT_EQ(run.trainBatch, 96);
  EXPECT_EQ(run.microBatch, 3);
  EXPECT_EQ(run.gradientAccumulation, 2);
}

TEST(DeepSpeedConfig, TrainBatchAndMicroBatchGiveTheAccumulation) {
  const TrainingRun run =
      accepted({{"train_batch_size", 96}, {"train_micro_batch_size_per_gpu", 3}}).run;
  EXPECT_EQ(run.gradientAccumulation, 2);
}

TEST(DeepSpeedConfig, TrainBatchAndAccumulationGiveTheMicroBatch) {
  const TrainingRun run =
      accepted({{"train_batch_size", 96}, {"gradient_accumulation_steps", 2}}).run;
  EXPECT_EQ(run.microBatch, 3);
}

TEST(DeepSpeedConfig, OneBatchKeyAloneMeansNoAccumulation) {
  const TrainingRun fromMicro = accepted({{"train_micro_batch_size_per_gpu", 3}}).run;
  EXPECT_EQ(fromMicro.trainBatch, 48);
  EXPECT_EQ(fromMicro.gradientAccumulation, 1);
  const TrainingRun fromTrain = accepted({{"train_batch_size", 48}}).run;
  EXPECT_EQ(fromTrain.microBatch, 3);
  EXPECT_EQ(fromTrain.gradientAccumulation, 1);
}

TEST(DeepSpeedConfig, TheWorldSizeOfTheBatchRuleIsTheDataParallelDegree) {
  const TrainingRun run = accepted({{"train_micro_batch_size_per_gpu", 3}}, Parallelism{16, 4}).run;
  EXPECT_EQ(run.trainBatch, 12);
}

TEST(DeepSpeedConfig, AnInconsistentBatchIsDeepSpeedsAssertion) {
  EXPECT_EQ(refused({{"train_batch_size", 50},
                     {"train_micro_batch_size_per_gpu", 3},
                     {"gradient_accumulation_steps", 1}}),
            "AssertionError: Check batch related parameters. train_batch_size is not equal to "
            "micro_batch_per_gpu * gradient_acc_step * world_size 50 != 3 * 1 * 16");
}

TEST(DeepSpeedConfig, ADerivedBatchThatDoesNotAddUpIsTheSameAssertion) {
  EXPECT_EQ(refused({{"train_batch_size", 50}, {"train_micro_batch_size_per_gpu", 3}}),
            "AssertionError: Check batch related parameters. train_batch_size is not equal to "
            "micro_batch_per_gpu * gradient_acc_step * world_size 50 != 3 * 1 * 16");
}

TEST(DeepSpeedConfig, AutoIsNotAMicroBatch) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", "auto"}}),
            "AssertionError: train_micro_batch_size_per_gpu must be an integer, got \"auto\"");
}

TEST(DeepSpeedConfig, AFractionIsNotAnAccumulationStep) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 2}, {"gradient_accumulation_steps", 2.5}}),
            "AssertionError: gradient_accumulation_steps must be an integer, got 2.5");
}

TEST(DeepSpeedConfig, BatchValuesMustBePositive) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 0}, {"gradient_accumulation_steps", 1}}),
            "AssertionError: Train batch size: 0 has to be greater than 0");
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 1}, {"gradient_accumulation_steps", -1}}),
            "AssertionError: Train batch size: -16 has to be greater than 0");
  EXPECT_EQ(refused({{"train_batch_size", 8}}),
            "AssertionError: Micro batch size per gpu: 0 has to be greater than 0");
}

TEST(DeepSpeedConfig, NoBatchKeyIsRefused) {
  EXPECT_EQ(refused({{"gradient_accumulation_steps", 1}}),
            "AssertionError: Either train_batch_size or train_micro_batch_size_per_gpu needs to "
            "be set");
}

TEST(DeepSpeedConfig, ADivisionByAZeroMicroBatchIsPythonsError) {
  EXPECT_EQ(refused({{"train_batch_size", 16}, {"train_micro_batch_size_per_gpu", 0}}),
            "ZeroDivisionError: integer division or modulo by zero");
}

TEST(DeepSpeedConfig, TheZeroStageIsZeroToThree) {
  EXPECT_EQ(accepted({{"train_micro_batch_size_per_gpu", 1}}).run.stage, 0);
  EXPECT_EQ(accepted({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 3}}}})
                .run.stage,
            3);
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 4}}}}),
            "AssertionError: zero_optimization.stage must be an integer from 0 to 3, got 4");
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 1},
                     {"zero_optimization", {{"stage", json::array({1, 2})}}}}),
            "AssertionError: zero_optimization.stage must be an integer from 0 to 3, got [1,2]");
}

TEST(DeepSpeedConfig, OffloadingCountsWhereDeepSpeedHonoursIt) {
  const json cpu = {{"device", "cpu"}};
  const auto offload = [&](int stage) {
    return accepted({{"train_micro_batch_size_per_gpu", 1},
                     {"zero_optimization",
                      {{"stage", stage}, {"offload_optimizer", cpu}, {"offload_param", cpu}}}})
        .run;
  };
  EXPECT_FALSE(offload(0).offloadOptimizer);
  EXPECT_TRUE(offload(1).offloadOptimizer);
  EXPECT_FALSE(offload(2).offloadParameters);
  EXPECT_TRUE(offload(3).offloadParameters);
  const TrainingRun none =
      accepted({{"train_micro_batch_size_per_gpu", 1},
                {"zero_optimization", {{"stage", 3}, {"offload_optimizer", {{"device", "none"}}}}}})
          .run;
  EXPECT_FALSE(none.offloadOptimizer);
}

TEST(DeepSpeedConfig, TheAutotuningSectionSaysWhereResultsGo) {
  const AutotuningOutputs defaults = accepted({{"train_micro_batch_size_per_gpu", 1}}).outputs;
  EXPECT_EQ(defaults.metricPath, "autotuning_metric.json");
  EXPECT_EQ(defaults.modelInfoPath, "autotuning_model_info.json");
  EXPECT_FALSE(defaults.profileModel);

  const AutotuningOutputs set = accepted({{"train_micro_batch_size_per_gpu", 1},
                                          {"autotuning",
                                           {{"enabled", true},
                                            {"metric_path", "/tmp/m.json"},
                                            {"model_info_path", "/tmp/info.json"},
                                            {"model_info", {{"profile", true}}}}}})
                                    .outputs;
  EXPECT_EQ(set.metricPath, "/tmp/m.json");
  EXPECT_EQ(set.modelInfoPath, "/tmp/info.json");
  EXPECT_TRUE(set.profileModel);
}

TEST(DeepSpeedConfig, ProfilingIsTrueOrFalse) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 1},
                     {"autotuning", {{"model_info", {{"profile", "yes"}}}}}}),
            "AssertionError: autotuning.model_info.profile must be true or false, got \"yes\"");
}

TEST(DeepSpeedConfig, AWorldSizeThatModelParallelismDoesNotDivideIsRefused) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 1}}, Parallelism{16, 3}),
            "AssertionError: world size 16 is not divisible by model parallel size 3");
}

TEST(DeepSpeedConfig, AConfigMustBeAnObject) {
  EXPECT_EQ(refused(json::array()), "AssertionError: the DeepSpeed config must be a JSON object");
}

}  // namespace
}  // namespace autotune::trialsim
