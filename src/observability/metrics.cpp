#include "observability/metrics.h"

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

namespace autotune::observability {
namespace {

using prometheus::ClientMetric;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::MetricFamily;
using prometheus::MetricType;

// Trials run from seconds (an OOM at start-up) to hours.
const Histogram::BucketBoundaries kTrialDurationBuckets = {10,  30,   60,   120,  300,
                                                           600, 1200, 1800, 3600, 7200};
// A trial waits for a GPU node from a second (an idle cluster) to an hour.
const Histogram::BucketBoundaries kTrialPendingBuckets = {1,   5,   10,  30,   60,
                                                          120, 300, 600, 1800, 3600};
// A reconcile is a few API requests: milliseconds, seconds when the server is slow.
const Histogram::BucketBoundaries kReconcileBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                       0.5,   1,    2.5,   5,    10};

MetricFamily single(std::string name, std::string help, MetricType type, double value) {
  ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {std::move(name), std::move(help), type, {metric}};
}

// The fields of /proc/self/stat after the command name, which may itself hold spaces and ')'.
std::optional<std::vector<std::string>> statFields() {
  std::ifstream file("/proc/self/stat");
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto nameEnd = text.rfind(')');
  if (nameEnd == std::string::npos) {
    return std::nullopt;
  }
  std::istringstream rest(text.substr(nameEnd + 1));
  std::vector<std::string> fields{std::istream_iterator<std::string>(rest),
                                  std::istream_iterator<std::string>()};
  return fields;
}

std::optional<double> bootTimeSeconds() {
  std::ifstream file("/proc/stat");
  std::string key;
  double value = 0;
  while (file >> key) {
    if (key == "btime" && file >> value) {
      return value;
    }
    file.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

// The process_* metrics every Prometheus client library exports, read when scraped.
std::vector<MetricFamily> processMetrics() {
  std::vector<MetricFamily> families;
  // Indices into statFields(): field N of proc(5) is at N - 3.
  constexpr std::size_t kUserTicks = 11;
  constexpr std::size_t kSystemTicks = 12;
  constexpr std::size_t kStartTicks = 19;
  constexpr std::size_t kVirtualBytes = 20;
  constexpr std::size_t kResidentPages = 21;
  const auto ticksPerSecond = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto pageBytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  const auto stat = statFields();
  if (stat && stat->size() > kResidentPages && ticksPerSecond > 0) {
    const auto number = [&](std::size_t index) {
      const std::string& text = (*stat)[index];
      double value = 0;
      std::from_chars(text.data(), text.data() + text.size(), value);
      return value;
    };
    families.push_back(
        single("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
               MetricType::Counter, (number(kUserTicks) + number(kSystemTicks)) / ticksPerSecond));
    families.push_back(single("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              MetricType::Gauge, number(kVirtualBytes)));
    families.push_back(single("process_resident_memory_bytes", "Resident memory size in bytes.",
                              MetricType::Gauge, number(kResidentPages) * pageBytes));
    if (const auto boot = bootTimeSeconds()) {
      families.push_back(single("process_start_time_seconds",
                                "Start time of the process since unix epoch in seconds.",
                                MetricType::Gauge, *boot + number(kStartTicks) / ticksPerSecond));
    }
  }
  std::error_code error;
  std::size_t open = 0;
  for (std::filesystem::directory_iterator entry("/proc/self/fd", error), end;
       !error && entry != end; entry.increment(error)) {
    ++open;
  }
  if (!error) {
    families.push_back(single("process_open_fds", "Number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(open)));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    families.push_back(single("process_max_fds", "Maximum number of open file descriptors.",
                              MetricType::Gauge, static_cast<double>(limit.rlim_cur)));
  }
  return families;
}

// A label of no value is left out: to Prometheus the two are the same series.
ClientMetric gaugeOf(std::vector<ClientMetric::Label> labels, double value) {
  std::erase_if(labels, [](const ClientMetric::Label& label) { return label.value.empty(); });
  ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

// The per-job gauges of the jobs as the cache holds them now.
std::vector<MetricFamily> jobMetrics(const std::vector<JobFigures>& jobs) {
  const auto gauges = [](std::string name, std::string help) {
    return MetricFamily{std::move(name), std::move(help), MetricType::Gauge, {}};
  };
  MetricFamily phase =
      gauges("autotune_job_phase", "1 for each AutotuneJob, labelled with its phase.");
  MetricFamily trials = gauges(
      "autotune_job_trials", "An AutotuneJob's trials by state, as its status.trials counts them.");
  MetricFamily best = gauges("autotune_best_value",
                             "The best value an AutotuneJob has measured so far, in its metric.");
  for (const JobFigures& job : jobs) {
    const ClientMetric::Label ns{"namespace", job.ns};
    const ClientMetric::Label name{std::string(kJobLabel), job.name};
    phase.metric.push_back(gaugeOf({name, ns, {"phase", job.phase}}, 1));
    for (const auto& [state, count] : job.trials) {
      trials.metric.push_back(gaugeOf({name, ns, {"state", state}}, static_cast<double>(count)));
    }
    if (job.best) {
      const ClientMetric::Label model{"gpu_model", job.best->gpuModel};
      best.metric.push_back(
          gaugeOf({name, model, {"metric", job.best->metric}, ns}, job.best->value));
    }
  }
  return {std::move(phase), std::move(trials), std::move(best)};
}

// What a scrape sees: the registry's families, the jobs' gauges and the process metrics.
class Scraped final : public prometheus::Collectable {
 public:
  explicit Scraped(std::shared_ptr<prometheus::Registry> registry)
      : registry_(std::move(registry)) {}

  void readJobsFrom(JobFiguresSource source) {
    const std::lock_guard lock(mutex_);
    jobs_ = std::move(source);
  }

  std::vector<MetricFamily> Collect() const override {
    auto families = registry_->Collect();
    append(families, jobMetrics(jobs()));
    append(families, processMetrics());
    return families;
  }

 private:
  static void append(std::vector<MetricFamily>& families, std::vector<MetricFamily> more) {
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }

  std::vector<JobFigures> jobs() const {
    JobFiguresSource source;
    {
      const std::lock_guard lock(mutex_);
      source = jobs_;
    }
    return source ? source() : std::vector<JobFigures>{};
  }

  std::shared_ptr<prometheus::Registry> registry_;
  mutable std::mutex mutex_;
  JobFiguresSource jobs_;
};

using Key = std::pair<std::string, std::string>;  // namespace, job

// A job's counter in `family` for one value of one more label, made on first use and kept in
// `byValue` so that forgetJob() can remove it.
Counter& countFor(Family<Counter>& family, std::map<std::string, Counter*>& byValue,
                  const std::string& ns, const std::string& job,
                  const std::pair<std::string, std::string>& label) {
  Counter*& counter = byValue[label.second];
  if (counter == nullptr) {
    counter = &family.Add(
        {{"namespace", ns}, {std::string(kJobLabel), job}, {label.first, label.second}});
  }
  return *counter;
}

// The series labelled with one job, so that forgetJob() can remove them.
struct JobSeries {
  Counter* launched = nullptr;
  std::map<std::string, Counter*> finished;    // by outcome
  std::map<std::string, Counter*> relaunched;  // by reason
  std::map<std::string, Counter*> gpuSeconds;  // by outcome
  std::map<std::string, Counter*> reused;      // by outcome
  std::map<std::string, Counter*> saved;       // by outcome
};

}  // namespace

struct Metrics::State {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<Scraped> scraped = std::make_shared<Scraped>(registry);

  Family<Gauge>& jobs = prometheus::BuildGauge()
                            .Name("autotune_jobs")
                            .Help("AutotuneJobs by phase.")
                            .Register(*registry);
  Family<Counter>& launched = prometheus::BuildCounter()
                                  .Name("autotune_trials_launched_total")
                                  .Help("Trial Pods created, by job.")
                                  .Register(*registry);
  Family<Counter>& finished = prometheus::BuildCounter()
                                  .Name("autotune_trials_finished_total")
                                  .Help("Trials finished, by job and outcome.")
                                  .Register(*registry);
  Family<Counter>& relaunched = prometheus::BuildCounter()
                                    .Name("autotune_trials_relaunched_total")
                                    .Help("Trials launched again, by job and reason.")
                                    .Register(*registry);
  Family<Counter>& gpuSeconds =
      prometheus::BuildCounter()
          .Name("autotune_trial_gpu_seconds_total")
          .Help("GPU-seconds the trials a job ran held their GPUs, by job and outcome.")
          .Register(*registry);
  Family<Counter>& reused =
      prometheus::BuildCounter()
          .Name("autotune_trials_reused_total")
          .Help("Trial results taken from measurements kept before, by job and outcome.")
          .Register(*registry);
  Family<Counter>& saved =
      prometheus::BuildCounter()
          .Name("autotune_reused_gpu_seconds_total")
          .Help("GPU-seconds the reused results took when they were measured, by job and outcome.")
          .Register(*registry);
  Family<Histogram>& duration = prometheus::BuildHistogram()
                                    .Name("autotune_trial_duration_seconds")
                                    .Help("How long finished trials ran, by outcome.")
                                    .Register(*registry);
  Family<Histogram>& pending =
      prometheus::BuildHistogram()
          .Name("autotune_trial_pending_seconds")
          .Help("How long trials waited to start running, from when first wanted.")
          .Register(*registry);
  Family<Histogram>& firstLaunch =
      prometheus::BuildHistogram()
          .Name("autotune_job_first_launch_seconds")
          .Help("How long jobs waited from their creation to their first trial's launch.")
          .Register(*registry);
  Family<Gauge>& gpuSlots =
      prometheus::BuildGauge()
          .Name("autotune_gpu_slots")
          .Help(
              "GPUs on schedulable nodes (total) and held by this operator's trial Pods (used); "
              "what other workloads hold is not counted.")
          .Register(*registry);
  Family<Counter>& reconciles = prometheus::BuildCounter()
                                    .Name("autotune_reconcile_total")
                                    .Help("Reconciles of AutotuneJobs, by result.")
                                    .Register(*registry);
  Family<Histogram>& reconcileDuration = prometheus::BuildHistogram()
                                             .Name("autotune_reconcile_duration_seconds")
                                             .Help("How long reconciles of AutotuneJobs took.")
                                             .Register(*registry);
  Family<Gauge>& depth = prometheus::BuildGauge()
                             .Name("autotune_workqueue_depth")
                             .Help("Keys waiting in the work queue.")
                             .Register(*registry);
  Family<Counter>& kubeRequests =
      prometheus::BuildCounter()
          .Name("autotune_kube_requests_total")
          .Help("HTTP requests to the Kubernetes API server, by verb and status code (0: none).")
          .Register(*registry);
  Family<Counter>& throttled =
      prometheus::BuildCounter()
          .Name("autotune_kube_client_throttled_seconds_total")
          .Help("Time requests waited for the client's own rate limit (--qps, --burst).")
          .Register(*registry);
  Family<Counter>& eventsDropped =
      prometheus::BuildCounter()
          .Name("autotune_events_dropped_total")
          .Help("Events not posted: queued past the event sender's bound, oldest first.")
          .Register(*registry);
  Family<Counter>& watchRestarts = prometheus::BuildCounter()
                                       .Name("autotune_watch_restarts_total")
                                       .Help("Watches started again, by resource and reason.")
                                       .Register(*registry);
  Family<Gauge>& leader = prometheus::BuildGauge()
                              .Name("autotune_leader")
                              .Help("1 while this replica holds the leader lease, else 0.")
                              .Register(*registry);

  // Series whose label values are a fixed set exist from the start, so that dashboards and alerts
  // see zeros rather than gaps.
  std::map<std::string_view, Gauge*> phases;
  std::array<Counter*, 4> results{};
  Gauge& slotsUsed = gpuSlots.Add({{"state", "used"}});
  Gauge& slotsTotal = gpuSlots.Add({{"state", "total"}});
  Histogram& pendingAll = pending.Add({}, kTrialPendingBuckets);
  Histogram& firstLaunchAll = firstLaunch.Add({}, kTrialPendingBuckets);
  Counter& throttledAll = throttled.Add({});
  Counter& eventsDroppedAll = eventsDropped.Add({});
  Histogram& reconcileAll = reconcileDuration.Add({}, kReconcileBuckets);
  Gauge& depthAll = depth.Add({});
  Gauge& leaderAll = leader.Add({});

  std::mutex mutex;  // guards jobSeries and the adding and removing of per-job series
  std::map<Key, JobSeries> jobSeries;

  State() {
    for (const auto phase : kJobPhases) {
      phases[phase] = &jobs.Add({{"phase", std::string(phase)}});
    }
    for (const auto outcome : {ReconcileOutcome::kSuccess, ReconcileOutcome::kError,
                               ReconcileOutcome::kRequeue, ReconcileOutcome::kException}) {
      results.at(static_cast<std::size_t>(outcome)) =
          &reconciles.Add({{"result", std::string(toString(outcome))}});
    }
  }
};

std::string_view toString(ReconcileOutcome result) {
  switch (result) {
    case ReconcileOutcome::kError:
      return "error";
    case ReconcileOutcome::kRequeue:
      return "requeue";
    case ReconcileOutcome::kException:
      return "exception";
    case ReconcileOutcome::kSuccess:
      break;
  }
  return "success";
}

Metrics::Metrics() : state_(std::make_unique<State>()) {}
Metrics::~Metrics() = default;

void Metrics::jobsInPhase(std::string_view phase, std::int64_t count) {
  const auto found = state_->phases.find(phase);
  if (found != state_->phases.end()) {
    found->second->Set(static_cast<double>(count));
  }
}

void Metrics::trialLaunched(const std::string& ns, const std::string& job) {
  const std::lock_guard lock(state_->mutex);
  auto& series = state_->jobSeries[{ns, job}];
  if (series.launched == nullptr) {
    series.launched = &state_->launched.Add({{"namespace", ns}, {std::string(kJobLabel), job}});
    // Relaunches show as 0 from the job's first launch, so that dashboards see zeros, not gaps.
    for (const auto* reason : {"lost", "not_measured", "preempted"}) {
      countFor(state_->relaunched, series.relaunched, ns, job, {"reason", reason});
    }
  }
  series.launched->Increment();
}

void Metrics::trialPending(Seconds waited) { state_->pendingAll.Observe(waited.count()); }

void Metrics::firstTrialLaunched(Seconds sinceCreation) {
  state_->firstLaunchAll.Observe(sinceCreation.count());
}

void Metrics::trialFinished(const std::string& ns, const std::string& job,
                            const std::string& outcome, Seconds ran, int gpus) {
  state_->duration.Add({{"outcome", outcome}}, kTrialDurationBuckets).Observe(ran.count());
  const std::lock_guard lock(state_->mutex);
  auto& series = state_->jobSeries[{ns, job}];
  countFor(state_->finished, series.finished, ns, job, {"outcome", outcome}).Increment();
  countFor(state_->gpuSeconds, series.gpuSeconds, ns, job, {"outcome", outcome})
      .Increment(ran.count() * gpus);
}

void Metrics::trialReused(const std::string& ns, const std::string& job, const std::string& outcome,
                          Seconds measured, int gpus) {
  const std::lock_guard lock(state_->mutex);
  auto& series = state_->jobSeries[{ns, job}];
  countFor(state_->reused, series.reused, ns, job, {"outcome", outcome}).Increment();
  countFor(state_->saved, series.saved, ns, job, {"outcome", outcome})
      .Increment(measured.count() * gpus);
}

void Metrics::trialRelaunched(const std::string& ns, const std::string& job,
                              const std::string& reason) {
  const std::lock_guard lock(state_->mutex);
  countFor(state_->relaunched, state_->jobSeries[{ns, job}].relaunched, ns, job, {"reason", reason})
      .Increment();
}

void Metrics::forgetJob(const std::string& ns, const std::string& job) {
  const std::lock_guard lock(state_->mutex);
  const auto found = state_->jobSeries.find({ns, job});
  if (found == state_->jobSeries.end()) {
    return;
  }
  auto& series = found->second;
  if (series.launched != nullptr) {
    state_->launched.Remove(series.launched);
  }
  for (const auto& [outcome, counter] : series.finished) {
    state_->finished.Remove(counter);
  }
  for (const auto& [reason, counter] : series.relaunched) {
    state_->relaunched.Remove(counter);
  }
  for (const auto& [outcome, counter] : series.gpuSeconds) {
    state_->gpuSeconds.Remove(counter);
  }
  for (const auto& [outcome, counter] : series.reused) {
    state_->reused.Remove(counter);
  }
  for (const auto& [outcome, counter] : series.saved) {
    state_->saved.Remove(counter);
  }
  state_->jobSeries.erase(found);
}

void Metrics::readJobsFrom(JobFiguresSource source) {
  state_->scraped->readJobsFrom(std::move(source));
}

void Metrics::gpuSlots(std::int64_t used, std::int64_t total) {
  state_->slotsUsed.Set(static_cast<double>(used));
  state_->slotsTotal.Set(static_cast<double>(total));
}

void Metrics::reconciled(ReconcileOutcome result, Seconds took) {
  state_->results.at(static_cast<std::size_t>(result))->Increment();
  state_->reconcileAll.Observe(took.count());
}

void Metrics::workqueueDepth(std::size_t depth) {
  state_->depthAll.Set(static_cast<double>(depth));
}

void Metrics::kubeRequest(std::string_view verb, int code) {
  state_->kubeRequests.Add({{"verb", std::string(verb)}, {"code", std::to_string(code)}})
      .Increment();
}

void Metrics::clientThrottled(Seconds waited) { state_->throttledAll.Increment(waited.count()); }

void Metrics::eventsDropped(std::size_t count) {
  state_->eventsDroppedAll.Increment(static_cast<double>(count));
}

void Metrics::watchRestarted(std::string_view resource, std::string_view reason) {
  state_->watchRestarts.Add({{"resource", std::string(resource)}, {"reason", std::string(reason)}})
      .Increment();
}

void Metrics::watchDeclared(std::string_view resource, std::string_view reason) {
  state_->watchRestarts.Add({{"resource", std::string(resource)}, {"reason", std::string(reason)}});
}

void Metrics::leading(bool leader) { state_->leaderAll.Set(leader ? 1 : 0); }

std::string Metrics::exposition() const {
  return prometheus::TextSerializer().Serialize(state_->scraped->Collect());
}

}  // namespace autotune::observability
