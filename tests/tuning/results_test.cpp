#include "tuning/results.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "api/job.h"
#include "support/fast_trial.h"
#include "support/text.h"
#include "tuning/space.h"

namespace {

using autotune::api::GpuHours;
using autotune::api::Metric;
using autotune::api::Outcome;
using autotune::api::SpaceSummary;
using autotune::api::Spec;
using autotune::api::TrialRecord;
using autotune::testing::contains;
using autotune::testing::fastTrial;
using autotune::tuning::baselineValue;
using autotune::tuning::bestTrial;
using autotune::tuning::describeSpace;
using autotune::tuning::gpuHoursLine;
using autotune::tuning::gpuHoursOf;
using autotune::tuning::makeFastTrial;
using autotune::tuning::makeProfileTrial;
using autotune::tuning::optimalConfig;
using autotune::tuning::report;
using autotune::tuning::summarizeSpaces;
using autotune::tuning::summaryTable;
using autotune::tuning::Trial;
using autotune::tuning::TuningSpace;
using nlohmann::json;

TrialRecord succeeded(std::string name, std::string space, double value) {
  TrialRecord record;
  record.name = std::move(name);
  record.space = std::move(space);
  record.outcome = Outcome::kSucceeded;
  record.value = value;
  return record;
}

TrialRecord failed(std::string name, std::string space, Outcome outcome = Outcome::kOOM) {
  TrialRecord record;
  record.name = std::move(name);
  record.space = std::move(space);
  record.outcome = outcome;
  return record;
}

TrialRecord profile() { return succeeded("profile_model_info", "profile_model_info", 1000); }

TrialRecord ran(TrialRecord record, double seconds) {
  record.durationSeconds = seconds;
  return record;
}

TrialRecord reused(TrialRecord record, double seconds) {
  record.durationSeconds = seconds;
  record.reusedFrom = "autotune-measurement-" + record.name;
  return record;
}

Spec allStagesSpec(json args, int gpus = 1) {
  Spec spec;
  spec.deepspeedConfig = {{"zero_optimization", {{"stage", "all"}}}};
  spec.resources.gpusPerTrial = gpus;
  spec.podTemplate = {
      {"spec",
       {{"containers",
         {{{"name", "trainer"}, {"command", {"deepspeed", "train.py"}}, {"args", args}}}}}}};
  return spec;
}

// The trimmed cells of the summary table's row whose first cell is `first` (empty when none).
std::vector<std::string> row(const std::string& table, const std::string& first) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream parts(line);
    for (std::string cell; std::getline(parts, cell, '|');) {
      const auto begin = cell.find_first_not_of(' ');
      const auto end = cell.find_last_not_of(' ');
      cells.push_back(begin == std::string::npos ? "" : cell.substr(begin, end - begin + 1));
    }
    if (cells.size() > 1 && cells[0].empty() && cells[1] == first) {
      return {cells.begin() + 1, cells.end()};
    }
  }
  return {};
}

// --- summarizeSpaces ----------------------------------------------------------------------------

TEST(SummarizeSpaces, OneRowPerSpaceInTheOrderSpacesFirstAppear) {
  const auto spaces = summarizeSpaces(
      {succeeded("z1_gas1_tmbspg3", "z1", 87), succeeded("z0_gas1_tmbspg2", "z0", 59),
       succeeded("z1_gas1_tmbspg2", "z1", 80)},
      Metric::kThroughput);
  ASSERT_EQ(spaces.size(), 2U);
  EXPECT_EQ(spaces[0].name, "z1");
  EXPECT_EQ(spaces[0].trials, 2);
  EXPECT_EQ(spaces[0].bestValue, 87);
  EXPECT_EQ(spaces[0].bestTrial, "z1_gas1_tmbspg3");
  EXPECT_EQ(spaces[1].name, "z0");
  EXPECT_EQ(spaces[1].trials, 1);
}

TEST(SummarizeSpaces, FailedTrialsCountButHaveNoValue) {
  const auto spaces =
      summarizeSpaces({succeeded("z2_gas1_tmbspg3", "z2", 77), failed("z2_gas1_tmbspg4", "z2"),
                       failed("z2_gas1_tmbspg5", "z2", Outcome::kFailed)},
                      Metric::kThroughput);
  ASSERT_EQ(spaces.size(), 1U);
  EXPECT_EQ(spaces[0].trials, 3);
  EXPECT_EQ(spaces[0].bestValue, 77);
  EXPECT_EQ(spaces[0].bestTrial, "z2_gas1_tmbspg3");
}

TEST(SummarizeSpaces, SpaceWhereEveryTrialFailedHasNoBest) {
  const auto spaces =
      summarizeSpaces({failed("z0_gas1_tmbspg1", "z0"), succeeded("z1_gas1_tmbspg1", "z1", 40)},
                      Metric::kThroughput);
  ASSERT_EQ(spaces.size(), 2U);
  EXPECT_EQ(spaces[0].trials, 1);
  EXPECT_TRUE(spaces[0].bestTrial.empty());
}

TEST(SummarizeSpaces, LatencyPicksTheSmallestValue) {
  const auto spaces = summarizeSpaces(
      {succeeded("z1_gas1_tmbspg1", "z1", 0.30), succeeded("z1_gas1_tmbspg2", "z1", 0.20),
       succeeded("z1_gas1_tmbspg3", "z1", 0.25)},
      Metric::kLatency);
  ASSERT_EQ(spaces.size(), 1U);
  EXPECT_EQ(spaces[0].bestValue, 0.20);
  EXPECT_EQ(spaces[0].bestTrial, "z1_gas1_tmbspg2");
}

TEST(SummarizeSpaces, ThroughputPicksTheLargestValue) {
  const auto spaces = summarizeSpaces(
      {succeeded("z1_gas1_tmbspg1", "z1", 30), succeeded("z1_gas1_tmbspg2", "z1", 50),
       succeeded("z1_gas1_tmbspg3", "z1", 40)},
      Metric::kThroughput);
  ASSERT_EQ(spaces.size(), 1U);
  EXPECT_EQ(spaces[0].bestTrial, "z1_gas1_tmbspg2");
}

TEST(SummarizeSpaces, TheProfilingTrialIsNotASpace) {
  const auto spaces =
      summarizeSpaces({profile(), succeeded("z1_gas1_tmbspg3", "z1", 87)}, Metric::kThroughput);
  ASSERT_EQ(spaces.size(), 1U);
  EXPECT_EQ(spaces[0].name, "z1");
  EXPECT_EQ(spaces[0].trials, 1);
}

// --- summaryTable -------------------------------------------------------------------------------

TEST(SummaryTable, ListsEverySpaceAGlobalRowAndTheTotal) {
  const std::vector<SpaceSummary> spaces = {{"z0", 3, 59.0229, "z0_gas1_tmbspg2"},
                                            {"z1", 4, 87.3017, "z1_gas1_tmbspg3"},
                                            {"z2", 2, 77.8338, "z2_gas1_tmbspg3"}};
  const std::string table = summaryTable(spaces, Metric::kThroughput, 3723);
  EXPECT_EQ(row(table, "tuning_space"),
            (std::vector<std::string>{"tuning_space", "num_experiments", "best_metric_val",
                                      "best_exp_name"}))
      << table;
  EXPECT_EQ(row(table, "z0"), (std::vector<std::string>{"z0", "3", "59.0229", "z0_gas1_tmbspg2"}))
      << table;
  EXPECT_EQ(row(table, "z1"), (std::vector<std::string>{"z1", "4", "87.3017", "z1_gas1_tmbspg3"}))
      << table;
  EXPECT_EQ(row(table, "z2"), (std::vector<std::string>{"z2", "2", "77.8338", "z2_gas1_tmbspg3"}))
      << table;
  EXPECT_EQ(row(table, "global"),
            (std::vector<std::string>{"global", "9", "87.3017", "z1_gas1_tmbspg3"}))
      << table;
  EXPECT_TRUE(contains(table, "Total number of experiments: 9.")) << table;
  EXPECT_TRUE(contains(table, "1:02:03")) << table;
}

TEST(SummaryTable, SpacesComeBeforeTheGlobalRow) {
  const std::vector<SpaceSummary> spaces = {{"z1", 1, 40, "z1_gas1_tmbspg1"},
                                            {"z0", 1, 30, "z0_gas1_tmbspg1"}};
  const std::string table = summaryTable(spaces, Metric::kThroughput, 0);
  EXPECT_LT(table.find("| tuning_space"), table.find("| z1 "));
  EXPECT_LT(table.find("| z1 "), table.find("| z0 "));
  EXPECT_LT(table.find("| z0 "), table.find("| global"));
}

TEST(SummaryTable, GlobalBestForLatencyIsTheSmallest) {
  const std::vector<SpaceSummary> spaces = {
      {"z0", 1, 0.5, "z0_gas1_tmbspg1"}, {"z1", 1, 0.2, "z1_gas1_tmbspg1"}, {"z2", 1, 0, ""}};
  const std::string table = summaryTable(spaces, Metric::kLatency, 0);
  EXPECT_EQ(row(table, "global"),
            (std::vector<std::string>{"global", "3", "0.2", "z1_gas1_tmbspg1"}))
      << table;
  EXPECT_TRUE(contains(table, "Total number of experiments: 3.")) << table;
}

// --- gpuHoursOf ---------------------------------------------------------------------------------

constexpr double kHoursTolerance = 1e-9;

TEST(GpuHoursOf, EveryTrialThatRanCountsAsUsedUnderItsOutcome) {
  const GpuHours hours = gpuHoursOf(
      {ran(profile(), 360), ran(succeeded("z0_a", "z0", 59), 3600), ran(failed("z0_b", "z0"), 900),
       ran(succeeded("z1_a", "z1", 87), 1800), ran(failed("z1_b", "z1", Outcome::kFailed), 180)},
      1);
  EXPECT_NEAR(hours.used, 1.9, kHoursTolerance);  // (360 + 3600 + 900 + 1800 + 180) s / 3600
  EXPECT_NEAR(hours.saved, 0, kHoursTolerance);
  ASSERT_EQ(hours.usedByOutcome.size(), 3U);
  // The profiling trial ran on GPUs too.
  EXPECT_NEAR(hours.usedByOutcome.at("Succeeded"), 1.6, kHoursTolerance);
  EXPECT_NEAR(hours.usedByOutcome.at("OOM"), 0.25, kHoursTolerance);
  EXPECT_NEAR(hours.usedByOutcome.at("Failed"), 0.05, kHoursTolerance);
}

TEST(GpuHoursOf, AReusedResultIsSavedAndNotUsed) {
  const GpuHours hours =
      gpuHoursOf({reused(succeeded("z0_a", "z0", 59), 3600), reused(failed("z0_b", "z0"), 1800),
                  ran(succeeded("z1_a", "z1", 87), 900)},
                 1);
  EXPECT_NEAR(hours.used, 0.25, kHoursTolerance);
  EXPECT_NEAR(hours.saved, 1.5, kHoursTolerance);
  EXPECT_EQ(hours.usedByOutcome, (std::map<std::string, double>{{"Succeeded", 0.25}}));
}

TEST(GpuHoursOf, EveryTrialHoldsGpusPerTrialGpus) {
  const std::vector<TrialRecord> records = {ran(succeeded("z0_a", "z0", 59), 1800),
                                            reused(succeeded("z1_a", "z1", 87), 450)};
  const GpuHours one = gpuHoursOf(records, 1);
  const GpuHours sixteen = gpuHoursOf(records, 16);
  EXPECT_NEAR(one.used, 0.5, kHoursTolerance);
  EXPECT_NEAR(sixteen.used, 8, kHoursTolerance);
  EXPECT_NEAR(sixteen.saved, 2, kHoursTolerance);
  EXPECT_NEAR(sixteen.usedByOutcome.at("Succeeded"), 8, kHoursTolerance);
}

TEST(GpuHoursOf, NoResultsCostNothing) {
  EXPECT_EQ(gpuHoursOf({}, 8), GpuHours{});
  EXPECT_TRUE(gpuHoursOf({}, 8).usedByOutcome.empty());
}

TEST(GpuHoursLine, NamesWhatWasUsedByOutcomeAndWhatWasSaved) {
  GpuHours hours;
  hours.used = 0.425;
  hours.saved = 12.5;
  hours.usedByOutcome = {{"Failed", 0.025}, {"OOM", 0.1}, {"Succeeded", 0.3}};
  EXPECT_EQ(gpuHoursLine(hours),
            "GPU-hours: 0.425 used (Succeeded 0.3, OOM 0.1, Failed 0.025), 12.5 saved by reused "
            "results");
}

TEST(GpuHoursLine, FiguresKeepThreeSignificantDigitsWithoutExponents) {
  GpuHours hours;
  hours.used = 1234.4;
  hours.usedByOutcome = {{"Succeeded", 1234.2}, {"TimedOut", 0.0002}};
  EXPECT_EQ(gpuHoursLine(hours),
            "GPU-hours: 1234 used (Succeeded 1234, TimedOut <0.001), 0 saved by reused results");
  EXPECT_EQ(gpuHoursLine(GpuHours{}), "GPU-hours: 0 used, 0 saved by reused results");
}

// --- baseline and best ---------------------------------------------------------------------------

TEST(BaselineValue, IsTheFirstSuccessfulTrial) {
  EXPECT_EQ(baselineValue({profile(), failed("z0_gas1_tmbspg4", "z0"),
                           succeeded("z0_gas1_tmbspg2", "z0", 59), succeeded("z1", "z1", 87)}),
            59);
}

TEST(BaselineValue, IsUnknownWhenNothingSucceeded) {
  EXPECT_EQ(baselineValue({failed("z0_gas1_tmbspg4", "z0")}), std::nullopt);
  EXPECT_EQ(baselineValue({}), std::nullopt);
}

TEST(BestTrial, ThroughputSpeedupIsValueOverBaseline) {
  const Spec spec = allStagesSpec(json::array());
  const auto best =
      bestTrial(fastTrial(spec, 1, 3, 1), 87, Metric::kThroughput, 58, spec.resources);
  EXPECT_EQ(best.trial, "z1_gas1_tmbspg3");
  EXPECT_EQ(best.zeroStage, 1);
  EXPECT_EQ(best.microBatchSize, 3);
  EXPECT_EQ(best.gradientAccumulationSteps, 1);
  EXPECT_EQ(best.value, 87);
  ASSERT_TRUE(best.speedup.has_value());
  EXPECT_NEAR(*best.speedup, 1.5, kHoursTolerance);
}

TEST(BestTrial, NamesTheNodesAndGpusItsConfigIsFor) {
  Spec spec = allStagesSpec(json::array(), 16);
  spec.resources.nodesPerTrial = 2;
  const auto best =
      bestTrial(fastTrial(spec, 1, 3, 1), 87, Metric::kThroughput, 58, spec.resources);
  EXPECT_EQ(best.nodes, 2);
  EXPECT_EQ(best.gpus, 16);
}

// cmd.txt of a multi-node search: how to run it on each node, and the command reading the
// rendezvous from the node's environment where the trial Pods had Kubernetes expand it.
TEST(Report, AMultiNodeCommandRunsOnEachNodeFromItsEnvironment) {
  Spec spec = allStagesSpec(
      json{"--num_nodes", "${AUTOTUNE_NUM_NODES}", "--node_rank", "${AUTOTUNE_NODE_RANK}",
           "--master_addr=${AUTOTUNE_MASTER_ADDR}", "--deepspeed", "x.json"},
      16);
  spec.resources.nodesPerTrial = 2;
  const Trial best = fastTrial(spec, 1, 3, 1);
  const auto written = report(spec, "gpt2", {succeeded(best.name, "z1", 87)}, best, {best}, 60,
                              "/etc/autotune/ds_config.json");
  EXPECT_EQ(written.command,
            "# On each of 2 nodes with 8 GPUs each, with AUTOTUNE_NUM_NODES=2, AUTOTUNE_NODE_RANK "
            "the node's rank (0 to 1), AUTOTUNE_MASTER_ADDR rank 0's address and "
            "AUTOTUNE_MASTER_PORT=29500\n"
            "deepspeed train.py --num_nodes \"${AUTOTUNE_NUM_NODES}\" --node_rank "
            "\"${AUTOTUNE_NODE_RANK}\" --master_addr=\"${AUTOTUNE_MASTER_ADDR}\" --deepspeed "
            "/etc/autotune/ds_config.json");
}

TEST(Report, ASingleNodeCommandIsOneLine) {
  const Spec spec = allStagesSpec(json{"--deepspeed", "x.json"});
  const Trial best = fastTrial(spec, 1, 3, 1);
  EXPECT_EQ(report(spec, "gpt2", {}, best, {best}, 60, "/c.json").command,
            "deepspeed train.py --deepspeed /c.json");
}

TEST(BestTrial, LatencySpeedupIsBaselineOverValue) {
  const Spec spec = allStagesSpec(json::array());
  const auto best =
      bestTrial(fastTrial(spec, 2, 4, 1), 0.25, Metric::kLatency, 0.5, spec.resources);
  ASSERT_TRUE(best.speedup.has_value());
  EXPECT_NEAR(*best.speedup, 2.0, kHoursTolerance);
  EXPECT_EQ(best.metric, Metric::kLatency);
}

TEST(BestTrial, NoBaselineMeansNoSpeedup) {
  const Spec spec = allStagesSpec(json::array());
  EXPECT_EQ(
      bestTrial(fastTrial(spec, 1, 3, 1), 87, Metric::kThroughput, std::nullopt, spec.resources)
          .speedup,
      std::nullopt);
}

// --- optimalConfig ------------------------------------------------------------------------------

// The tuned config travels to a training job on any number of GPUs: DeepSpeed derives the
// global batch there, unless the user fixed it.
TEST(OptimalConfig, DropsTheAutotuningSectionAndLeavesTheTrainBatchToDeepSpeed) {
  Spec spec = allStagesSpec(json::array(), 8);
  spec.deepspeedConfig["autotuning"] = {{"enabled", true}};
  const TuningSpace space = describeSpace(spec);
  Trial best = makeFastTrial(space, 2, 4, 3);
  best.config["autotuning"] = {{"enabled", true}};
  ASSERT_EQ(best.config["train_batch_size"], 4 * 3 * 8) << "what the trial itself ran with";
  const json config = optimalConfig(best, spec);
  EXPECT_FALSE(config.contains("autotuning"));
  EXPECT_EQ(config["train_micro_batch_size_per_gpu"], 4);
  EXPECT_EQ(config["gradient_accumulation_steps"], 3);
  EXPECT_FALSE(config.contains("train_batch_size"));
  EXPECT_EQ(config["zero_optimization"]["stage"], 2);
}

TEST(OptimalConfig, KeepsATrainBatchTheUserGave) {
  Spec spec = allStagesSpec(json::array(), 8);
  spec.deepspeedConfig["train_batch_size"] = 96;
  spec.deepspeedConfig["train_micro_batch_size_per_gpu"] = "auto";
  EXPECT_EQ(optimalConfig(makeFastTrial(describeSpace(spec), 2, 4, 3), spec)["train_batch_size"],
            96);
  spec.deepspeedConfig["train_batch_size"] = "auto";
  EXPECT_EQ(optimalConfig(makeFastTrial(describeSpace(spec), 2, 4, 3), spec)["train_batch_size"],
            "auto")
      << "for the script to fill";
}

TEST(OptimalConfig, OfTheProfilingTrialHasNoProfilingRequest) {
  const Spec spec = allStagesSpec(json::array());
  EXPECT_FALSE(optimalConfig(makeProfileTrial(describeSpace(spec)), spec).contains("autotuning"));
}

}  // namespace

namespace autotune::tuning {
namespace {

TEST(MergePatch, HoldsOnlyWhatDiffersAndAppliesBackToTheTarget) {
  const nlohmann::json from = nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
    "fp16": {"enabled": true}, "zero_optimization": {"stage": 2, "overlap_comm": true,
    "offload_optimizer": {"device": "cpu"}}, "steps_per_print": 10})");
  const nlohmann::json to = nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1,
    "fp16": {"enabled": true}, "zero_optimization": {"stage": 3, "overlap_comm": true,
    "offload_optimizer": [1, 2]}, "bf16": {"enabled": false}})");
  const nlohmann::json patch = mergePatch(from, to);
  EXPECT_EQ(patch, nlohmann::json::parse(R"({
    "train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 3,
    "offload_optimizer": [1, 2]}, "bf16": {"enabled": false}, "steps_per_print": null})"));
  nlohmann::json applied = from;
  applied.merge_patch(patch);
  EXPECT_EQ(applied, to);
  EXPECT_EQ(mergePatch(to, to), nlohmann::json::object());
}

}  // namespace
}  // namespace autotune::tuning
