#pragma once
// The operator's Prometheus metrics, named `autotune_*` (docs/operator.md "Metrics"), plus the
// standard `process_*` metrics read from /proc/self at scrape time. Each method is named for what
// happened; the caller never sees a metric object. Safe to call from any thread.
//
// Label values stay bounded: per-job counters live until forgetJob(), per-job gauges as long as
// the job is in the cache; no series is per trial. Phases, slot states and reconcile results are
// fixed sets.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace autotune::observability {

// The phases of an AutotuneJob as the API spells them; `jobs{phase}` has each, zero when empty.
inline constexpr std::array<std::string_view, 5> kJobPhases = {"Pending", "Profiling", "Running",
                                                               "Succeeded", "Failed"};

// The label naming an AutotuneJob on per-job series (with `namespace`). Not `job`: that is
// Prometheus' own target label, which a scrape would rename to exported_job unless it honours
// the target's labels.
inline constexpr std::string_view kJobLabel = "autotunejob";

// How a reconcile ended: `reconcile_total{result="success|error|requeue|exception"}`; an
// exception is a reconcile that threw, caught by the manager and retried like an error.
enum class ReconcileOutcome { kSuccess, kError, kRequeue, kException };

using Seconds = std::chrono::duration<double>;

// One AutotuneJob as its status says, for the series read at each scrape (as kube-state-metrics
// reads objects): they are whatever the cache holds, so a restart or a new leader loses none.
struct JobFigures {
  std::string ns;
  std::string name;
  std::string phase;
  std::vector<std::pair<std::string, std::int64_t>> trials;  // by state, as status.trials
  struct Best {
    std::string metric;
    double value = 0;
    std::string gpuModel;  // the GPU model its trial ran on, where known
  };
  std::optional<Best> best;
};
using JobFiguresSource = std::function<std::vector<JobFigures>()>;

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;
  Metrics(Metrics&&) = delete;
  Metrics& operator=(Metrics&&) = delete;

  // How many jobs are in `phase` now. A phase outside kJobPhases is ignored.
  void jobsInPhase(std::string_view phase, std::int64_t count);

  void trialLaunched(const std::string& ns, const std::string& job);
  // How long a trial waited to start running, from when it was first wanted.
  void trialPending(Seconds waited);
  // How long a job waited from its creation to its first trial's launch.
  void firstTrialLaunched(Seconds sinceCreation);
  // `outcome` is the classifier's word for it (Succeeded, Failed, OOM, Timeout, ...): a small set.
  // It held `gpus` GPUs while it ran.
  void trialFinished(const std::string& ns, const std::string& job, const std::string& outcome,
                     Seconds ran, int gpus);
  // A trial's result taken from a measurement kept before, which ran that long on `gpus` GPUs.
  void trialReused(const std::string& ns, const std::string& job, const std::string& outcome,
                   Seconds measured, int gpus);
  // A trial launched again: `reason` is lost (evicted, its node gone, its Pod deleted) or
  // not_measured (never started, or its Pod vanished unseen).
  void trialRelaunched(const std::string& ns, const std::string& job, const std::string& reason);
  // Removes the job's counters (the job was deleted).
  void forgetJob(const std::string& ns, const std::string& job);
  // Where each scrape reads the jobs for autotune_job_phase, autotune_job_trials and
  // autotune_best_value. Call before serving; `source` runs on the scraping thread.
  void readJobsFrom(JobFiguresSource source);

  void gpuSlots(std::int64_t used, std::int64_t total);
  void reconciled(ReconcileOutcome result, Seconds took);
  void workqueueDepth(std::size_t depth);
  // One HTTP attempt against the API server; code 0 when no answer came (k8s::RequestPolicy).
  void kubeRequest(std::string_view verb, int code);
  // A request waited for the client's own rate limit (--qps, --burst).
  void clientThrottled(Seconds waited);
  // Events the event sender dropped past its bound.
  void eventsDropped(std::size_t count);
  void watchRestarted(std::string_view resource, std::string_view reason);
  // A watch and a reason it may restart for, shown at 0 until it does.
  void watchDeclared(std::string_view resource, std::string_view reason);
  void leading(bool leader);

  // The text exposition format, as served on /metrics.
  std::string exposition() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string_view toString(ReconcileOutcome result);

}  // namespace autotune::observability
