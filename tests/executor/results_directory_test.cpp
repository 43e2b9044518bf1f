#include "executor/results_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/job.h"
#include "support/text.h"
#include "tuning/space.h"

namespace {

namespace fs = std::filesystem;

using autotune::api::AutotuneJob;
using autotune::api::Duration;
using autotune::api::MeasuredModel;
using autotune::api::Outcome;
using autotune::api::TrialRecord;
using autotune::executor::ResultsDirectory;
using autotune::executor::specIdentity;
using autotune::executor::TrialPaths;
using autotune::executor::writeFileAtomically;
using autotune::testing::contains;
using autotune::testing::readFile;
using autotune::tuning::describeSpace;
using autotune::tuning::makeFastTrial;
using autotune::tuning::makeProfileTrial;
using autotune::tuning::Trial;
using nlohmann::json;

AutotuneJob job(const std::string& name = "gpt2-large", json stages = {0, 1, 2}) {
  AutotuneJob job;
  job.metadata = {{"name", name}};
  job.spec.deepspeedConfig = {{"zero_optimization", {{"stage", std::move(stages)}}},
                              {"train_micro_batch_size_per_gpu", "auto"},
                              {"fp16", {{"enabled", true}}}};
  job.spec.resources.gpusPerTrial = 16;
  return job;
}

TrialRecord trialRecord(std::string name, Outcome outcome = Outcome::kSucceeded,
                        std::optional<double> value = std::nullopt, std::string reason = "") {
  TrialRecord record;
  record.name = std::move(name);
  record.space = record.name.substr(0, 2);
  record.outcome = outcome;
  record.value = value;
  record.reason = std::move(reason);
  record.startTime = "2024-05-01T12:00:00Z";
  record.durationSeconds = 93.5;
  return record;
}

TrialRecord ran(TrialRecord record, double seconds) {
  record.durationSeconds = seconds;
  return record;
}

std::vector<std::string> namesOf(const std::vector<TrialRecord>& records) {
  std::vector<std::string> names;
  names.reserve(records.size());
  for (const auto& record : records) {
    names.push_back(record.name);
  }
  return names;
}

void writeFile(const fs::path& path, const std::string& content) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << content;
}

// A fresh, empty directory per test, removed afterwards.
class ResultsDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    base_ = fs::temp_directory_path() /
            ("autotune-results-test-" + std::to_string(::getpid()) + "-" + test->name());
    fs::remove_all(base_);
    fs::create_directories(base_);
    root_ = base_ / "runs" / "gpt2-large";
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(base_, ignored);
  }

  ResultsDirectory openOrFail(const AutotuneJob& job = ::job()) {
    auto directory = ResultsDirectory::open(root_, job);
    if (!directory) {
      throw std::runtime_error("open failed: " + directory.error());
    }
    return std::move(*directory);
  }

  // Two finished trials of gpt2-large, made durable; returns the bytes of results.json.
  std::string recordTwoTrials() {
    ResultsDirectory directory = openOrFail();
    EXPECT_TRUE(directory.record(trialRecord("z0_gas1_tmbspg2", Outcome::kSucceeded, 59.0), 0,
                                 std::nullopt));
    EXPECT_TRUE(directory.record(
        trialRecord("z0_gas1_tmbspg4", Outcome::kOOM, std::nullopt, "OOMKilled"), 1, std::nullopt));
    return readFile(root_ / "results.json");
  }

  fs::path base_;
  fs::path root_;
};

// --- opening ------------------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, OpeningCreatesTheResultsAndExperimentsDirectories) {
  const ResultsDirectory directory = openOrFail();
  EXPECT_TRUE(fs::is_directory(root_ / "results"));
  EXPECT_TRUE(fs::is_directory(root_ / "exps"));
  EXPECT_EQ(directory.root(), root_);
  EXPECT_TRUE(directory.records().empty());
  EXPECT_EQ(directory.measured(), std::nullopt);
  EXPECT_EQ(directory.nextLaunchIndex(), 0);
}

TEST_F(ResultsDirectoryTest, AnUnwritableRootFailsCleanly) {
  writeFile(base_ / "a-file", "not a directory\n");
  root_ = base_ / "a-file" / "results";
  const auto directory = ResultsDirectory::open(root_, job());
  ASSERT_FALSE(directory.has_value());
  EXPECT_TRUE(contains(directory.error(), root_.string())) << directory.error();
  EXPECT_EQ(readFile(base_ / "a-file"), "not a directory\n");
}

// --- recording and reading back -----------------------------------------------------------------

TEST_F(ResultsDirectoryTest, RecordedTrialsAreReadBackByTheNextRun) {
  recordTwoTrials();
  ASSERT_TRUE(fs::exists(root_ / "results.json"));

  const ResultsDirectory reopened = openOrFail();
  ASSERT_EQ(reopened.records().size(), 2U);
  const TrialRecord& first = reopened.records()[0];
  EXPECT_EQ(first.name, "z0_gas1_tmbspg2");
  EXPECT_EQ(first.space, "z0");
  EXPECT_EQ(first.outcome, Outcome::kSucceeded);
  EXPECT_EQ(first.value, 59.0);
  EXPECT_EQ(first.startTime, "2024-05-01T12:00:00Z");
  EXPECT_EQ(first.durationSeconds, 93.5);
  const TrialRecord& second = reopened.records()[1];
  EXPECT_EQ(second.name, "z0_gas1_tmbspg4");
  EXPECT_EQ(second.outcome, Outcome::kOOM);
  EXPECT_EQ(second.value, std::nullopt);
  EXPECT_EQ(second.reason, "OOMKilled");
}

TEST_F(ResultsDirectoryTest, ResultsJsonHoldsTheGpuHoursOfEveryFinishedTrial) {
  {
    ResultsDirectory directory = openOrFail();
    ASSERT_TRUE(directory.record(ran(trialRecord("z0_gas1_tmbspg2", Outcome::kSucceeded, 59), 900),
                                 0, std::nullopt));
    ASSERT_TRUE(
        directory.record(ran(trialRecord("z0_gas1_tmbspg4", Outcome::kOOM), 90), 1, std::nullopt));
  }
  // A resumed run counts what the earlier one recorded.
  ResultsDirectory directory = openOrFail();
  ASSERT_TRUE(directory.record(ran(trialRecord("z1_gas1_tmbspg3", Outcome::kSucceeded, 87), 675), 2,
                               std::nullopt));
  // 16 GPUs per trial: (900 + 675) s and 90 s.
  const json gpuHours = json::parse(readFile(root_ / "results.json"))["gpuHours"];
  EXPECT_NEAR(gpuHours.value("used", -1.0), 7.4, 1e-9) << gpuHours;
  EXPECT_EQ(gpuHours.value("saved", -1.0), 0) << gpuHours;
  EXPECT_NEAR(gpuHours["usedByOutcome"].value("Succeeded", -1.0), 7, 1e-9) << gpuHours;
  EXPECT_NEAR(gpuHours["usedByOutcome"].value("OOM", -1.0), 0.4, 1e-9) << gpuHours;
  EXPECT_EQ(gpuHours["usedByOutcome"].size(), 2U) << gpuHours;
  EXPECT_NEAR(directory.gpuHours().used, 7.4, 1e-9);
}

TEST_F(ResultsDirectoryTest, TrialsThatFinishOutOfOrderAreKeptInLaunchOrder) {
  {
    ResultsDirectory directory = openOrFail();
    ASSERT_TRUE(directory.record(trialRecord("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.3), 2,
                                 std::nullopt));
    ASSERT_TRUE(directory.record(trialRecord("z0_gas1_tmbspg2", Outcome::kSucceeded, 59.0), 1,
                                 std::nullopt));
    EXPECT_EQ(namesOf(directory.records()),
              (std::vector<std::string>{"z0_gas1_tmbspg2", "z1_gas1_tmbspg3"}));
  }
  const ResultsDirectory reopened = openOrFail();
  EXPECT_EQ(namesOf(reopened.records()),
            (std::vector<std::string>{"z0_gas1_tmbspg2", "z1_gas1_tmbspg3"}));
}

TEST_F(ResultsDirectoryTest, TheMeasuredModelIsKeptAcrossLaterTrialsAndRuns) {
  const MeasuredModel measured{774'000'000, 9'600'000'000};
  {
    ResultsDirectory directory = openOrFail();
    ASSERT_TRUE(directory.record(trialRecord("profile_model_info"), 0, measured));
    ASSERT_TRUE(directory.record(trialRecord("z0_gas1_tmbspg2", Outcome::kSucceeded, 59.0), 1,
                                 std::nullopt));
    ASSERT_TRUE(directory.measured().has_value());
    EXPECT_EQ(directory.measured()->numParameters, 774'000'000);
  }
  const ResultsDirectory reopened = openOrFail();
  ASSERT_TRUE(reopened.measured().has_value());
  EXPECT_EQ(reopened.measured()->numParameters, 774'000'000);
  EXPECT_EQ(reopened.measured()->activationMemoryPerSample, 9'600'000'000);
}

TEST_F(ResultsDirectoryTest, TheNextLaunchIndexContinuesAfterTheHighestRecorded) {
  {
    ResultsDirectory directory = openOrFail();
    EXPECT_EQ(directory.nextLaunchIndex(), 0);
    ASSERT_TRUE(directory.record(trialRecord("z0_gas1_tmbspg1"), 0, std::nullopt));
    ASSERT_TRUE(directory.record(trialRecord("z1_gas1_tmbspg1"), 5, std::nullopt));
    ASSERT_TRUE(directory.record(trialRecord("z2_gas1_tmbspg1"), 2, std::nullopt));
    EXPECT_EQ(directory.nextLaunchIndex(), 6);
  }
  const ResultsDirectory reopened = openOrFail();
  EXPECT_EQ(reopened.nextLaunchIndex(), 6);
}

TEST_F(ResultsDirectoryTest, RecordingLeavesNoTemporaryFileBehind) {
  recordTwoTrials();
  EXPECT_FALSE(fs::exists(root_ / "results.json.tmp"));
}

// --- whose results ------------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, ADifferentSpecInTheSameDirectoryIsRefusedAndNothingIsTouched) {
  const std::string before = recordTwoTrials();
  const auto directory = ResultsDirectory::open(root_, job("gpt2-large", {0, 1}));
  ASSERT_FALSE(directory.has_value());
  EXPECT_TRUE(contains(directory.error(), "gpt2-large")) << directory.error();
  EXPECT_TRUE(contains(directory.error(), root_.string())) << directory.error();
  EXPECT_EQ(readFile(root_ / "results.json"), before);
}

TEST_F(ResultsDirectoryTest, AnotherJobInTheSameDirectoryIsRefusedAndNothingIsTouched) {
  const std::string before = recordTwoTrials();
  const auto directory = ResultsDirectory::open(root_, job("bert-large"));
  ASSERT_FALSE(directory.has_value());
  EXPECT_TRUE(contains(directory.error(), "job gpt2-large")) << directory.error();
  EXPECT_EQ(readFile(root_ / "results.json"), before);
}

TEST_F(ResultsDirectoryTest, ARefusedOpenDoesNotKeepTheDirectoryLocked) {
  recordTwoTrials();
  ASSERT_FALSE(ResultsDirectory::open(root_, job("bert-large")).has_value());
  const ResultsDirectory directory = openOrFail();
  EXPECT_EQ(directory.records().size(), 2U);
}

TEST_F(ResultsDirectoryTest, ChangingOnlyTheLimitsTheUserMayChangeIsTheSameJob) {
  recordTwoTrials();
  AutotuneJob changed = job();
  changed.spec.parallelism = 4;
  changed.spec.search.maxTrials = 200;
  changed.spec.trialTimeout = Duration::parse("3h").value();
  changed.spec.schedulingTimeout = Duration::parse("1h").value();
  changed.spec.maxFailedTrials = 30;
  EXPECT_EQ(specIdentity(changed.spec), specIdentity(job().spec));

  const auto directory = ResultsDirectory::open(root_, changed);
  ASSERT_TRUE(directory.has_value()) << directory.error();
  EXPECT_EQ(directory->records().size(), 2U);
}

TEST_F(ResultsDirectoryTest, SpecIdentityChangesWithWhatDecidesTheTrials) {
  const std::string identity = specIdentity(job().spec);
  EXPECT_NE(specIdentity(job("gpt2-large", {0, 1}).spec), identity);
  AutotuneJob moreGpus = job();
  moreGpus.spec.resources.gpusPerTrial = 8;
  EXPECT_NE(specIdentity(moreGpus.spec), identity);
  AutotuneJob otherMetric = job();
  otherMetric.spec.search.metric = autotune::api::Metric::kLatency;
  EXPECT_NE(specIdentity(otherMetric.spec), identity);
}

// --- the lock -----------------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, ASecondRunCannotOpenADirectoryInUse) {
  {
    const ResultsDirectory first = openOrFail();
    const auto second = ResultsDirectory::open(root_, job());
    ASSERT_FALSE(second.has_value());
    EXPECT_TRUE(contains(second.error(), "in use")) << second.error();
  }
  const auto afterwards = ResultsDirectory::open(root_, job());
  EXPECT_TRUE(afterwards.has_value()) << afterwards.error();
}

TEST_F(ResultsDirectoryTest, AMovedDirectoryKeepsTheLock) {
  std::optional<ResultsDirectory> moved;
  {
    ResultsDirectory first = openOrFail();
    moved.emplace(std::move(first));
  }
  EXPECT_FALSE(ResultsDirectory::open(root_, job()).has_value());
  moved.reset();
  EXPECT_TRUE(ResultsDirectory::open(root_, job()).has_value());
}

// --- a damaged results.json ---------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, ACorruptResultsFileIsAnErrorThatSaysSoAndIsLeftAsItWas) {
  recordTwoTrials();
  const std::string corrupt = R"({"job": "gpt2-large", "trials": [{"name": "z0_gas1)";
  writeFile(root_ / "results.json", corrupt);
  const auto directory = ResultsDirectory::open(root_, job());
  ASSERT_FALSE(directory.has_value());
  EXPECT_TRUE(contains(directory.error(), "results.json")) << directory.error();
  EXPECT_TRUE(contains(directory.error(), "not valid JSON")) << directory.error();
  EXPECT_EQ(readFile(root_ / "results.json"), corrupt);
}

TEST_F(ResultsDirectoryTest, AResultsFileWithABrokenRecordIsAnErrorAndIsLeftAsItWas) {
  recordTwoTrials();
  json saved = json::parse(readFile(root_ / "results.json"));
  saved["trials"][1]["outcome"] = "Exploded";
  const std::string broken = saved.dump(2);
  writeFile(root_ / "results.json", broken);
  const auto directory = ResultsDirectory::open(root_, job());
  ASSERT_FALSE(directory.has_value());
  EXPECT_TRUE(contains(directory.error(), "results.json")) << directory.error();
  EXPECT_EQ(readFile(root_ / "results.json"), broken);
}

// --- preparing a trial --------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, PreparingATrialClearsAnInterruptedAttemptAndWritesItsFiles) {
  ResultsDirectory directory = openOrFail();
  const Trial trial = makeFastTrial(describeSpace(job().spec), 1, 3, 1);
  const fs::path trialDirectory = root_ / "results" / "z1_gas1_tmbspg3";
  fs::create_directories(trialDirectory / "checkpoints");
  writeFile(trialDirectory / "metrics.json", R"({"throughput": 1})");
  writeFile(trialDirectory / "stderr.log", "Killed\n");
  writeFile(trialDirectory / "checkpoints" / "step3.pt", "weights");

  const json config = {{"train_micro_batch_size_per_gpu", 3}, {"autotuning", {{"enabled", true}}}};
  const std::vector<std::string> command = {"deepspeed", "train.py", "--deepspeed",
                                            "ds_config.json"};
  const auto prepared = directory.prepareTrial(trial, config, command, "0-15");
  ASSERT_TRUE(prepared.has_value()) << prepared.error();

  EXPECT_FALSE(fs::exists(trialDirectory / "metrics.json"));
  EXPECT_FALSE(fs::exists(trialDirectory / "stderr.log"));
  EXPECT_FALSE(fs::exists(trialDirectory / "checkpoints"));

  const TrialPaths paths = directory.pathsFor(trial);
  EXPECT_EQ(paths.directory, fs::absolute(trialDirectory));
  EXPECT_EQ(fs::path(paths.protocol.config), fs::absolute(trialDirectory / "ds_config.json"));
  EXPECT_EQ(fs::path(paths.protocol.metrics), fs::absolute(trialDirectory / "metrics.json"));
  EXPECT_EQ(paths.stdoutLog, fs::absolute(trialDirectory / "stdout.log"));
  EXPECT_EQ(paths.stderrLog, fs::absolute(trialDirectory / "stderr.log"));

  EXPECT_EQ(json::parse(readFile(trialDirectory / "ds_config.json")), config);
  EXPECT_EQ(readFile(trialDirectory / "cmd.txt"),
            "deepspeed train.py --deepspeed ds_config.json\n");
  const json experiment = json::parse(readFile(root_ / "exps" / "z1_gas1_tmbspg3.json"));
  EXPECT_EQ(experiment["name"], "z1_gas1_tmbspg3");
  EXPECT_EQ(experiment["ds_config"], config);
  EXPECT_EQ(experiment["command"], json(command));
  EXPECT_EQ(experiment["gpus"], "0-15");
  EXPECT_EQ(experiment["space"], "z1");
}

TEST_F(ResultsDirectoryTest, TheProfilingTrialWritesItsModelInfoFile) {
  ResultsDirectory directory = openOrFail();
  const Trial trial = makeProfileTrial(describeSpace(job().spec));
  const auto prepared = directory.prepareTrial(trial, json::object(), {"python", "train.py"}, "0");
  ASSERT_TRUE(prepared.has_value()) << prepared.error();
  EXPECT_EQ(fs::path(directory.pathsFor(trial).protocol.metrics).filename(), "model_info.json");
  EXPECT_TRUE(fs::exists(root_ / "exps" / (trial.name + ".json")));
}

TEST_F(ResultsDirectoryTest, PreparingATrialLeavesOtherTrialsAlone) {
  ResultsDirectory directory = openOrFail();
  const auto space = describeSpace(job().spec);
  const Trial first = makeFastTrial(space, 1, 3, 1);
  const Trial second = makeFastTrial(space, 1, 4, 1);
  ASSERT_TRUE(directory.prepareTrial(first, json::object(), {"true"}, "0"));
  writeFile(root_ / "results" / first.name / "metrics.json", R"({"throughput": 87.3})");
  ASSERT_TRUE(directory.prepareTrial(second, json::object(), {"true"}, "1"));
  EXPECT_EQ(readFile(root_ / "results" / first.name / "metrics.json"), R"({"throughput": 87.3})");
}

// --- writeOutcome -------------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, TheOutcomeIsTheSummaryTheOptimalConfigAndItsCommand) {
  ResultsDirectory directory = openOrFail();
  ASSERT_TRUE(directory.record(ran(trialRecord("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.3), 450),
                               0, std::nullopt));
  ASSERT_TRUE(
      directory.record(ran(trialRecord("z1_gas1_tmbspg4", Outcome::kOOM), 45), 1, std::nullopt));
  const json optimal = {{"train_micro_batch_size_per_gpu", 3}};
  autotune::tuning::Report report;
  report.summary = "| global | 9 | 87.3 |\n";
  report.config = optimal.dump(2) + "\n";
  report.command = "deepspeed train.py";
  ASSERT_TRUE(directory.writeOutcome(report));
  // 450 s and 45 s on 16 GPUs.
  EXPECT_EQ(readFile(root_ / "summary.txt"),
            "| global | 9 | 87.3 |\n"
            "GPU-hours: 2.2 used (Succeeded 2, OOM 0.2), 0 saved by reused results\n");
  EXPECT_EQ(directory.optimalConfigPath(), root_ / "ds_config_optimal.json");
  EXPECT_EQ(json::parse(readFile(root_ / "ds_config_optimal.json")), optimal);
  EXPECT_EQ(readFile(root_ / "cmd_optimal.txt"), "deepspeed train.py\n");
}

// --- writeFileAtomically ------------------------------------------------------------------------

TEST_F(ResultsDirectoryTest, AnAtomicWriteReplacesTheWholeContentAndLeavesNoTemporaryFile) {
  const fs::path path = base_ / "results.json";
  ASSERT_TRUE(writeFileAtomically(path, std::string(4096, 'x') + "\n"));
  ASSERT_TRUE(writeFileAtomically(path, "{}\n"));
  EXPECT_EQ(readFile(path), "{}\n");
  EXPECT_FALSE(fs::exists(base_ / "results.json.tmp"));
  EXPECT_EQ(std::distance(fs::directory_iterator(base_), fs::directory_iterator()), 1);
}

// A link waiting at the name a temporary file once had (results.json.tmp) is not followed: the
// temporary file's name is made for each write, so the file the link names is left as it was.
TEST_F(ResultsDirectoryTest, AnAtomicWriteFollowsNoLinkLeftAtAKnownName) {
  const fs::path victim = base_ / "victim";
  { std::ofstream(victim) << "mine\n"; }
  fs::create_symlink(victim, base_ / "results.json.tmp");
  ASSERT_TRUE(writeFileAtomically(base_ / "results.json", "{}\n"));
  EXPECT_EQ(readFile(victim), "mine\n");
  EXPECT_EQ(readFile(base_ / "results.json"), "{}\n");
  EXPECT_EQ(fs::status(base_ / "results.json").permissions() & fs::perms::others_read,
            fs::perms::others_read);
}

TEST_F(ResultsDirectoryTest, AnAtomicWriteIntoAMissingDirectoryFailsAndSaysWhere) {
  const fs::path path = base_ / "missing" / "results.json";
  const auto written = writeFileAtomically(path, "{}\n");
  ASSERT_FALSE(written.has_value());
  EXPECT_TRUE(contains(written.error(), (base_ / "missing").string())) << written.error();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
