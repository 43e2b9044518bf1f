#include "report/chart.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "report/fixtures.h"
#include "support/published_oracle.h"

namespace {

using autotune::api::Metric;
using autotune::api::Outcome;
using autotune::api::Spec;
using autotune::api::TrialRecord;
using autotune::report::buildChart;
using autotune::report::Chart;
using autotune::report::Coordinates;
using autotune::report::coordinatesFromName;
using autotune::report::Mark;
using autotune::report::markOf;
using autotune::report::metricOf;
using autotune::report::MicroBatchRange;
using autotune::report::StageCurve;
using autotune::report::fixtures::jobOf;
using autotune::report::fixtures::record;
using autotune::report::fixtures::resultsOf;
using autotune::report::fixtures::searchOf;
using autotune::report::fixtures::thousandTrials;
namespace oracle = autotune::oracle;

const oracle::PublishedModel& publishedModel(const std::string& name) {
  const auto& models = oracle::publishedModels();
  return *std::find_if(models.begin(), models.end(),
                       [&](const oracle::PublishedModel& model) { return model.name == name; });
}

const StageCurve& stageOf(const Chart& chart, int stage) {
  const auto found = std::find_if(chart.stages.begin(), chart.stages.end(),
                                  [&](const StageCurve& curve) { return curve.stage == stage; });
  if (found == chart.stages.end()) {
    static const StageCurve kMissing;
    ADD_FAILURE() << "no panel for ZeRO stage " << stage;
    return kMissing;
  }
  return *found;
}

std::set<int> microBatchesMarked(const StageCurve& stage, Mark mark) {
  std::set<int> microBatches;
  for (const auto& point : stage.points) {
    if (markOf(point.outcome) == mark) {
      microBatches.insert(point.at.microBatch);
    }
  }
  return microBatches;
}

std::vector<int> stagesOf(const Chart& chart) {
  std::vector<int> stages;
  for (const auto& stage : chart.stages) {
    stages.push_back(stage.stage);
  }
  return stages;
}

TEST(Chart, ThePublishedGpt2LargeSearchIsDrawnStageByStage) {
  const oracle::PublishedModel& model = publishedModel("gpt2-large");
  const Spec spec = oracle::specFor(model);
  const oracle::SearchRun run = searchOf(spec, oracle::publishedOracle(model));
  ASSERT_EQ(run.last.state, autotune::tuning::Decision::State::kSucceeded);

  const Chart chart = buildChart(resultsOf(run.records), jobOf(spec, "gpt2-large"));

  EXPECT_EQ(chart.title, "gpt2-large");
  EXPECT_EQ(chart.metric, Metric::kThroughput);
  EXPECT_EQ(stagesOf(chart), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_TRUE(chart.memoryModelKnown);
  std::size_t points = 0;
  for (const auto& stage : chart.stages) {
    // The memory model's line, as `autotune plan` prints it for this model.
    EXPECT_EQ(stage.expectedLargest, stage.stage == 0 ? 2 : 3) << "ZeRO-" << stage.stage;
    EXPECT_TRUE(stage.pruned.empty()) << "ZeRO-" << stage.stage;
    const int largest = model.largestMicroBatch.at(static_cast<std::size_t>(stage.stage));
    for (const auto& point : stage.points) {
      EXPECT_EQ(point.outcome == Outcome::kOOM, point.at.microBatch > largest) << point.trial;
      EXPECT_EQ(point.value.has_value(), point.outcome == Outcome::kSucceeded) << point.trial;
    }
    points += stage.points.size();
  }
  EXPECT_EQ(points, run.records.size());

  const StageCurve& zero1 = stageOf(chart, 1);
  EXPECT_EQ(microBatchesMarked(zero1, Mark::kOOM), (std::set<int>{4}));
  ASSERT_FALSE(zero1.curve.empty());
  const auto peak =
      std::max_element(zero1.curve.begin(), zero1.curve.end(),
                       [](const auto& a, const auto& b) { return a.value < b.value; });
  EXPECT_EQ(peak->microBatch, 3);
  EXPECT_TRUE(stageOf(chart, 3).curve.empty()) << "ZeRO-3 does not run GPT2-large at all";

  ASSERT_TRUE(chart.best && chart.baseline && chart.speedup);
  EXPECT_EQ(chart.best->trial, model.publishedBest);
  EXPECT_EQ(chart.best->at, (Coordinates{1, 3, 1}));
  EXPECT_EQ(chart.baseline->trial, run.records.front().name);
  EXPECT_DOUBLE_EQ(*chart.speedup, chart.best->value / *run.records.front().value);
  EXPECT_GT(*chart.speedup, 1.4);
  EXPECT_TRUE(chart.unplaced.empty());
}

TEST(Chart, WithoutTheJobThePointsComeFromTheTrialNames) {
  const oracle::PublishedModel& model = publishedModel("gpt2-large");
  const Spec spec = oracle::specFor(model);
  const oracle::SearchRun run = searchOf(spec, oracle::publishedOracle(model));

  const Chart withJob = buildChart(resultsOf(run.records), jobOf(spec, "gpt2-large"));
  const Chart alone = buildChart(resultsOf(run.records, "gpt2-large"), std::nullopt);

  EXPECT_EQ(alone.title, "gpt2-large");
  EXPECT_FALSE(alone.memoryModelKnown);
  ASSERT_EQ(stagesOf(alone), stagesOf(withJob));
  for (std::size_t i = 0; i < alone.stages.size(); ++i) {
    EXPECT_EQ(alone.stages[i].points, withJob.stages[i].points);
    EXPECT_EQ(alone.stages[i].curve, withJob.stages[i].curve);
    EXPECT_FALSE(alone.stages[i].expectedLargest);
  }
  EXPECT_EQ(alone.best, withJob.best);
}

// A grid over listed micro-batches, where the memory model prunes the large ones and each of three
// stages runs out of memory at its own boundary.
TEST(Chart, OomBoundariesOnThreeStagesAndWhatTheMemoryModelPruned) {
  Spec spec = oracle::specFor(publishedModel("gpt2-large"), {1, 2, 3});
  spec.deepspeedConfig["train_micro_batch_size_per_gpu"] = {1, 2, 3, 4, 5, 6, 8};
  spec.search.strategy = autotune::api::Strategy::kGrid;
  spec.search.earlyStopping = 0;
  const std::map<int, int> boundary = {{1, 2}, {2, 3}, {3, 1}};
  const auto outcomes = [&](const autotune::tuning::Trial& trial) -> oracle::TrialOutcome {
    if (trial.microBatch > boundary.at(trial.stage)) {
      return {Outcome::kOOM, std::nullopt};
    }
    return {Outcome::kSucceeded, 10.0 * trial.stage + trial.microBatch};
  };
  const oracle::SearchRun run = searchOf(spec, outcomes);
  ASSERT_EQ(run.records.size(), 9U) << "each stage runs 1 to 3, the model's largest";

  const Chart chart = buildChart(resultsOf(run.records), jobOf(spec, "boundaries"));

  ASSERT_EQ(stagesOf(chart), (std::vector<int>{1, 2, 3}));
  for (const auto& stage : chart.stages) {
    SCOPED_TRACE("ZeRO-" + std::to_string(stage.stage));
    const int last = boundary.at(stage.stage);
    std::set<int> succeeded;
    std::set<int> outOfMemory;
    for (int microBatch = 1; microBatch <= 3; ++microBatch) {
      (microBatch <= last ? succeeded : outOfMemory).insert(microBatch);
    }
    EXPECT_EQ(microBatchesMarked(stage, Mark::kSucceeded), succeeded);
    EXPECT_EQ(microBatchesMarked(stage, Mark::kOOM), outOfMemory);
    ASSERT_EQ(stage.curve.size(), succeeded.size());
    EXPECT_EQ(stage.curve.back().microBatch, last) << "the curve ends at the boundary";
    EXPECT_EQ(stage.expectedLargest, 3);
    // 4, 5, 6 and 8 never ran: one range, 7 being no candidate.
    EXPECT_EQ(stage.pruned, (std::vector<MicroBatchRange>{{4, 8}}));
    EXPECT_FALSE(stage.wholeStagePruned);
    EXPECT_NE(stage.prunedReason.find("_tmbspg4: needs about"), std::string::npos)
        << stage.prunedReason;
  }
  ASSERT_TRUE(chart.best);
  EXPECT_EQ(chart.best->trial, "z3_gas1_tmbspg1");
}

TEST(Chart, AStageTheMemoryModelRulesOutIsPrunedWhole) {
  const oracle::PublishedModel& model = publishedModel("gpt2-xl");
  const Spec spec = oracle::specFor(model);
  const oracle::SearchRun run = searchOf(spec, oracle::publishedOracle(model));

  const Chart chart = buildChart(resultsOf(run.records), jobOf(spec, "gpt2-xl"));

  const StageCurve& zero0 = stageOf(chart, 0);
  EXPECT_TRUE(zero0.points.empty());
  EXPECT_TRUE(zero0.wholeStagePruned);
  EXPECT_EQ(zero0.expectedLargest, 0);
  EXPECT_NE(zero0.prunedReason.find("leaves no room"), std::string::npos) << zero0.prunedReason;
  for (const int stage : {1, 2, 3}) {
    EXPECT_FALSE(stageOf(chart, stage).wholeStagePruned) << "ZeRO-" << stage;
    EXPECT_EQ(stageOf(chart, stage).expectedLargest, 1) << "ZeRO-" << stage;
  }
}

TEST(Chart, OneTrialIsItsOwnBestAndBaseline) {
  const Chart chart = buildChart(
      resultsOf({record("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.1)}, "one"), std::nullopt);

  ASSERT_EQ(stagesOf(chart), (std::vector<int>{1}));
  EXPECT_EQ(chart.stages[0].points.size(), 1U);
  EXPECT_EQ(chart.stages[0].curve.size(), 1U);
  ASSERT_TRUE(chart.best && chart.baseline);
  EXPECT_EQ(chart.best->trial, "z1_gas1_tmbspg3");
  EXPECT_EQ(chart.best, chart.baseline);
  EXPECT_EQ(chart.speedup, 1.0);
}

TEST(Chart, AThousandTrialsOnTenStagesKeepEveryPoint) {
  const std::vector<TrialRecord> records = thousandTrials();
  const Chart chart = buildChart(resultsOf(records), std::nullopt);

  ASSERT_EQ(chart.stages.size(), 10U);
  const TrialRecord* best = nullptr;
  for (const auto& trial : records) {
    if (trial.value && (best == nullptr || *trial.value > *best->value)) {
      best = &trial;
    }
  }
  for (const auto& stage : chart.stages) {
    EXPECT_EQ(stage.points.size(), 100U);
    const int boundary = 20 + 3 * stage.stage;
    EXPECT_EQ(microBatchesMarked(stage, Mark::kOOM).size(),
              static_cast<std::size_t>(50 - boundary));
    // Two accumulations share each micro-batch; the curve keeps the better of them.
    EXPECT_EQ(stage.curve.size(), static_cast<std::size_t>(boundary));
    EXPECT_TRUE(stage.gradientAccumulationVaries);
  }
  ASSERT_TRUE(chart.best);
  EXPECT_EQ(chart.best->trial, best->name);
  EXPECT_TRUE(chart.unplaced.empty());
}

TEST(Chart, TheProfilingTrialIsNeitherAPointNorTheBaseline) {
  const Chart chart = buildChart(resultsOf({record("profile_model_info", Outcome::kSucceeded, 1000),
                                            record("z1_gas1_tmbspg2", Outcome::kSucceeded, 50),
                                            record("z1_gas1_tmbspg4", Outcome::kSucceeded, 80)}),
                                 std::nullopt);

  EXPECT_EQ(chart.unplaced, (std::vector<std::string>{"profile_model_info"}));
  ASSERT_TRUE(chart.baseline && chart.best);
  EXPECT_EQ(chart.baseline->trial, "z1_gas1_tmbspg2");
  EXPECT_EQ(chart.best->trial, "z1_gas1_tmbspg4");
  EXPECT_DOUBLE_EQ(*chart.speedup, 80.0 / 50);
}

TEST(Chart, LatencyIsReadFromTheRecordsAndItsBestIsTheLowest) {
  auto fast = record("z1_gas1_tmbspg2", Outcome::kSucceeded, 400);
  auto slow = record("z1_gas1_tmbspg4", Outcome::kSucceeded, 500);
  for (auto* trial : {&fast, &slow}) {
    trial->metrics = {{"latency", *trial->value}, {"throughput", 1e6 / *trial->value}};
  }
  const auto results = resultsOf({slow, fast});

  EXPECT_EQ(metricOf(results, std::nullopt), Metric::kLatency);
  const Chart chart = buildChart(results, std::nullopt);
  ASSERT_TRUE(chart.best && chart.speedup);
  EXPECT_EQ(chart.best->trial, "z1_gas1_tmbspg2");
  EXPECT_DOUBLE_EQ(*chart.speedup, 500.0 / 400);
}

TEST(Chart, TrialNamesGiveStageMicroBatchAndAccumulation) {
  EXPECT_EQ(coordinatesFromName("z1_gas1_tmbspg3"), (Coordinates{1, 3, 1}));
  EXPECT_EQ(coordinatesFromName("z0_gas16_tmbspg2"), (Coordinates{0, 2, 16}));
  EXPECT_EQ(coordinatesFromName("z1_rbs5.0e+07_abs1.0e+09_gas1_tmbspg11"), (Coordinates{1, 11, 1}));
  EXPECT_EQ(coordinatesFromName("z2_rbs5.0e+07_tmbspg6_gas4"), (Coordinates{2, 6, 4}));
  EXPECT_FALSE(coordinatesFromName("profile_model_info"));
  EXPECT_FALSE(coordinatesFromName("z1_rbs_abs_tmbspg")) << "a space, not a trial";
  EXPECT_FALSE(coordinatesFromName("z1_gas1_tmbspg0"));
  EXPECT_FALSE(coordinatesFromName("zx_gas1_tmbspg3"));
  EXPECT_FALSE(coordinatesFromName(""));
}

TEST(Chart, EveryOutcomeHasAMark) {
  EXPECT_EQ(markOf(Outcome::kSucceeded), Mark::kSucceeded);
  EXPECT_EQ(markOf(Outcome::kOOM), Mark::kOOM);
  EXPECT_EQ(markOf(Outcome::kTimedOut), Mark::kTimedOut);
  for (const auto outcome :
       {Outcome::kFailed, Outcome::kMetricsUnavailable, Outcome::kUnschedulable}) {
    EXPECT_EQ(markOf(outcome), Mark::kFailed);
  }
}

}  // namespace
