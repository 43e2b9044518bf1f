// `autotune run` with real processes: trial-sim plays DeepSpeed, autotune plays the user's
// command line. Each test gets its own directory; nothing waits a fixed time, only on conditions.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/process.h"

namespace autotune::executor {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct JobOptions {
  std::string name = "gpt2-large";
  std::string stages = "[0, 1, 2, 3]";
  std::string microBatch = "auto";
  int parallelism = 1;
  std::string trialTimeout = "5m";
  int maxFailedTrials = 10;
  int nodesPerTrial = 1;
  std::vector<std::string> simulatorFlags = {"--startup-seconds", "0.1"};
  // A shell starts each trial after leaving a child running, its pid appended to this file.
  std::string childrenFile;
  // The trainer's whole command as YAML (no args), instead of trial-sim's.
  std::string command;
  std::string numParameters = "774000000";
};

struct Finished {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string readText(const fs::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Seconds since the epoch of an RFC 3339 time with milliseconds, e.g. 2026-11-22T12:46:08.123Z.
double epochSeconds(const std::string& time) {
  std::tm parts{};
  std::istringstream in(time);
  in >> std::get_time(&parts, "%Y-%m-%dT%H:%M:%S");
  const double fraction = time.size() > 20 ? std::stod(time.substr(19, time.size() - 20)) : 0;
  return static_cast<double>(timegm(&parts)) + fraction;
}

class LocalRun : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 ("autotune-run-" + std::string(test->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path writeJob(const JobOptions& options) const {
    std::string command = "[";
    if (!options.childrenFile.empty()) {
      command +=
          "sh, -c, 'sleep 300 & echo $! >> " + options.childrenFile + "; exec \"$0\" \"$@\"', ";
    }
    command += std::string(TRIAL_SIM_BINARY) + ", --profile, gpt2-large";
    for (const auto& flag : options.simulatorFlags) {
      command += ", \"" + flag + "\"";
    }
    command += ", --launch-log, " + launchLog().string() + "]";
    const std::string args = options.command.empty()
                                 ? "        args: [--deepspeed, /etc/autotune/ds_config.json]\n"
                                 : "";
    if (!options.command.empty()) {
      command = options.command;
    }
    const fs::path path = directory_ / (options.name + ".yaml");
    std::ofstream(path) << "apiVersion: autotune.io/v1alpha1\n"
                        << "kind: AutotuneJob\n"
                        << "metadata: {name: " << options.name << "}\n"
                        << "spec:\n"
                        << "  deepspeedConfig:\n"
                        << "    train_micro_batch_size_per_gpu: " << options.microBatch << "\n"
                        << "    gradient_accumulation_steps: 1\n"
                        << "    fp16: {enabled: true}\n"
                        << "    zero_optimization: {stage: " << options.stages << "}\n"
                        << "  model: {numParameters: " << options.numParameters
                        << ", activationMemoryPerSample: 9600000000}\n"
                        << "  resources: {gpusPerTrial: 16, nodesPerTrial: "
                        << options.nodesPerTrial << ", gpuMemory: 32Gi}\n"
                        << "  parallelism: " << options.parallelism << "\n"
                        << "  trialTimeout: " << options.trialTimeout << "\n"
                        << "  maxFailedTrials: " << options.maxFailedTrials << "\n"
                        << "  argMappings: {train_micro_batch_size_per_gpu: "
                           "--per_device_train_batch_size}\n"
                        << "  template:\n"
                        << "    spec:\n"
                        << "      containers:\n"
                        << "      - name: trainer\n"
                        << "        command: " << command << "\n"
                        << args;
    return path;
  }

  fs::path results() const { return directory_ / "results"; }
  fs::path launchLog() const { return directory_ / "launches.log"; }

  ChildProcess start(const std::vector<std::string>& arguments) const {
    std::vector<std::string> argv = {AUTOTUNE_BINARY, "run"};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    auto process = ChildProcess::start({argv,
                                        {},
                                        directory_.string(),
                                        (directory_ / "stdout.txt").string(),
                                        (directory_ / "stderr.txt").string()});
    EXPECT_TRUE(process) << (process ? "" : process.error());
    return *process;
  }

  Finished run(const std::vector<std::string>& arguments) const {
    ChildProcess process = start(arguments);
    const ExitStatus status = process.wait();
    return {status.exitCode.value_or(-1), readText(directory_ / "stdout.txt"),
            readText(directory_ / "stderr.txt")};
  }

  json recorded() const { return recordedIn(results()); }

  Finished runNotApplying(std::vector<std::string> flags, std::string_view because);

  static json recordedIn(const fs::path& folder) {
    const std::string text = readText(folder / "results.json");
    return text.empty() ? json::object() : json::parse(text, nullptr, false);
  }

  std::map<std::string, int> launchCounts() const {
    std::map<std::string, int> counts;
    std::istringstream lines(readText(launchLog()));
    for (std::string line; std::getline(lines, line);) {
      ++counts[line];
    }
    return counts;
  }

  template <typename Condition>
  static bool waitFor(Condition condition, std::chrono::seconds limit) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      if (condition()) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return condition();
  }

  fs::path directory_;
};

std::vector<std::string> runArguments(const fs::path& job, const fs::path& results,
                                      const std::string& gpus = "0-15") {
  return {job.string(), "--gpus", gpus, "--results", results.string()};
}

std::string outcomeOf(const json& recorded, const std::string& trial) {
  for (const auto& record : recorded.value("trials", json::array())) {
    if (record.value("name", "") == trial) {
      return record.value("outcome", "");
    }
  }
  return "<not recorded>";
}

// A training command wrapped in a shell, as launch scripts are. The script sets the mapped flag
// itself: refused before anything runs, saying how to pass it on. With "$@" every trial runs the
// micro-batch it is named for (trial-sim refuses a flag that disagrees with its config, as the
// Hugging Face Trainer does), and the search ends at the published best.
TEST_F(LocalRun, AShellWrappedTrainerRunsTheMicroBatchEachTrialIsNamedFor) {
  const std::string trainer = std::string(TRIAL_SIM_BINARY) +
                              " --profile gpt2-large --startup-seconds 0.1 --launch-log " +
                              launchLog().string() + R"( --deepspeed \"$AUTOTUNE_DS_CONFIG\")";
  JobOptions options;
  options.stages = "[1]";
  options.command = "[bash, -c, \"" + trainer + " --per_device_train_batch_size 1\"]";
  const Finished refused = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(refused.exitCode, 2) << refused.err << refused.out;
  EXPECT_NE(refused.err.find("spec.template.spec.containers[0].command[2]: sets "
                             "--per_device_train_batch_size itself"),
            std::string::npos)
      << refused.err;
  EXPECT_FALSE(fs::exists(launchLog()));

  options.command = "[bash, -c, \"" + trainer + R"( \"$@\""])";
  const Finished finished = run(runArguments(writeJob(options), results()));
  ASSERT_EQ(finished.exitCode, 0) << finished.err << finished.out;
  EXPECT_NE(finished.out.find("Best trial: z1_gas1_tmbspg3"), std::string::npos) << finished.out;
  for (const auto& record : recorded()["trials"]) {
    EXPECT_NE(record.value("outcome", ""), "Failed") << record.dump();
  }
}

TEST_F(LocalRun, TheGpt2LargeExampleEndsAtThePublishedBest) {
  const fs::path example = fs::path(AUTOTUNE_SOURCE_DIR) / "examples/gpt2-large-local.yaml";
  const Finished finished = run(runArguments(example, results(), "0-31"));
  ASSERT_EQ(finished.exitCode, 0) << finished.err << finished.out;
  EXPECT_NE(finished.out.find("Best trial: z1_gas1_tmbspg3"), std::string::npos) << finished.out;

  const json optimal = json::parse(readText(results() / "ds_config_optimal.json"));
  EXPECT_EQ(optimal["zero_optimization"]["stage"], 1);
  EXPECT_EQ(optimal["train_micro_batch_size_per_gpu"], 3);
  EXPECT_FALSE(optimal.contains("train_batch_size")) << "DeepSpeed's to derive where it runs";
  EXPECT_FALSE(optimal.contains("autotuning"));
  EXPECT_NE(readText(results() / "cmd_optimal.txt").find("--per_device_train_batch_size 3"),
            std::string::npos);
  EXPECT_NE(readText(results() / "summary.txt").find("| global"), std::string::npos);
  const std::string report = readText(results() / "report.html");
  EXPECT_NE(report.find("<b>z1_gas1_tmbspg3</b>"), std::string::npos)
      << "report.html names no best";
  EXPECT_NE(finished.out.find("Report: "), std::string::npos) << finished.out;

  const json recorded = this->recorded();
  EXPECT_EQ(outcomeOf(recorded, "z1_gas1_tmbspg3"), "Succeeded");
  EXPECT_EQ(outcomeOf(recorded, "z1_gas1_tmbspg4"), "OOM");
  for (const auto& record : recorded["trials"]) {
    const fs::path trial = results() / "results" / record["name"].get<std::string>();
    for (const auto* file : {"ds_config.json", "cmd.txt", "stdout.log", "stderr.log"}) {
      EXPECT_TRUE(fs::exists(trial / file)) << trial / file;
    }
    EXPECT_TRUE(fs::exists(results() / "exps" / (record["name"].get<std::string>() + ".json")));
    if (record["outcome"] == "Succeeded") {
      EXPECT_TRUE(fs::exists(trial / "metrics.json")) << trial;
    }
  }

  // GPU-hours: each trial's running time times the example's 16 GPUs, by outcome; nothing reused.
  constexpr double kGpusPerTrial = 16;
  double used = 0;
  std::map<std::string, double> byOutcome;
  for (const auto& record : recorded["trials"]) {
    const double hours = record["durationSeconds"].get<double>() * kGpusPerTrial / 3600;
    used += hours;
    byOutcome[record["outcome"].get<std::string>()] += hours;
  }
  ASSERT_GT(used, 0);
  const json& gpuHours = recorded["gpuHours"];
  EXPECT_NEAR(gpuHours.value("used", -1.0), used, 1e-9) << gpuHours;
  EXPECT_EQ(gpuHours.value("saved", -1.0), 0) << gpuHours;
  ASSERT_EQ(gpuHours["usedByOutcome"].size(), byOutcome.size()) << gpuHours;
  for (const auto& [outcome, hours] : byOutcome) {
    EXPECT_NEAR(gpuHours["usedByOutcome"].value(outcome, -1.0), hours, 1e-9) << outcome;
  }
  const std::string summary = readText(results() / "summary.txt");
  const auto line = summary.find("\nGPU-hours: ");
  ASSERT_NE(line, std::string::npos) << summary;
  EXPECT_GT(line, summary.find("Total number of experiments"));
  // Three significant digits of the same figure.
  EXPECT_NEAR(std::stod(summary.substr(line + 12)), used, used * 0.005) << summary;
  EXPECT_NE(summary.find(" saved by reused results\n", line), std::string::npos) << summary;
}

// Whether any two recorded trials ran at the same time.
bool anyOverlap(const json& recorded) {
  std::vector<std::pair<double, double>> intervals;
  for (const auto& record : recorded["trials"]) {
    const double start = epochSeconds(record["startTime"].get<std::string>());
    intervals.emplace_back(start, start + record["durationSeconds"].get<double>());
  }
  for (std::size_t i = 0; i < intervals.size(); ++i) {
    for (std::size_t j = i + 1; j < intervals.size(); ++j) {
      if (intervals[i].first < intervals[j].second && intervals[j].first < intervals[i].second) {
        return true;
      }
    }
  }
  return false;
}

TEST_F(LocalRun, TwoTrialsRunAtOnceOnlyWithParallelismAndTheGpusForIt) {
  JobOptions options;
  options.simulatorFlags = {"--startup-seconds", "0.3"};
  options.parallelism = 2;
  ASSERT_EQ(run(runArguments(writeJob(options), directory_ / "parallel", "0-31")).exitCode, 0);
  const json parallel = json::parse(readText(directory_ / "parallel/results.json"));
  EXPECT_TRUE(anyOverlap(parallel));

  options.name = "sequential";
  options.parallelism = 1;
  ASSERT_EQ(run(runArguments(writeJob(options), directory_ / "sequential", "0-31")).exitCode, 0);
  EXPECT_FALSE(anyOverlap(json::parse(readText(directory_ / "sequential/results.json"))));

  options.name = "few-gpus";
  options.parallelism = 2;
  ASSERT_EQ(run(runArguments(writeJob(options), directory_ / "few-gpus", "0-15")).exitCode, 0);
  EXPECT_FALSE(anyOverlap(json::parse(readText(directory_ / "few-gpus/results.json"))));
}

TEST_F(LocalRun, KilledMidJobAndRunAgainItRunsNoFinishedTrialTwice) {
  JobOptions options;
  options.simulatorFlags = {"--startup-seconds", "0.3"};
  const fs::path job = writeJob(options);
  ChildProcess first = start(runArguments(job, results()));
  ASSERT_TRUE(waitFor([&] { return recorded().value("trials", json::array()).size() >= 3; },
                      std::chrono::seconds(60)));
  first.signalGroup(SIGKILL);
  first.wait();
  std::set<std::string> finishedBeforeKill;
  for (const auto& record : recorded()["trials"]) {
    finishedBeforeKill.insert(record["name"].get<std::string>());
  }

  const Finished second = run(runArguments(job, results()));
  ASSERT_EQ(second.exitCode, 0) << second.err;
  EXPECT_NE(second.out.find("Best trial: z1_gas1_tmbspg3"), std::string::npos);
  const auto counts = launchCounts();
  for (const auto& name : finishedBeforeKill) {
    EXPECT_EQ(counts.at(name), 1) << name << " ran again after the restart";
  }
  EXPECT_GT(counts.size(), finishedBeforeKill.size());
}

TEST_F(LocalRun, GarbageMetricsAreMetricsUnavailable) {
  JobOptions options;
  options.simulatorFlags = {"--garbage-metrics"};
  options.maxFailedTrials = 1;
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 1);
  const json trials = recorded().value("trials", json::array());
  ASSERT_EQ(trials.size(), 1U) << trials.dump();
  EXPECT_EQ(trials.front().value("outcome", ""), "MetricsUnavailable") << trials.dump();
}

// The memory model lets ZeRO-3 at micro-batch 2 through; GPT2-large's published ZeRO-3 run failed.
TEST_F(LocalRun, AConfigThatDoesNotFitIsOOM) {
  JobOptions options;
  options.stages = "3";
  options.microBatch = "[2]";
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 1) << "no trial can succeed";
  EXPECT_EQ(outcomeOf(recorded(), "z3_gas1_tmbspg2"), "OOM");
  EXPECT_NE(readText(results() / "results/z3_gas1_tmbspg2/stderr.log").find("out of memory"),
            std::string::npos);
}

// 70 billion parameters on trials of 16 GPUs of 32 GiB: nothing runs, the run says why and what
// would fit, and its report is drawn all the same.
TEST_F(LocalRun, ASearchWhereNothingFitsLaunchesNothingAndSaysWhyInItsReport) {
  JobOptions options;
  options.numParameters = "70000000000";
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 1);
  EXPECT_NE(finished.out.find("Search failed: nothing fits: no ZeRO stage"), std::string::npos)
      << finished.out;
  EXPECT_NE(finished.out.find("What would fit: "), std::string::npos) << finished.out;
  EXPECT_FALSE(fs::exists(launchLog())) << "no trial launched";
  EXPECT_NE(readText(results() / "summary.txt").find("nothing fits"), std::string::npos);
  EXPECT_FALSE(fs::exists(results() / "ds_config_optimal.json"));
  EXPECT_NE(finished.out.find("Report: "), std::string::npos) << finished.out;
  EXPECT_NE(readText(results() / "report.html").find("nothing fits"), std::string::npos);
}

// A search of two trials (stage 1, micro-batches 1 and 3) whose trial-sim takes `flags`: a script
// that does not run what it is given. Both trials are ConfigNotApplied for `because`, the run
// fails, and no best of another config is written.
Finished LocalRun::runNotApplying(std::vector<std::string> flags, std::string_view because) {
  JobOptions options;
  options.stages = "1";
  options.microBatch = "[1, 3]";
  options.simulatorFlags = {"--startup-seconds", "0.1"};
  options.simulatorFlags.insert(options.simulatorFlags.end(), flags.begin(), flags.end());
  Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 1) << finished.out;
  const json trials = recorded().value("trials", json::array());
  EXPECT_EQ(trials.size(), 2U) << trials.dump();
  for (const auto& trial : trials) {
    EXPECT_EQ(trial.value("outcome", ""), "ConfigNotApplied") << trial.dump();
    EXPECT_NE(trial.value("reason", "").find(because), std::string::npos) << trial.dump();
  }
  EXPECT_FALSE(fs::exists(results() / "ds_config_optimal.json")) << "no best of another config";
  return finished;
}

// A script that sets its own micro-batch runs 2 whatever each trial asks: no trial measured its
// own config, and the second of them ends the search, naming what ran.
TEST_F(LocalRun, TrialsThatRunAnotherMicroBatchThanAskedAreConfigNotAppliedAndEndTheSearch) {
  const Finished finished =
      runNotApplying({"--run-micro-batch", "2"}, "the engine ran a global batch of 32");
  EXPECT_NE(finished.out.find("Search failed: 2 trials did not run the config they were given"),
            std::string::npos)
      << finished.out;
}

// A script that builds its own ZeRO stage (as one taking --zero_stage does) runs the batch it
// was asked, so its metrics alone cannot tell; the values it reports its engine ran do.
TEST_F(LocalRun, TrialsWhoseEngineRanAnotherStageAreConfigNotAppliedByTheirEffectiveValues) {
  runNotApplying({"--run-stage", "2"},
                 "the engine ran zero_optimization.stage = 2, not the 1 the trial's config asks");
}

// Each success says whether what it ran was checked: trial-sim reports its engine's values as the
// protocol asks, and a script that reports none is measured all the same, unverified.
TEST_F(LocalRun, EverySuccessSaysWhetherItsConfigWasVerified) {
  JobOptions options;
  options.stages = "1";
  options.microBatch = "[1, 3]";
  options.simulatorFlags = {"--startup-seconds", "0.1"};
  ASSERT_EQ(run(runArguments(writeJob(options), results())).exitCode, 0);
  for (const auto& trial : recorded().value("trials", json::array())) {
    EXPECT_EQ(trial.value("configVerified", json()), true) << trial.dump();
  }
  options.simulatorFlags = {"--startup-seconds", "0.1", "--no-effective-values"};
  const fs::path unverified = results().parent_path() / "unverified-results";
  const Finished finished = run(runArguments(writeJob(options), unverified));
  ASSERT_EQ(finished.exitCode, 0) << finished.out;
  EXPECT_NE(finished.out.find("the best trial did not report what its engine ran"),
            std::string::npos)
      << finished.out;
  const json trials = recordedIn(unverified).value("trials", json::array());
  ASSERT_EQ(trials.size(), 2U) << trials.dump();
  for (const auto& trial : trials) {
    EXPECT_EQ(trial.value("outcome", ""), "Succeeded") << trial.dump();
    EXPECT_EQ(trial.value("configVerified", json()), false) << trial.dump();
  }
}

TEST_F(LocalRun, ATrialOverItsTimeoutIsStoppedAndTimedOut) {
  JobOptions options;
  options.stages = "1";
  options.microBatch = "[3]";
  options.trialTimeout = "1s";
  options.simulatorFlags = {"--step-seconds", "600"};
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 1);
  EXPECT_EQ(outcomeOf(recorded(), "z1_gas1_tmbspg3"), "TimedOut");
}

// Whether the process is gone: not there, or a zombie waiting for whoever adopted it.
bool gone(const std::string& pid) {
  const std::string stat = readText("/proc/" + pid + "/stat");
  const auto state = stat.rfind(") ");
  return stat.empty() || (state != std::string::npos && stat[state + 2] == 'Z');
}

TEST_F(LocalRun, WhatATrialLeftRunningIsStoppedWhenTheTrialEnds) {
  JobOptions options;
  options.stages = "1";
  options.microBatch = "[1, 3]";
  options.childrenFile = (directory_ / "children").string();
  const Finished finished = run(runArguments(writeJob(options), results()));
  ASSERT_EQ(finished.exitCode, 0) << finished.err << finished.out;
  std::istringstream pids(readText(options.childrenFile));
  int children = 0;
  for (std::string pid; std::getline(pids, pid); ++children) {
    EXPECT_TRUE(waitFor([&] { return gone(pid); }, std::chrono::seconds(10))) << "pid " << pid;
  }
  EXPECT_EQ(children, 2);
}

TEST_F(LocalRun, SigtermStopsEveryTrialAndRecordsNothingFalse) {
  JobOptions options;
  options.simulatorFlags = {"--step-seconds", "600"};
  ChildProcess process = start(runArguments(writeJob(options), results()));
  ASSERT_TRUE(waitFor([&] { return launchCounts().size() == 1; }, std::chrono::seconds(30)));
  process.signalGroup(SIGTERM);
  const ExitStatus status = process.wait();
  EXPECT_EQ(status.exitCode, 128 + SIGTERM);
  EXPECT_EQ(outcomeOf(recorded(), "z0_gas1_tmbspg1"), "<not recorded>");
}

TEST_F(LocalRun, ACommandThatDoesNotExistIsRefusedBeforeAnythingRuns) {
  const fs::path job = directory_ / "job.yaml";
  std::string text = readText(writeJob({}));
  text.replace(text.find(TRIAL_SIM_BINARY), std::string(TRIAL_SIM_BINARY).size(),
               "no-such-trainer");
  std::ofstream(job) << text;
  const Finished finished = run(runArguments(job, results()));
  EXPECT_EQ(finished.exitCode, 2);
  EXPECT_NE(finished.err.find("\"no-such-trainer\" is not found on PATH"), std::string::npos)
      << finished.err;
  EXPECT_EQ(std::count(finished.err.begin(), finished.err.end(), '\n'), 1);
  EXPECT_FALSE(fs::exists(launchLog()));
}

TEST_F(LocalRun, FewerGpusThanOneTrialNeedsIsRefused) {
  const Finished finished = run(runArguments(writeJob({}), results(), "0-7"));
  EXPECT_EQ(finished.exitCode, 2);
  EXPECT_NE(finished.err.find("a trial needs 16 GPUs"), std::string::npos) << finished.err;
}

TEST_F(LocalRun, AMultiNodeJobIsRefusedAsSingleMachine) {
  JobOptions options;
  options.nodesPerTrial = 2;
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 2);
  EXPECT_NE(finished.err.find("spec.resources.nodesPerTrial is 2: autotune run runs every trial "
                              "on this one machine"),
            std::string::npos)
      << finished.err;
  EXPECT_FALSE(fs::exists(launchLog()));
}

TEST_F(LocalRun, AnUnwritableResultsDirectoryIsRefused) {
  std::ofstream(directory_ / "a-file") << "not a directory";
  const Finished finished = run(runArguments(writeJob({}), directory_ / "a-file" / "results"));
  EXPECT_EQ(finished.exitCode, 2);
  EXPECT_NE(finished.err.find("cannot create results directory"), std::string::npos)
      << finished.err;
}

TEST_F(LocalRun, ResultsOfAnotherJobAreRefusedAndKept) {
  JobOptions options;
  options.stages = "1";
  options.microBatch = "[3]";
  ASSERT_EQ(run(runArguments(writeJob(options), results())).exitCode, 0);
  const std::string before = readText(results() / "results.json");

  options.stages = "[1, 2]";
  const Finished finished = run(runArguments(writeJob(options), results()));
  EXPECT_EQ(finished.exitCode, 2);
  EXPECT_NE(finished.err.find("different spec"), std::string::npos) << finished.err;
  EXPECT_EQ(readText(results() / "results.json"), before);
}

}  // namespace
}  // namespace autotune::executor
