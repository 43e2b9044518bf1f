// The built-in profiles against DeepSpeed's published autotuning results (DeepSpeedExamples,
// training/autotuning/hf: its tables and out-of-memory boundaries): the same out-of-memory
// boundaries, each stage's best within 5%, and the published best as the best configuration of the
// space, also through the noise.

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "model.h"
#include "profile.h"
#include "simulation.h"

namespace autotune::trialsim {
namespace {

constexpr int kGpus = 16;

struct StageBest {
  int microBatch = 0;
  double throughput = 0;  // 0: the stage failed
};

struct Published {
  std::string profile;
  // The true largest micro-batch per stage where the published runs show it (0: the stage does not
  // run).
  std::array<std::optional<int>, kZeroStages> boundary;
  // Each stage's published best at gas 1 (nothing: the stage was not run).
  std::array<std::optional<StageBest>, kZeroStages> best;
  int bestStage = 0;
  std::optional<int> microBatchCap;  // max_train_batch_size 4096 over 16 GPUs
};

void PrintTo(const Published& published, std::ostream* out) { *out << published.profile; }

const std::vector<Published>& published() {
  static const std::vector<Published> models = {
      {"distilbert",
       {},
       {StageBest{256, 5759.96}, StageBest{256, 5667.06}, StageBest{256, 5366.97},
        StageBest{256, 4892.49}},
       0,
       256},
      {"bert-base",
       {},
       {StageBest{235, 2930.18}, StageBest{235, 2930.17}, StageBest{235, 2744.16},
        StageBest{238, 2479.47}},
       0,
       256},
      {"bert-large",
       {},
       {StageBest{93, 835.244}, StageBest{93, 842.243}, StageBest{94, 764.524}, StageBest{94, 0}},
       1,
       std::nullopt},
      {"gpt2",
       {},
       {StageBest{11, 441.693}, StageBest{15, 452.004}, StageBest{15, 0}, StageBest{15, 0}},
       1,
       std::nullopt},
      {"gpt2-medium",
       {5, 6, 6, 0},
       {StageBest{5, 167.688}, StageBest{6, 175.46}, StageBest{6, 161.619}, StageBest{6, 0}},
       1,
       std::nullopt},
      {"gpt2-large",
       {2, 3, 3, 0},
       {StageBest{2, 59.0229}, StageBest{3, 87.3017}, StageBest{3, 77.8338}, StageBest{3, 0}},
       1,
       std::nullopt},
      {"gpt2-xl",
       {0, 1, 1, 1},
       {std::nullopt, StageBest{1, 40.1749}, StageBest{1, 33.0472}, StageBest{1, 12.8604}},
       1,
       std::nullopt},
      {"deberta",
       {0, 11, 14, 0},
       {StageBest{1, 0}, StageBest{11, 177.843}, StageBest{14, 154.002}, StageBest{14, 0}},
       1,
       std::nullopt},
  };
  return models;
}

// A run as the published experiments ran it, on kGpus GPUs.
TrainingRun publishedRun(int stage, std::int64_t microBatch, std::int64_t accumulation = 1) {
  TrainingRun run;
  run.stage = stage;
  run.microBatch = microBatch;
  run.gradientAccumulation = accumulation;
  run.trainBatch = microBatch * accumulation * kGpus;
  run.parallelism = {kGpus, 1};
  return run;
}

Profile profileOf(const Published& model) {
  const auto profile = builtInProfile(model.profile);
  EXPECT_TRUE(profile) << profile.error();
  return profile.value_or(Profile{});
}

double throughputAt(const Profile& profile, const TrainingRun& run) {
  return measure(profile, run).throughput;
}

// The largest micro-batch a tuner may try at a stage: what fits, within the batch cap.
std::int64_t limitOf(const Published& model, const Profile& profile, int stage) {
  const std::int64_t largest = largestMicroBatch(profile, publishedRun(stage, 1));
  return model.microBatchCap ? std::min<std::int64_t>(largest, *model.microBatchCap) : largest;
}

StageBest globalBest(const Published& model) {
  return model.best.at(static_cast<std::size_t>(model.bestStage)).value_or(StageBest{});
}

class PublishedModel : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedModel, TheLargestMicroBatchThatFitsIsThePublishedBoundary) {
  const Published& model = GetParam();
  const Profile profile = profileOf(model);
  for (int stage = 0; stage < kZeroStages; ++stage) {
    const auto index = static_cast<std::size_t>(stage);
    const std::int64_t largest = largestMicroBatch(profile, publishedRun(stage, 1));
    if (model.boundary.at(index)) {
      EXPECT_EQ(largest, *model.boundary.at(index)) << "ZeRO-" << stage;
    }
    const auto& best = model.best.at(index);
    if (best && best->throughput == 0) {
      EXPECT_EQ(largest, 0) << "ZeRO-" << stage << " failed in the published run";
    } else if (best) {
      EXPECT_GE(largest, best->microBatch) << "ZeRO-" << stage;
    }
  }
}

TEST_P(PublishedModel, EachStagesPublishedBestMeasuresWithinFivePercent) {
  const Published& model = GetParam();
  const Profile profile = profileOf(model);
  for (int stage = 0; stage < kZeroStages; ++stage) {
    const auto& best = model.best.at(static_cast<std::size_t>(stage));
    if (!best || best->throughput == 0) {
      continue;
    }
    const TrainingRun run = publishedRun(stage, best->microBatch);
    EXPECT_NEAR(throughputAt(profile, run), best->throughput, 0.05 * best->throughput)
        << "ZeRO-" << stage << " at micro-batch " << best->microBatch;
    const LaunchResult result = simulate(profile, {run, {}}, 0);
    const auto* measured = std::get_if<Measurement>(&result);
    ASSERT_NE(measured, nullptr);
    EXPECT_NEAR(measured->throughput, best->throughput, 0.05 * best->throughput)
        << "ZeRO-" << stage << " with noise";
  }
}

TEST_P(PublishedModel, ThePublishedBestBeatsTheMicroBatchesNextToIt) {
  const Published& model = GetParam();
  const Profile profile = profileOf(model);
  const StageBest best = globalBest(model);
  const double value = throughputAt(profile, publishedRun(model.bestStage, best.microBatch));
  if (best.microBatch > 1) {
    EXPECT_GT(value, throughputAt(profile, publishedRun(model.bestStage, best.microBatch - 1)));
  }
  if (best.microBatch + 1 <= limitOf(model, profile, model.bestStage)) {
    EXPECT_GT(value, throughputAt(profile, publishedRun(model.bestStage, best.microBatch + 1)));
  }
}

// Every configuration a tuner could try: each stage's micro-batches that fit (within the cap),
// with gradient accumulation up to 8 while the per-GPU batch stays within the largest that fits.
std::vector<TrainingRun> searchSpace(const Published& model, const Profile& profile) {
  std::int64_t batchLimit = 0;
  for (int stage = 0; stage < kZeroStages; ++stage) {
    batchLimit = std::max(batchLimit, limitOf(model, profile, stage));
  }
  std::vector<TrainingRun> space;
  for (int stage = 0; stage < kZeroStages; ++stage) {
    for (std::int64_t micro = 1; micro <= limitOf(model, profile, stage); ++micro) {
      for (std::int64_t accumulation = 1; accumulation <= 8; ++accumulation) {
        if (accumulation == 1 || micro * accumulation <= batchLimit) {
          space.push_back(publishedRun(stage, micro, accumulation));
        }
      }
    }
  }
  return space;
}

TEST_P(PublishedModel, ThePublishedBestIsTheBestOfTheWholeSpaceWhateverTheNoise) {
  const Published& model = GetParam();
  const Profile profile = profileOf(model);
  const StageBest best = globalBest(model);
  const TrainingRun bestRun = publishedRun(model.bestStage, best.microBatch);
  // The lowest the best can measure against the highest any other configuration can.
  const double worstBest = throughputAt(profile, bestRun) * (1 - profile.noise);
  for (const TrainingRun& run : searchSpace(model, profile)) {
    if (run.stage == bestRun.stage && run.microBatch == bestRun.microBatch &&
        run.gradientAccumulation == 1) {
      continue;
    }
    EXPECT_GT(worstBest, throughputAt(profile, run) * (1 + profile.noise))
        << "z" << run.stage << "_gas" << run.gradientAccumulation << "_tmbspg" << run.microBatch;
  }
}

TEST_P(PublishedModel, TheProfilingRunReportsTheModel) {
  const Profile profile = profileOf(GetParam());
  CheckedConfig profiling{publishedRun(3, 1), {}};
  profiling.outputs.profileModel = true;
  const LaunchResult result = simulate(profile, profiling, 0);
  const auto* report = std::get_if<ModelReport>(&result);
  ASSERT_NE(report, nullptr);
  EXPECT_EQ(report->numParameters, profile.numParameters);
  EXPECT_EQ(report->activationBytesPerGpu, profile.reportedActivationBytes());
}

INSTANTIATE_TEST_SUITE_P(BuiltInProfiles, PublishedModel, ::testing::ValuesIn(published()),
                         [](const auto& info) {
                           std::string name = info.param.profile;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The throughput-maximising micro-batch at gas 1.
std::int64_t bestMicroBatch(const Profile& profile, int stage, std::int64_t limit) {
  std::int64_t best = 1;
  for (std::int64_t micro = 2; micro <= limit; ++micro) {
    if (throughputAt(profile, publishedRun(stage, micro)) >
        throughputAt(profile, publishedRun(stage, best))) {
      best = micro;
    }
  }
  return best;
}

TEST(Calibration, AllocatorPressurePutsBertBasesBestBelowTheLargestMicroBatchThatFits) {
  const Profile profile = *builtInProfile("bert-base");
  const std::int64_t largest = largestMicroBatch(profile, publishedRun(0, 1));
  EXPECT_EQ(bestMicroBatch(profile, 0, largest), 235);
  EXPECT_GT(largest, 235);
}

TEST(Calibration, AllocatorPressurePutsBertLargesBestBelowTheLargestMicroBatchThatFits) {
  const Profile profile = *builtInProfile("bert-large");
  const std::int64_t largest = largestMicroBatch(profile, publishedRun(1, 1));
  EXPECT_EQ(bestMicroBatch(profile, 1, largest), 93);
  EXPECT_GT(largest, 93);
}

TEST(Calibration, TheFourModelsOfDeepSpeedsTraceProfileTheActivationItMeasured) {
  EXPECT_EQ(builtInProfile("gpt2-large")->reportedActivationBytes(), 9.6e9);
  EXPECT_EQ(builtInProfile("gpt2-medium")->reportedActivationBytes(), 5.0e9);
  EXPECT_EQ(builtInProfile("gpt2-xl")->reportedActivationBytes(), 17e9);
  EXPECT_EQ(builtInProfile("deberta")->reportedActivationBytes(), 2.26e9);
}

}  // namespace
}  // namespace autotune::trialsim
