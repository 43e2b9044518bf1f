#include "trainer_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "deepspeed_config.h"

namespace autotune::trialsim {
namespace {

using nlohmann::json;

const Parallelism kTrainerParallelism{16, 1};

TrainerArguments batchFlags(std::optional<int> perDevice, std::optional<int> accumulation) {
  TrainerArguments trainer;
  trainer.perDeviceTrainBatchSize = perDevice;
  trainer.gradientAccumulationSteps = accumulation;
  return trainer;
}

TrainerArguments precisionFlags(std::optional<bool> fp16, std::optional<bool> bf16) {
  TrainerArguments trainer;
  trainer.fp16 = fp16;
  trainer.bf16 = bf16;
  return trainer;
}

// The config the Trainer hands to DeepSpeed.
json handedOver(const json& config, const TrainerArguments& trainer,
                const Parallelism& parallelism = kTrainerParallelism) {
  const auto resolved = applyTrainerArguments(config, trainer, parallelism);
  EXPECT_TRUE(resolved) << resolved.error();
  return resolved.value_or(json());
}

std::string refused(const json& config, const TrainerArguments& trainer,
                    const Parallelism& parallelism = kTrainerParallelism) {
  const auto resolved = applyTrainerArguments(config, trainer, parallelism);
  EXPECT_FALSE(resolved) << resolved->dump();
  return resolved ? std::string() : resolved.error();
}

// What DeepSpeed trains with the config the Trainer handed over.
TrainingRun trained(const json& config, const TrainerArguments& trainer,
                    const Parallelism& parallelism = kTrainerParallelism) {
  const auto checked = checkConfig(handedOver(config, trainer, parallelism), parallelism);
  EXPECT_TRUE(checked) << checked.error();
  return checked.value_or(CheckedConfig{}).run;
}

// Hugging Face's recommended config: every value the Trainer knows left to it.
const json kAllAuto = {
    {"train_batch_size", "auto"},
    {"train_micro_batch_size_per_gpu", "auto"},
    {"gradient_accumulation_steps", "auto"},
    {"gradient_clipping", "auto"},
    {"fp16", {{"enabled", "auto"}}},
    {"bf16", {{"enabled", "auto"}}},
    {"optimizer",
     {{"type", "AdamW"},
      {"params", {{"lr", "auto"}, {"betas", "auto"}, {"eps", "auto"}, {"weight_decay", "auto"}}}}},
    {"scheduler",
     {{"type", "WarmupLR"},
      {"params",
       {{"warmup_min_lr", "auto"}, {"warmup_max_lr", "auto"}, {"warmup_num_steps", "auto"}}}}}};

const std::string kMismatchHeader =
    "ValueError: Please correct the following DeepSpeed config values that mismatch "
    "TrainingArguments values:\n";
const std::string kMismatchAdvice =
    "The easiest method is to set these DeepSpeed config values to 'auto'.";

TEST(TrainerConfig, AnAutoMicroBatchIsThePerDeviceBatchSizeFlag) {
  const TrainingRun run = trained(kAllAuto, batchFlags(3, std::nullopt));
  EXPECT_EQ(run.microBatch, 3);
  EXPECT_EQ(run.gradientAccumulation, 1);
  EXPECT_EQ(run.trainBatch, 48);
}

TEST(TrainerConfig, AnAutoMicroBatchWithoutItsFlagIsTheTrainersDefaultOfEight) {
  const TrainingRun run = trained(kAllAuto, batchFlags(std::nullopt, 2));
  EXPECT_EQ(run.microBatch, 8);
  EXPECT_EQ(run.gradientAccumulation, 2);
  EXPECT_EQ(run.trainBatch, 256);
}

TEST(TrainerConfig, AnAutoAccumulationIsItsFlagElseOne) {
  EXPECT_EQ(trained(kAllAuto, batchFlags(2, 4)).gradientAccumulation, 4);
  EXPECT_EQ(trained(kAllAuto, batchFlags(2, std::nullopt)).gradientAccumulation, 1);
}

TEST(TrainerConfig, AnAutoTrainBatchIsTheDataParallelWorldTimesMicroBatchTimesAccumulation) {
  EXPECT_EQ(handedOver(kAllAuto, batchFlags(3, 2)).at("train_batch_size"), 96);
  EXPECT_EQ(handedOver(kAllAuto, precisionFlags(true, std::nullopt)).at("train_batch_size"), 128);
  // Model parallelism divides the world, as in DeepSpeed's own batch check.
  const TrainingRun run = trained(kAllAuto, batchFlags(3, 2), Parallelism{16, 4});
  EXPECT_EQ(run.trainBatch, 24);
}

TEST(TrainerConfig, AutoPrecisionIsItsFlagElseFalse) {
  const json fp16 = handedOver(kAllAuto, precisionFlags(true, std::nullopt));
  EXPECT_EQ(fp16.at("fp16").at("enabled"), true);
  EXPECT_EQ(fp16.at("bf16").at("enabled"), false);
  const json bf16 = handedOver(kAllAuto, precisionFlags(false, true));
  EXPECT_EQ(bf16.at("fp16").at("enabled"), false);
  EXPECT_EQ(bf16.at("bf16").at("enabled"), true);
  const json neither = handedOver(kAllAuto, batchFlags(3, std::nullopt));
  EXPECT_EQ(neither.at("fp16").at("enabled"), false);
  EXPECT_EQ(neither.at("bf16").at("enabled"), false);
}

TEST(TrainerConfig, AutoOnKeysTheSimulatorDoesNotReadIsHandedOverAsWritten) {
  const json handed = handedOver(kAllAuto, batchFlags(3, std::nullopt));
  EXPECT_EQ(handed.at("optimizer"), kAllAuto.at("optimizer"));
  EXPECT_EQ(handed.at("scheduler"), kAllAuto.at("scheduler"));
  EXPECT_EQ(handed.at("gradient_clipping"), "auto");
}

TEST(TrainerConfig, AutoBucketsAndLargeFloatsDoNotChangeTheZeroSettings) {
  json config = kAllAuto;
  config["zero_optimization"] = {{"stage", 3},
                                 {"offload_optimizer", {{"device", "cpu"}}},
                                 {"offload_param", {{"device", "nvme"}}},
                                 {"reduce_bucket_size", "auto"},
                                 {"stage3_prefetch_bucket_size", "auto"},
                                 {"stage3_param_persistence_threshold", "auto"},
                                 {"allgather_bucket_size", 5e8},
                                 {"sub_group_size", 1e9},
                                 {"stage3_max_live_parameters", 1e9}};
  const TrainingRun run = trained(config, batchFlags(2, std::nullopt));
  EXPECT_EQ(run.stage, 3);
  EXPECT_TRUE(run.offloadOptimizer);
  EXPECT_TRUE(run.offloadParameters);
  EXPECT_EQ(run.microBatch, 2);
}

TEST(TrainerConfig, APlainDeepSpeedLaunchTakesAutoAndLargeFloatsElsewhereToo) {
  const json config = {
      {"train_micro_batch_size_per_gpu", 3},
      {"gradient_clipping", "auto"},
      {"optimizer", {{"params", {{"lr", "auto"}}}}},
      {"zero_optimization", {{"stage", 2}, {"reduce_bucket_size", 5e8}, {"sub_group_size", 1e9}}}};
  EXPECT_EQ(handedOver(config, TrainerArguments{}), config);
  const auto checked = checkConfig(config, kTrainerParallelism);
  ASSERT_TRUE(checked) << checked.error();
  EXPECT_EQ(checked->run.stage, 2);
}

TEST(TrainerConfig, WithoutTrainerFlagsTheConfigIsDeepSpeedsAsWritten) {
  EXPECT_EQ(handedOver(kAllAuto, TrainerArguments{}), kAllAuto);
  const auto checked = checkConfig(handedOver(kAllAuto, TrainerArguments{}), kTrainerParallelism);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error(), "AssertionError: train_batch_size must be an integer, got \"auto\"");
}

TEST(TrainerConfig, AMicroBatchThatDisagreesWithItsFlagIsTheTrainersValueError) {
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 4}}, batchFlags(8, std::nullopt)),
            kMismatchHeader +
                "- ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=8\n" +
                kMismatchAdvice);
}

TEST(TrainerConfig, EveryMismatchIsListedInTheTrainersOrder) {
  const json config = {{"train_batch_size", 1000},
                       {"train_micro_batch_size_per_gpu", 4},
                       {"gradient_accumulation_steps", 3}};
  EXPECT_EQ(refused(config, batchFlags(2, 2)),
            kMismatchHeader +
                "- ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=2\n"
                "- ds gradient_accumulation_steps=3 vs hf gradient_accumulation_steps=2\n"
                "- ds train_batch_size=1000 vs hf train_batch_size (calculated)=64\n" +
                kMismatchAdvice);
}

TEST(TrainerConfig, TheCalculatedTrainBatchUsesTheDefaultsOfFlagsNotGiven) {
  // --gradient_accumulation_steps 2 alone: 8 per device (the default) × 2 × 16 GPUs.
  EXPECT_EQ(refused({{"train_batch_size", 96}, {"train_micro_batch_size_per_gpu", "auto"}},
                    batchFlags(std::nullopt, 2)),
            kMismatchHeader + "- ds train_batch_size=96 vs hf train_batch_size (calculated)=256\n" +
                kMismatchAdvice);
}

TEST(TrainerConfig, NumbersThatAgreeWithTheFlagsPass) {
  const json config = {{"train_batch_size", 96},
                       {"train_micro_batch_size_per_gpu", 3},
                       {"gradient_accumulation_steps", 2}};
  EXPECT_EQ(handedOver(config, batchFlags(3, 2)), config);
  EXPECT_EQ(trained(config, batchFlags(3, 2)).trainBatch, 96);
}

TEST(TrainerConfig, OnlyFlagsTheCommandLineGaveAreCompared) {
  // The micro-batch is not compared with the default of a flag that was not given, nor the train
  // batch without any batch flag: DeepSpeed's own check judges what the Trainer lets through.
  const json config = {{"train_micro_batch_size_per_gpu", 4}, {"gradient_accumulation_steps", 1}};
  EXPECT_EQ(trained(config, batchFlags(std::nullopt, 1)).microBatch, 4);
  const json trainBatch = {{"train_batch_size", 48},
                           {"train_micro_batch_size_per_gpu", "auto"},
                           {"gradient_accumulation_steps", 1}};
  const auto checked =
      checkConfig(handedOver(trainBatch, precisionFlags(true, std::nullopt)), kTrainerParallelism);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error(),
            "AssertionError: Check batch related parameters. train_batch_size is not equal to "
            "micro_batch_per_gpu * gradient_acc_step * world_size 48 != 8 * 1 * 16");
}

TEST(TrainerConfig, AWholeFloatAgreesWithItsFlagButStaysDeepSpeedsToRefuse) {
  const json config = {{"train_micro_batch_size_per_gpu", 16.0}};
  EXPECT_EQ(handedOver(config, batchFlags(16, std::nullopt)), config);
  EXPECT_EQ(refused({{"train_micro_batch_size_per_gpu", 2.5}}, batchFlags(2, std::nullopt)),
            kMismatchHeader +
                "- ds train_micro_batch_size_per_gpu=2.5 vs hf per_device_train_batch_size=2\n" +
                kMismatchAdvice);
  const auto checked = checkConfig(config, kTrainerParallelism);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error(),
            "AssertionError: train_micro_batch_size_per_gpu must be an integer, got 16.0");
}

TEST(TrainerConfig, AnInvalidConfigOrWorldIsLeftToDeepSpeed) {
  EXPECT_EQ(handedOver(json::array(), batchFlags(3, std::nullopt)), json::array());
  EXPECT_EQ(handedOver(kAllAuto, batchFlags(3, std::nullopt), Parallelism{16, 3}), kAllAuto);
}

}  // namespace
}  // namespace autotune::trialsim
