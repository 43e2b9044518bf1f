#include "tuning/space.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"

namespace {

using autotune::api::BatchChoice;
using autotune::api::Spec;
using autotune::tuning::combinations;
using autotune::tuning::describeSpace;
using autotune::tuning::Dimension;
using autotune::tuning::inconsistency;
using autotune::tuning::KnobValue;
using autotune::tuning::makeFastTrial;
using autotune::tuning::makeProfileTrial;
using autotune::tuning::pathsOf;
using autotune::tuning::Trial;
using autotune::tuning::TuningSpace;
using nlohmann::json;

Spec specWith(json deepspeedConfig, int gpus = 1, int modelParallel = 1) {
  Spec spec;
  spec.deepspeedConfig = std::move(deepspeedConfig);
  spec.resources.gpusPerTrial = gpus;
  spec.resources.modelParallelSize = modelParallel;
  return spec;
}

TuningSpace spaceOf(json deepspeedConfig, int gpus = 1, int modelParallel = 1) {
  return describeSpace(specWith(std::move(deepspeedConfig), gpus, modelParallel));
}

json withStage(json stage) { return {{"zero_optimization", {{"stage", std::move(stage)}}}}; }

const json kAdam = {{"type", "Adam"}, {"params", {{"lr", 3e-5}, {"betas", {0.9, 0.999}}}}};

// --- stages ---------------------------------------------------------------------------------

TEST(DescribeSpace, StageAllTriesEveryZeroStage) {
  EXPECT_EQ(spaceOf(withStage("all")).stages, (std::vector<int>{0, 1, 2, 3}));
}

TEST(DescribeSpace, NoZeroSectionMeansStageZeroOnly) {
  EXPECT_EQ(spaceOf({{"fp16", {{"enabled", true}}}}).stages, (std::vector<int>{0}));
}

TEST(DescribeSpace, ZeroSectionWithoutStageMeansStageZeroOnly) {
  EXPECT_EQ(spaceOf({{"zero_optimization", {{"overlap_comm", true}}}}).stages,
            (std::vector<int>{0}));
}

TEST(DescribeSpace, SingleStageIsKept) {
  EXPECT_EQ(spaceOf(withStage(2)).stages, (std::vector<int>{2}));
}

TEST(DescribeSpace, UserStageListIsHonouredSortedAndDeduplicated) {
  EXPECT_EQ(spaceOf(withStage({3, 1, 3})).stages, (std::vector<int>{1, 3}));
}

TEST(DescribeSpace, StageIsNotADimensionAndNotInTheBase) {
  const TuningSpace space = spaceOf(withStage({1, 2}));
  EXPECT_TRUE(space.dimensions.empty());
  EXPECT_FALSE(space.base["zero_optimization"].contains("stage"));
}

// --- micro-batch and gradient accumulation ---------------------------------------------------

TEST(DescribeSpace, AutoMicroBatchIsSearched) {
  const TuningSpace space = spaceOf({{"train_micro_batch_size_per_gpu", "auto"}});
  EXPECT_EQ(space.microBatch.kind, BatchChoice::Kind::kAuto);
  EXPECT_TRUE(space.microBatch.values.empty());
}

TEST(DescribeSpace, MissingMicroBatchIsSearched) {
  EXPECT_EQ(spaceOf(json::object()).microBatch.kind, BatchChoice::Kind::kAuto);
}

TEST(DescribeSpace, IntegerMicroBatchIsWhereTheSearchStarts) {
  const TuningSpace space = spaceOf({{"train_micro_batch_size_per_gpu", 4}});
  EXPECT_EQ(space.microBatch.kind, BatchChoice::Kind::kStart);
  EXPECT_EQ(space.microBatch.values, (std::vector<int>{4}));
  EXPECT_EQ(space.microBatch.first(1), 4);
}

TEST(DescribeSpace, MicroBatchListIsTriedAsGivenWithoutDuplicates) {
  const TuningSpace space = spaceOf({{"train_micro_batch_size_per_gpu", {8, 2, 8}}});
  EXPECT_EQ(space.microBatch.kind, BatchChoice::Kind::kList);
  EXPECT_EQ(space.microBatch.values, (std::vector<int>{8, 2}));
}

TEST(DescribeSpace, RemembersWhetherTheUserSetGradientAccumulation) {
  const TuningSpace set = spaceOf({{"gradient_accumulation_steps", 2}});
  EXPECT_TRUE(set.userSetGradientAccumulation);
  EXPECT_EQ(set.gradientAccumulation.kind, BatchChoice::Kind::kStart);
  EXPECT_EQ(set.gradientAccumulation.values, (std::vector<int>{2}));
  EXPECT_FALSE(spaceOf(json::object()).userSetGradientAccumulation);
}

// --- dimensions and base ----------------------------------------------------------------------

TEST(DescribeSpace, OtherListValuedKeysBecomeDimensionsSortedByPath) {
  const TuningSpace space = spaceOf(
      {{"zero_optimization",
        {{"stage", 2}, {"reduce_bucket_size", {5e8, 5e7}}, {"overlap_comm", {true, false}}}},
       {"gradient_clipping", {1.0, 0.5}}});
  EXPECT_EQ(pathsOf(space.dimensions),
            (std::vector<std::string>{"gradient_clipping", "zero_optimization.overlap_comm",
                                      "zero_optimization.reduce_bucket_size"}));
  ASSERT_EQ(space.dimensions.size(), 3U);
  EXPECT_EQ(space.dimensions[2].values, (std::vector<json>{5e8, 5e7}));
}

TEST(DescribeSpace, BaseConfigHoldsTheFirstValueOfEachDimension) {
  const TuningSpace space =
      spaceOf({{"zero_optimization", {{"stage", 2}, {"reduce_bucket_size", {5e8, 5e7}}}},
               {"gradient_clipping", {1.0, 0.5}}});
  EXPECT_EQ(space.base["zero_optimization"]["reduce_bucket_size"], 5e8);
  EXPECT_EQ(space.base["gradient_clipping"], 1.0);
}

TEST(DescribeSpace, AdamBetasAreAValueNotADimension) {
  const TuningSpace space = spaceOf({{"optimizer", kAdam}});
  EXPECT_TRUE(space.dimensions.empty());
  EXPECT_EQ(space.base["optimizer"]["params"]["betas"], json({0.9, 0.999}));
}

TEST(DescribeSpace, DuplicateCandidateValuesAreTriedOnce) {
  const TuningSpace space =
      spaceOf({{"zero_optimization", {{"stage", 1}, {"reduce_bucket_size", {5e8, 1e9, 5e8}}}}});
  ASSERT_EQ(space.dimensions.size(), 1U);
  EXPECT_EQ(space.dimensions[0].values, (std::vector<json>{5e8, 1e9}));
}

TEST(DescribeSpace, BaseDropsAutotuningAndBatchKeysTheTrialSets) {
  const TuningSpace space = spaceOf({{"autotuning", {{"enabled", true}}},
                                     {"train_batch_size", 64},
                                     {"train_micro_batch_size_per_gpu", 4},
                                     {"gradient_accumulation_steps", 2},
                                     {"fp16", {{"enabled", true}}}});
  EXPECT_FALSE(space.base.contains("autotuning"));
  EXPECT_FALSE(space.base.contains("train_batch_size"));
  EXPECT_FALSE(space.base.contains("train_micro_batch_size_per_gpu"));
  EXPECT_FALSE(space.base.contains("gradient_accumulation_steps"));
  EXPECT_EQ(space.base["fp16"], json({{"enabled", true}}));
}

TEST(DescribeSpace, TakesParallelismAndSearchFromTheSpec) {
  Spec spec = specWith(json::object(), 8, 2);
  spec.search.maxMicroBatchSize = 32;
  const TuningSpace space = describeSpace(spec);
  EXPECT_EQ(space.parallelism.gpus, 8);
  EXPECT_EQ(space.parallelism.modelParallel, 2);
  EXPECT_EQ(space.search.maxMicroBatchSize, 32);
}

// --- trials -------------------------------------------------------------------------------------

TEST(MakeFastTrial, SetsStageBatchKeysAndAConsistentTrainBatch) {
  const TuningSpace space = spaceOf({{"fp16", {{"enabled", true}}}}, 8, 2);
  const Trial trial = makeFastTrial(space, 2, 3, 2);
  EXPECT_EQ(trial.name, "z2_gas2_tmbspg3");
  EXPECT_EQ(trial.space, "z2");
  EXPECT_EQ(trial.stage, 2);
  EXPECT_EQ(trial.microBatch, 3);
  EXPECT_EQ(trial.gradientAccumulation, 2);
  EXPECT_FALSE(trial.profile);
  EXPECT_EQ(trial.config["zero_optimization"]["stage"], 2);
  EXPECT_EQ(trial.config["train_micro_batch_size_per_gpu"], 3);
  EXPECT_EQ(trial.config["gradient_accumulation_steps"], 2);
  EXPECT_EQ(trial.config["train_batch_size"], 3 * 2 * 4);
  EXPECT_EQ(trial.config["fp16"], json({{"enabled", true}}));
}

TEST(MakeFastTrial, KeepsTheUsersOffloadSections) {
  const TuningSpace space = spaceOf({{"optimizer", kAdam},
                                     {"zero_optimization",
                                      {{"stage", 3},
                                       {"offload_optimizer", {{"device", "cpu"}}},
                                       {"offload_param", {{"device", "cpu"}}}}}});
  const Trial trial = makeFastTrial(space, 3, 1, 1);
  EXPECT_EQ(trial.config["zero_optimization"]["offload_optimizer"], json({{"device", "cpu"}}));
  EXPECT_EQ(trial.config["zero_optimization"]["offload_param"], json({{"device", "cpu"}}));
}

TEST(MakeProfileTrial, RunsZero3AtMicroBatchOneAskingForModelInfo) {
  const TuningSpace space = spaceOf(withStage("all"), 4);
  const Trial trial = makeProfileTrial(space);
  EXPECT_TRUE(trial.profile);
  EXPECT_EQ(trial.name, "profile_model_info");
  EXPECT_EQ(trial.stage, 3);
  EXPECT_EQ(trial.microBatch, 1);
  EXPECT_EQ(trial.config["zero_optimization"]["stage"], 3);
  EXPECT_EQ(trial.config["train_micro_batch_size_per_gpu"], 1);
  EXPECT_EQ(trial.config["autotuning"]["model_info"]["profile"], true);
}

// --- consistency ------------------------------------------------------------------------------

TEST(Inconsistency, ConsistentConfigHasNoReason) {
  const TuningSpace space = spaceOf({{"optimizer", kAdam},
                                     {"zero_optimization",
                                      {{"stage", 3},
                                       {"offload_optimizer", {{"device", "cpu"}}},
                                       {"offload_param", {{"device", "cpu"}}}}}},
                                    8);
  EXPECT_EQ(inconsistency(space, makeFastTrial(space, 3, 4, 1)), std::nullopt);
}

TEST(Inconsistency, OffloadingParametersNeedsZero3) {
  const TuningSpace space = spaceOf(
      {{"optimizer", kAdam}, {"zero_optimization", {{"offload_param", {{"device", "cpu"}}}}}});
  for (int stage = 0; stage < 3; ++stage) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    const auto reason = inconsistency(space, makeFastTrial(space, stage, 1, 1));
    ASSERT_TRUE(reason.has_value());
    EXPECT_NE(reason->find("offload_param"), std::string::npos) << *reason;
  }
  EXPECT_EQ(inconsistency(space, makeFastTrial(space, 3, 1, 1)), std::nullopt);
}

TEST(Inconsistency, OffloadingTheOptimizerNeedsZero) {
  const TuningSpace space = spaceOf(
      {{"optimizer", kAdam}, {"zero_optimization", {{"offload_optimizer", {{"device", "cpu"}}}}}});
  const auto reason = inconsistency(space, makeFastTrial(space, 0, 1, 1));
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("offload_optimizer"), std::string::npos) << *reason;
  EXPECT_EQ(inconsistency(space, makeFastTrial(space, 1, 1, 1)), std::nullopt);
}

TEST(Inconsistency, OffloadingTheOptimizerNeedsDeepSpeedsOptimizer) {
  const TuningSpace space =
      spaceOf({{"zero_optimization", {{"offload_optimizer", {{"device", "cpu"}}}}}});
  const auto reason = inconsistency(space, makeFastTrial(space, 2, 1, 1));
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("optimizer"), std::string::npos) << *reason;
}

TEST(Inconsistency, MicroBatchOutsideTheSearchBoundsIsRejected) {
  Spec spec = specWith(json::object());
  spec.search.minMicroBatchSize = 2;
  spec.search.maxMicroBatchSize = 8;
  const TuningSpace space = describeSpace(spec);
  const auto tooLarge = inconsistency(space, makeFastTrial(space, 0, 16, 1));
  ASSERT_TRUE(tooLarge.has_value());
  EXPECT_NE(tooLarge->find("16"), std::string::npos) << *tooLarge;
  EXPECT_TRUE(inconsistency(space, makeFastTrial(space, 0, 1, 1)).has_value());
  EXPECT_EQ(inconsistency(space, makeFastTrial(space, 0, 8, 1)), std::nullopt);
}

TEST(Inconsistency, TrainBatchOverTheLimitIsRejected) {
  Spec spec = specWith(json::object(), 8);
  spec.search.maxTrainBatchSize = 32;
  const TuningSpace space = describeSpace(spec);
  const auto reason = inconsistency(space, makeFastTrial(space, 1, 4, 2));  // 4 x 2 x 8 = 64
  ASSERT_TRUE(reason.has_value());
  EXPECT_NE(reason->find("64"), std::string::npos) << *reason;
  EXPECT_EQ(inconsistency(space, makeFastTrial(space, 1, 4, 1)), std::nullopt);  // 32
}

// --- combinations -----------------------------------------------------------------------------

TEST(Combinations, YieldsTheCartesianProductWithTheLastPathFastest) {
  const std::vector<Dimension> dimensions = {{"a", {1, 2}}, {"b", {"x", "y", "z"}}};
  const auto product = combinations(dimensions, {"a", "b"});
  const std::vector<std::vector<KnobValue>> expected = {
      {{"a", 1}, {"b", "x"}}, {{"a", 1}, {"b", "y"}}, {{"a", 1}, {"b", "z"}},
      {{"a", 2}, {"b", "x"}}, {{"a", 2}, {"b", "y"}}, {{"a", 2}, {"b", "z"}}};
  EXPECT_EQ(product, expected);
}

TEST(Combinations, FollowsTheGivenOrderNotTheDimensionOrder) {
  const std::vector<Dimension> dimensions = {{"a", {1, 2}}, {"b", {true, false}}};
  const auto product = combinations(dimensions, {"b", "a"});
  ASSERT_EQ(product.size(), 4U);
  EXPECT_EQ(product[0], (std::vector<KnobValue>{{"b", true}, {"a", 1}}));
  EXPECT_EQ(product[1], (std::vector<KnobValue>{{"b", true}, {"a", 2}}));
  EXPECT_EQ(product[3], (std::vector<KnobValue>{{"b", false}, {"a", 2}}));
}

TEST(Combinations, NoDimensionsGiveOneEmptyCombination) {
  EXPECT_EQ(combinations({}, {}), (std::vector<std::vector<KnobValue>>{{}}));
}

}  // namespace

// --- the global batch and the micro-batch ladder ---

using autotune::tuning::MicroBatchLadder;

TEST(DescribeSpace, ANumericTrainBatchIsFixedAndEveryTrialKeepsIt) {
  const TuningSpace space =
      spaceOf({{"train_batch_size", 512}, {"train_micro_batch_size_per_gpu", "auto"}}, 16);
  ASSERT_EQ(space.fixedTrainBatch, 512);
  EXPECT_EQ(space.microBatches.between(1, 1024), (std::vector<int>{1, 2, 4, 8, 16, 32}));
  for (const int microBatch : space.microBatches.between(1, 1024)) {
    const int gas = space.microBatches.gradientAccumulationFor(microBatch, 1);
    const Trial trial = makeFastTrial(space, 0, microBatch, gas);
    EXPECT_EQ(trial.config["train_batch_size"], 512) << trial.name;
    EXPECT_EQ(microBatch * gas * 16, 512) << trial.name;
  }
}

TEST(DescribeSpace, AnAutoTrainBatchIsKeptForTheTrainingScript) {
  const TuningSpace space = spaceOf({{"train_batch_size", "auto"}}, 8);
  EXPECT_FALSE(space.fixedTrainBatch);
  EXPECT_EQ(makeFastTrial(space, 1, 3, 2).config["train_batch_size"], "auto");
  EXPECT_EQ(makeFastTrial(spaceOf(json::object(), 8), 1, 3, 2).config["train_batch_size"], 48);
}

TEST(MicroBatchLadder, AFreeBatchAllowsEverySizeInItsBounds) {
  const MicroBatchLadder ladder(2, 10, std::nullopt);
  EXPECT_EQ(ladder.atMost(7), 7);
  EXPECT_EQ(ladder.atMost(50), 10);
  EXPECT_EQ(ladder.atMost(1), std::nullopt);
  EXPECT_EQ(ladder.atLeast(0), 2);
  EXPECT_EQ(ladder.atLeast(11), std::nullopt);
  EXPECT_EQ(ladder.closestBetween(3, 9, 6), 6);
  EXPECT_EQ(ladder.closestBetween(3, 4, 3), std::nullopt);
  EXPECT_EQ(ladder.gradientAccumulationFor(5, 3), 3);
}

TEST(MicroBatchLadder, AFixedBatchAllowsOnlyItsDivisorsEachWithItsAccumulation) {
  const MicroBatchLadder ladder(1, 1024, 36);  // 1 2 3 4 6 9 12 18 36
  EXPECT_EQ(ladder.atMost(8), 6);
  EXPECT_EQ(ladder.atLeast(7), 9);
  EXPECT_EQ(ladder.closestBetween(4, 12, 7), 6);
  EXPECT_EQ(ladder.closestBetween(4, 12, 8), 9);
  EXPECT_EQ(ladder.closestBetween(12, 18, 15), std::nullopt);
  EXPECT_EQ(ladder.between(5, 20), (std::vector<int>{6, 9, 12, 18}));
  EXPECT_EQ(ladder.gradientAccumulationFor(9, 1), 4);
  EXPECT_TRUE(MicroBatchLadder(40, 1024, 36).empty());
}
