// The operator's metrics as a scrape sees them: names, help, types, values, bounded series, the
// process metrics, and promtool's opinion of the whole exposition.

#include "observability/metrics.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "api/job.h"

namespace autotune::observability {
namespace {

using std::chrono::seconds;

// The value of one series, written as prometheus-cpp does: labels in alphabetical order, then a
// histogram bucket's `le`.
std::optional<double> sample(const std::string& exposition, const std::string& series) {
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(series + " ", 0) == 0) {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nullopt;
}

bool mentions(const std::string& exposition, const std::string& text) {
  return exposition.find(text) != std::string::npos;
}

// A Running job with a best throughput, as the cache would hold it.
JobFigures runningJob(const std::string& name) {
  return {"ml",
          name,
          "Running",
          {{"launched", 4}, {"queued", 1}, {"succeeded", 3}},
          JobFigures::Best{"throughput", 812.5, "NVIDIA-H100-80GB-HBM3"}};
}

// One of each thing that can happen, so that every family has a series.
void recordOneOfEach(Metrics& metrics) {
  metrics.jobsInPhase("Running", 1);
  metrics.trialLaunched("ml", "gpt2");
  metrics.trialPending(seconds(3));
  metrics.firstTrialLaunched(seconds(12));
  metrics.clientThrottled(std::chrono::milliseconds(250));
  metrics.trialFinished("ml", "gpt2", "Succeeded", seconds(420), 1);
  metrics.trialRelaunched("ml", "gpt2", "lost");
  metrics.readJobsFrom([] { return std::vector<JobFigures>{runningJob("gpt2")}; });
  metrics.gpuSlots(8, 16);
  metrics.reconciled(ReconcileOutcome::kSuccess, std::chrono::milliseconds(12));
  metrics.workqueueDepth(2);
  metrics.kubeRequest("GET", 200);
  metrics.watchRestarted("pods", "Gone");
  metrics.leading(true);
}

TEST(Metrics, EveryMetricHasHelpAndTypeLines) {
  Metrics metrics;
  recordOneOfEach(metrics);
  const std::string exposition = "\n" + metrics.exposition();
  const std::vector<std::pair<std::string, std::string>> families = {
      {"autotune_jobs", "gauge"},
      {"autotune_trials_launched_total", "counter"},
      {"autotune_trials_finished_total", "counter"},
      {"autotune_trials_relaunched_total", "counter"},
      {"autotune_trial_duration_seconds", "histogram"},
      {"autotune_trial_pending_seconds", "histogram"},
      {"autotune_best_value", "gauge"},
      {"autotune_job_phase", "gauge"},
      {"autotune_job_trials", "gauge"},
      {"autotune_gpu_slots", "gauge"},
      {"autotune_reconcile_total", "counter"},
      {"autotune_reconcile_duration_seconds", "histogram"},
      {"autotune_workqueue_depth", "gauge"},
      {"autotune_kube_requests_total", "counter"},
      {"autotune_kube_client_throttled_seconds_total", "counter"},
      {"autotune_job_first_launch_seconds", "histogram"},
      {"autotune_watch_restarts_total", "counter"},
      {"autotune_leader", "gauge"},
      {"process_resident_memory_bytes", "gauge"},
      {"process_virtual_memory_bytes", "gauge"},
      {"process_cpu_seconds_total", "counter"},
      {"process_open_fds", "gauge"},
      {"process_max_fds", "gauge"},
      {"process_start_time_seconds", "gauge"},
  };
  for (const auto& [name, type] : families) {
    EXPECT_TRUE(mentions(exposition, "\n# HELP " + name + " ")) << name;
    EXPECT_TRUE(mentions(exposition, "\n# TYPE " + name + " " + type + "\n")) << name;
  }
}

TEST(Metrics, SeriesOfFixedLabelSetsAreZeroBeforeAnythingHappens) {
  const Metrics metrics;
  const std::string exposition = metrics.exposition();
  for (const auto phase : kJobPhases) {
    EXPECT_EQ(sample(exposition, "autotune_jobs{phase=\"" + std::string(phase) + "\"}"), 0)
        << phase;
  }
  for (const auto* result : {"success", "error", "requeue"}) {
    EXPECT_EQ(
        sample(exposition, "autotune_reconcile_total{result=\"" + std::string(result) + "\"}"), 0);
  }
  EXPECT_EQ(sample(exposition, R"(autotune_gpu_slots{state="used"})"), 0);
  EXPECT_EQ(sample(exposition, R"(autotune_gpu_slots{state="total"})"), 0);
  EXPECT_EQ(sample(exposition, "autotune_leader"), 0);
  EXPECT_EQ(sample(exposition, "autotune_workqueue_depth"), 0);
  EXPECT_EQ(sample(exposition, "autotune_reconcile_duration_seconds_count"), 0);
  EXPECT_EQ(sample(exposition, "autotune_trial_pending_seconds_count"), 0);
  EXPECT_EQ(sample(exposition, "autotune_job_first_launch_seconds_count"), 0);
  EXPECT_EQ(sample(exposition, "autotune_kube_client_throttled_seconds_total"), 0);
}

TEST(Metrics, ClientThrottlingAddsUpTheWaits) {
  Metrics metrics;
  metrics.clientThrottled(std::chrono::milliseconds(250));
  metrics.clientThrottled(std::chrono::milliseconds(500));
  EXPECT_EQ(sample(metrics.exposition(), "autotune_kube_client_throttled_seconds_total"), 0.75);
}

TEST(Metrics, JobPhasesAreSpelledAsInTheApi) {
  const std::vector<api::Phase> phases = {api::Phase::kPending, api::Phase::kProfiling,
                                          api::Phase::kRunning, api::Phase::kSucceeded,
                                          api::Phase::kFailed};
  ASSERT_EQ(phases.size(), kJobPhases.size());
  for (std::size_t i = 0; i < phases.size(); ++i) {
    EXPECT_EQ(api::toString(phases[i]), kJobPhases.at(i));
  }
}

TEST(Metrics, ADeclaredWatchShowsZeroRestartsUntilOneHappens) {
  Metrics metrics;
  metrics.watchDeclared("pods", "gone");
  EXPECT_EQ(sample(metrics.exposition(),
                   R"(autotune_watch_restarts_total{reason="gone",resource="pods"})"),
            0);
  metrics.watchRestarted("pods", "gone");
  EXPECT_EQ(sample(metrics.exposition(),
                   R"(autotune_watch_restarts_total{reason="gone",resource="pods"})"),
            1);
}

TEST(Metrics, CountersGaugesAndHistogramsMoveWithWhatHappens) {
  Metrics metrics;
  metrics.trialLaunched("ml", "gpt2");
  metrics.trialLaunched("ml", "gpt2");
  metrics.trialFinished("ml", "gpt2", "OOM", seconds(15), 1);
  metrics.trialFinished("ml", "gpt2", "Succeeded", seconds(600), 1);
  metrics.trialFinished("ml", "gpt2", "Succeeded", seconds(700), 1);
  metrics.reconciled(ReconcileOutcome::kError, std::chrono::milliseconds(30));
  metrics.reconciled(ReconcileOutcome::kRequeue, std::chrono::milliseconds(3));
  metrics.kubeRequest("GET", 200);
  metrics.kubeRequest("GET", 200);
  metrics.kubeRequest("WATCH", 0);
  metrics.watchRestarted("autotunejobs", "Gone");
  metrics.jobsInPhase("Running", 3);
  metrics.jobsInPhase("NoSuchPhase", 9);
  metrics.gpuSlots(4, 16);
  metrics.workqueueDepth(7);
  metrics.leading(true);

  const std::string text = metrics.exposition();
  EXPECT_EQ(sample(text, R"(autotune_trials_launched_total{autotunejob="gpt2",namespace="ml"})"),
            2);
  EXPECT_EQ(
      sample(text,
             R"(autotune_trials_finished_total{autotunejob="gpt2",namespace="ml",outcome="OOM"})"),
      1);
  EXPECT_EQ(
      sample(
          text,
          R"(autotune_trials_finished_total{autotunejob="gpt2",namespace="ml",outcome="Succeeded"})"),
      2);
  EXPECT_EQ(sample(text, R"(autotune_trial_duration_seconds_count{outcome="Succeeded"})"), 2);
  EXPECT_EQ(sample(text, R"(autotune_trial_duration_seconds_sum{outcome="Succeeded"})"), 1300);
  EXPECT_EQ(sample(text, R"(autotune_trial_duration_seconds_bucket{outcome="OOM",le="30"})"), 1);
  EXPECT_EQ(sample(text, R"(autotune_reconcile_total{result="error"})"), 1);
  EXPECT_EQ(sample(text, R"(autotune_reconcile_total{result="requeue"})"), 1);
  EXPECT_EQ(sample(text, R"(autotune_reconcile_total{result="success"})"), 0);
  EXPECT_EQ(sample(text, "autotune_reconcile_duration_seconds_count"), 2);
  EXPECT_EQ(sample(text, R"(autotune_kube_requests_total{code="200",verb="GET"})"), 2);
  EXPECT_EQ(sample(text, R"(autotune_kube_requests_total{code="0",verb="WATCH"})"), 1);
  EXPECT_EQ(sample(text, R"(autotune_watch_restarts_total{reason="Gone",resource="autotunejobs"})"),
            1);
  EXPECT_EQ(sample(text, R"(autotune_jobs{phase="Running"})"), 3);
  EXPECT_FALSE(mentions(text, "NoSuchPhase"));
  EXPECT_EQ(sample(text, R"(autotune_gpu_slots{state="used"})"), 4);
  EXPECT_EQ(sample(text, R"(autotune_gpu_slots{state="total"})"), 16);
  EXPECT_EQ(sample(text, "autotune_workqueue_depth"), 7);
  EXPECT_EQ(sample(text, "autotune_leader"), 1);

  metrics.leading(false);
  EXPECT_EQ(sample(metrics.exposition(), "autotune_leader"), 0);
}

TEST(Metrics, ForgettingAJobRemovesItsCountersAndNoOther) {
  Metrics metrics;
  for (const auto* job : {"gpt2", "bert"}) {
    metrics.trialLaunched("ml", job);
    metrics.trialFinished("ml", job, "Failed", seconds(30), 1);
    metrics.trialRelaunched("ml", job, "not_measured");
  }
  metrics.forgetJob("ml", "gpt2");
  metrics.forgetJob("ml", "never-seen");

  const std::string text = metrics.exposition();
  EXPECT_FALSE(mentions(text, R"(autotunejob="gpt2")"));
  EXPECT_EQ(sample(text, R"(autotune_trials_launched_total{autotunejob="bert",namespace="ml"})"),
            1);
  EXPECT_EQ(sample(text, R"(autotune_trials_relaunched_total{autotunejob="bert",namespace="ml",)"
                         R"(reason="not_measured"})"),
            1);
  // Per-outcome durations are not per job, and stay.
  EXPECT_EQ(sample(text, R"(autotune_trial_duration_seconds_count{outcome="Failed"})"), 2);

  // A job's relaunch series exist at 0 from its first launch.
  EXPECT_EQ(sample(text, R"(autotune_trials_relaunched_total{autotunejob="bert",namespace="ml",)"
                         R"(reason="lost"})"),
            0);

  // A job created again under the same name starts from zero.
  metrics.trialLaunched("ml", "gpt2");
  EXPECT_EQ(sample(metrics.exposition(),
                   R"(autotune_trials_launched_total{autotunejob="gpt2",namespace="ml"})"),
            1);
}

// The per-job gauges are the cache's jobs at each scrape: a restarted operator shows every job
// again as soon as its cache is filled, and a deleted job's gauges go with it.
TEST(Metrics, PerJobGaugesAreReadFromTheJobsAtEachScrape) {
  Metrics metrics;
  std::vector<JobFigures> jobs = {runningJob("gpt2"), {"ml", "bert", "Pending", {}, std::nullopt}};
  jobs.push_back(runningJob("t5"));
  jobs.back().best->gpuModel.clear();  // ran where the operator did not know the model
  metrics.readJobsFrom([&jobs] { return jobs; });

  std::string text = metrics.exposition();
  EXPECT_EQ(
      sample(text, R"(autotune_job_phase{autotunejob="gpt2",namespace="ml",phase="Running"})"), 1);
  EXPECT_EQ(
      sample(text, R"(autotune_job_phase{autotunejob="bert",namespace="ml",phase="Pending"})"), 1);
  EXPECT_EQ(
      sample(text, R"(autotune_job_trials{autotunejob="gpt2",namespace="ml",state="queued"})"), 1);
  EXPECT_EQ(
      sample(text, R"(autotune_best_value{autotunejob="gpt2",gpu_model="NVIDIA-H100-80GB-HBM3",)"
                   R"(metric="throughput",namespace="ml"})"),
      812.5);
  EXPECT_EQ(
      sample(text, R"(autotune_best_value{autotunejob="t5",metric="throughput",namespace="ml"})"),
      812.5);
  EXPECT_FALSE(mentions(text, R"(autotune_best_value{autotunejob="bert")"));

  jobs[0].phase = "Succeeded";
  jobs.resize(1);
  text = metrics.exposition();
  EXPECT_EQ(
      sample(text, R"(autotune_job_phase{autotunejob="gpt2",namespace="ml",phase="Succeeded"})"),
      1);
  EXPECT_FALSE(
      sample(text, R"(autotune_job_phase{autotunejob="gpt2",namespace="ml",phase="Running"})"));
  EXPECT_FALSE(mentions(text, R"(autotunejob="bert")"));
}

// A job's name or namespace is user input: whatever it holds, the exposition stays parseable.
TEST(Metrics, JobNamesAreEscapedInTheExposition) {
  Metrics metrics;
  metrics.readJobsFrom([] {
    return std::vector<JobFigures>{{"ml", "a\"b\\c\nd", "Running", {}, std::nullopt}};
  });
  EXPECT_TRUE(mentions(metrics.exposition(), R"(autotunejob="a\"b\\c\nd")"));
}

TEST(Metrics, ProcessMetricsDescribeThisProcess) {
  const Metrics metrics;
  const std::string text = metrics.exposition();
  const auto resident = sample(text, "process_resident_memory_bytes");
  const auto virtualBytes = sample(text, "process_virtual_memory_bytes");
  const auto cpu = sample(text, "process_cpu_seconds_total");
  const auto open = sample(text, "process_open_fds");
  const auto max = sample(text, "process_max_fds");
  const auto start = sample(text, "process_start_time_seconds");
  ASSERT_TRUE(resident && virtualBytes && cpu && open && max && start) << text;
  EXPECT_GT(*resident, 1024 * 1024);
  EXPECT_GE(*virtualBytes, *resident);
  EXPECT_GE(*cpu, 0);
  EXPECT_GE(*open, 3);  // stdin, stdout, stderr
  EXPECT_GE(*max, *open);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LE(*start, now + 1);
  EXPECT_GT(*start, now - 3600);  // this test binary started within the hour
}

// promtool lints names, help, types and suffixes as Prometheus' own tooling expects them.
TEST(Metrics, TheExpositionPassesPromtool) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (scripts/install-deps installs it)";
  }
  Metrics metrics;
  recordOneOfEach(metrics);
  const auto report =
      std::filesystem::temp_directory_path() / ("promtool-" + std::to_string(::getpid()) + ".txt");
  const std::string command = "promtool check metrics >" + report.string() + " 2>&1";
  FILE* promtool = ::popen(command.c_str(), "w");
  ASSERT_NE(promtool, nullptr);
  const std::string exposition = metrics.exposition();
  std::fwrite(exposition.data(), 1, exposition.size(), promtool);
  const int status = ::pclose(promtool);
  std::ifstream file(report);
  const std::string output((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
  std::filesystem::remove(report);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output << "\n" << exposition;
  EXPECT_EQ(output, "");
}

}  // namespace
}  // namespace autotune::observability
