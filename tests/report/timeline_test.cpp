#include "report/timeline.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "report/fixtures.h"

namespace {

using autotune::api::Outcome;
using autotune::api::Spec;
using autotune::report::buildTimeline;
using autotune::report::SearchResults;
using autotune::report::SpaceCost;
using autotune::report::Timeline;
using autotune::report::fixtures::jobOf;
using autotune::report::fixtures::record;
using autotune::report::fixtures::resultsOf;
using autotune::report::fixtures::thousandTrials;

constexpr double kHour = 3600;

// Two trials side by side on GPUs 0-15 and 16-31, then one that waited for the first to end.
SearchResults parallelSearch() {
  auto first = record("z0_gas1_tmbspg2", Outcome::kSucceeded, 59);
  first.startTime = "2026-01-01T10:00:00Z";
  first.durationSeconds = 1800;
  auto second = record("z1_gas1_tmbspg3", Outcome::kSucceeded, 87);
  second.startTime = "2026-01-01T10:00:10.500Z";
  second.durationSeconds = 3600;
  auto third = record("z1_gas1_tmbspg4", Outcome::kOOM);
  third.startTime = "2026-01-01T10:30:00Z";
  third.durationSeconds = 900;
  SearchResults results = resultsOf({first, second, third});
  results.trials[0].gpus = "0-15";
  results.trials[1].gpus = "16-31";
  results.trials[2].gpus = "0-15";
  return results;
}

TEST(Timeline, TrialsStandInLaunchOrderOnTheirOwnStartTimes) {
  const Timeline timeline = buildTimeline(parallelSearch(), std::nullopt);

  ASSERT_EQ(timeline.bars.size(), 3U);
  EXPECT_EQ(timeline.bars[0].startSeconds, 0);
  EXPECT_DOUBLE_EQ(timeline.bars[1].startSeconds, 10.5);
  EXPECT_EQ(timeline.bars[2].startSeconds, 1800);
  EXPECT_EQ(timeline.bars[2].outcome, Outcome::kOOM);
  EXPECT_EQ(timeline.bars[1].gpus, "16-31");
  EXPECT_EQ(timeline.bars[1].gpuCount, 16);
  EXPECT_DOUBLE_EQ(timeline.spanSeconds, 3610.5);
  EXPECT_EQ(timeline.firstStart, "2026-01-01T10:00:00Z");
}

TEST(Timeline, GpuHoursAreDurationTimesTheGpusHeld) {
  const Timeline timeline = buildTimeline(parallelSearch(), std::nullopt);

  ASSERT_TRUE(timeline.gpuHours);
  EXPECT_DOUBLE_EQ(*timeline.gpuHours, (1800 + 3600 + 900) * 16 / kHour);
  EXPECT_EQ(timeline.bySpace, (std::vector<SpaceCost>{{"z0", 1, 1800 * 16 / kHour},
                                                      {"z1", 2, (3600 + 900) * 16 / kHour}}));
}

TEST(Timeline, AReusedTrialCostsNothingAndCountsAsSaved) {
  SearchResults results = parallelSearch();
  results.trials[1].record.reusedFrom = "autotune-m-0123";
  const Timeline timeline = buildTimeline(results, std::nullopt);

  ASSERT_TRUE(timeline.gpuHours);
  EXPECT_DOUBLE_EQ(*timeline.gpuHours, (1800 + 900) * 16 / kHour);
  EXPECT_DOUBLE_EQ(timeline.savedGpuHours, 3600 * 16 / kHour);
  EXPECT_EQ(timeline.reused, 1);
  EXPECT_EQ(timeline.bars[1].reusedFrom, "autotune-m-0123");
  EXPECT_EQ(timeline.bySpace,
            (std::vector<SpaceCost>{{"z0", 1, 1800 * 16 / kHour}, {"z1", 2, 900 * 16 / kHour}}));
}

TEST(Timeline, TheJobGivesTheGpusWhereTheResultsDoNot) {
  SearchResults results = parallelSearch();
  for (auto& trial : results.trials) {
    trial.gpus.clear();
  }
  EXPECT_FALSE(buildTimeline(results, std::nullopt).gpuHours)
      << "with no GPUs known, no GPU-hours are made up";

  Spec spec;
  spec.resources.gpusPerTrial = 8;
  const Timeline timeline = buildTimeline(results, jobOf(spec, "j"));
  ASSERT_TRUE(timeline.gpuHours);
  EXPECT_DOUBLE_EQ(*timeline.gpuHours, (1800 + 3600 + 900) * 8 / kHour);
  EXPECT_EQ(timeline.bars[0].gpuCount, 8);
  EXPECT_EQ(timeline.bars[0].gpus, "");
}

TEST(Timeline, ATrialWithoutAStartTimeStandsWithTheOneBefore) {
  SearchResults results = parallelSearch();
  results.trials[2].record.startTime = "";

  const Timeline timeline = buildTimeline(results, std::nullopt);

  EXPECT_FALSE(timeline.bars[2].startKnown);
  EXPECT_DOUBLE_EQ(timeline.bars[2].startSeconds, 10.5);
}

TEST(Timeline, AThousandTrialsAreCountedOnce) {
  const Timeline timeline = buildTimeline(resultsOf(thousandTrials()), std::nullopt);

  ASSERT_EQ(timeline.bars.size(), 1000U);
  EXPECT_EQ(timeline.bars.back().startSeconds, 999 * 60);
  EXPECT_EQ(timeline.spanSeconds, 1000 * 60);
  EXPECT_EQ(timeline.bySpace.size(), 10U);
}

}  // namespace
