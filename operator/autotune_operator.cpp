// autotune-operator: watches AutotuneJobs, their trial Pods and the GPU Nodes, and reconciles each
// job (controller/reconciler.h). Wiring only: flags, the API client, the manager, metrics, probes
// and logs.

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "api/units.h"
#include "command_line.h"
#include "controller/cluster.h"
#include "controller/event_sender.h"
#include "controller/measurement_key.h"
#include "controller/reconciler.h"
#include "controller/trial_pod.h"
#include "k8s/access_review.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/resources.h"
#include "observability/endpoints.h"
#include "observability/health.h"
#include "observability/log.h"
#include "observability/metrics.h"
#include "observability/serving_certificate.h"
#include "runtime/clock.h"
#include "runtime/manager.h"
#include "runtime/rate_limiter.h"

namespace {

using namespace autotune;
using nlohmann::json;

using cli::kExitUsage;
constexpr int kExitFailure = 1;
// Trials launched together change their Pods together: a job's Pod changes within this period are
// reconciled once, so they cost one status write rather than one each.
constexpr auto kPodBatch = std::chrono::milliseconds(500);

constexpr std::string_view kUsage =
    "usage: autotune-operator [flags]\n"
    "\n"
    "Watches AutotuneJobs, their trial Pods and the GPU Nodes, and runs each job's search.\n"
    "\n"
    "Flags:\n";

struct Options {
  std::string kubeconfig;
  std::vector<std::string> namespaces;
  std::string metricsAddress = ":8080";
  bool metricsSecure = true;
  std::string metricsCertDir;
  std::string probeAddress = ":8081";
  bool leaderElect = false;
  bool kueue = false;
  std::string workloadSelector{controller::kJobLabel};
  std::string nodeSelector{controller::kGpuPresentSelector};
  std::string leaseNamespace;
  std::string leaseName = "autotune-operator";
  std::string measurementKeySecret = "autotune-operator-measurement-key";
  controller::MeasurementLimits measurementLimits;
  int workers = 2;
  double qps = 20;
  int burst = 30;
  std::string logLevel = "info";
};

std::string environment(const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up, before any thread
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) {
      parts.push_back(part);
    }
  }
  return parts;
}

// A flag's setter that stores the value as given.
cli::Flag text(std::string name, std::string valueName, std::string help, std::string& target) {
  return {std::move(name), 0, std::move(valueName), std::move(help),
          [&target](const std::string& value) {
            target = value;
            return std::optional<std::string>();
          }};
}

cli::Flag toggle(std::string name, std::string help, bool& target) {
  return {std::move(name), 0, "", std::move(help), [&target](const std::string& value) {
            target = value == "true";
            return std::optional<std::string>();
          }};
}

template <typename Number>
cli::Flag positive(std::string name, std::string valueName, std::string help, Number& target) {
  return {std::move(name), 0, std::move(valueName), std::move(help),
          [&target](const std::string& value) -> std::optional<std::string> {
            // Read signed, so that "-1" is refused rather than wrapped round into an unsigned.
            using Read = std::conditional_t<std::is_floating_point_v<Number>, double, long long>;
            std::istringstream parse(value);
            Read number{};
            if (!(parse >> number) || !parse.eof() || number <= 0) {
              return "\"" + value + "\" is not a positive number";
            }
            target = static_cast<Number>(number);
            return std::nullopt;
          }};
}

std::vector<cli::Flag> operatorFlags(Options& options) {
  auto& limits = options.measurementLimits;
  return {text("kubeconfig", "FILE",
               "default: $KUBECONFIG (its files merged), else the in-cluster service account",
               options.kubeconfig),
          {"namespace", 0, "NS[,NS...]", "namespaces to watch (repeatable); default: all",
           [&options](const std::string& value) {
             for (auto& ns : splitList(value)) {
               options.namespaces.push_back(std::move(ns));
             }
             return std::optional<std::string>();
           }},
          text("metrics-bind-address", "ADDR", "default :8080 (0 turns metrics off)",
               options.metricsAddress),
          toggle("metrics-secure",
                 "/metrics over HTTPS, for bearer tokens whose user may get the non-resource "
                 "URL /metrics (TokenReview and SubjectAccessReview); default true, false: "
                 "plain HTTP",
                 options.metricsSecure),
          text("metrics-cert-dir", "DIR",
               "tls.key and tls.crt to serve; default: a self-signed certificate made at start",
               options.metricsCertDir),
          text("health-probe-bind-address", "ADDR", "default :8081", options.probeAddress),
          toggle("leader-elect", "run one active replica, elected on a Lease", options.leaderElect),
          toggle("kueue",
                 "watch Kueue's Workloads and LocalQueues (Kueue must be installed): a queued "
                 "job's trials say why Kueue holds them, and a missing LocalQueue is a condition",
                 options.kueue),
          text("kueue-workload-selector", "SELECTOR",
               "the Workloads watched, by label; default autotune.io/job (Kueue copies it "
               "from the trials when its configuration has integrations.labelKeysToCopy: "
               "[autotune.io/job]); empty: every Workload",
               options.workloadSelector),
          text("node-selector", "SELECTOR",
               "the Nodes watched for GPUs, by label; default nvidia.com/gpu.present=true "
               "(GPU feature discovery's); empty: every Node",
               options.nodeSelector),
          text("leader-election-namespace", "NS", "default: $POD_NAMESPACE, else default",
               options.leaseNamespace),
          text("leader-election-id", "NAME", "the Lease's name; default autotune-operator",
               options.leaseName),
          text("measurement-key-secret", "NAME",
               "the Secret, in the leader election namespace, that holds the key sealing "
               "kept measurements (made when missing); default "
               "autotune-operator-measurement-key",
               options.measurementKeySecret),
          {"measurement-max-age", 0, "DURATION",
           "kept measurements older than this are measured again; default 720h",
           [&limits](const std::string& value) -> std::optional<std::string> {
             const auto age = api::Duration::parse(value);
             if (!age || age->seconds() < 1) {
               return "\"" + value + "\" is not a duration such as 720h";
             }
             limits.maxAge = std::chrono::seconds(static_cast<std::int64_t>(age->seconds()));
             return std::nullopt;
           }},
          positive("measurements-per-namespace", "N",
                   "kept measurements past this, the oldest, are deleted; default 1000",
                   limits.perNamespace),
          positive("workers", "N", "concurrent reconciles; default 2", options.workers),
          positive("qps", "Q", "client-side API rate limit, requests a second; default 20",
                   options.qps),
          positive("burst", "B", "client-side API rate limit, burst; default 30", options.burst),
          text("log-level", "LEVEL", "debug, info, warn or error; default info", options.logLevel)};
}

// Flags as `--name value` or `--name=value`; every mistake is named. --help and --version print
// and exit at once.
std::optional<Options> parseFlags(const std::vector<std::string>& args, std::ostream& err) {
  Options options;
  options.leaseNamespace = environment("POD_NAMESPACE");
  const std::vector<cli::Flag> flags = operatorFlags(options);
  const auto line = cli::parseCommandLine(args, flags);
  if (line && (line->help || line->version)) {
    std::cout << (line->help ? std::string(kUsage) + cli::describeFlags(flags)
                             : cli::versionLine("autotune-operator"));
    std::exit(0);  // NOLINT(concurrency-mt-unsafe): before any thread starts
  }
  if (!line || !line->arguments.empty()) {
    err << (line ? "unexpected argument \"" + line->arguments.front() + "\"" : line.error())
        << "\nSee 'autotune-operator --help'.\n";
    return std::nullopt;
  }
  if (options.leaseNamespace.empty()) {
    options.leaseNamespace = "default";
  }
  return options;
}

// --kubeconfig, else $KUBECONFIG's files merged as kubectl merges them, else the Pod's own
// service account.
k8s::Result<k8s::ClusterConfig> clusterConfig(const Options& options) {
  auto config = !options.kubeconfig.empty() ? k8s::loadKubeconfig(options.kubeconfig)
                : !environment("KUBECONFIG").empty()
                    ? k8s::loadKubeconfigs(k8s::defaultKubeconfigFiles())
                    : k8s::inClusterConfig();
  if (config) {
    config->userAgent = "autotune-operator/" AUTOTUNE_VERSION;
  }
  return config;
}

// The lease's own client: each request bounded well under the renew deadline (10 s), never
// retried (the next renewal, 2 s later, is the retry), and outside the reconciles' rate limit.
k8s::Client leaseClient(k8s::ClusterConfig config, observability::Metrics& metrics) {
  config.requestTimeout = std::chrono::seconds(4);
  k8s::RequestPolicy policy;
  policy.maxRetries = 0;
  policy.observe = [&metrics](std::string_view verb, int code) { metrics.kubeRequest(verb, code); };
  return k8s::Client(k8s::makeHttpTransport(config), policy);
}

// The event sender's own client: outside the reconciles' rate limit, since the sender keeps a
// budget of its own (controller::EventPacing).
k8s::Client eventClient(const k8s::ClusterConfig& config, observability::Metrics& metrics) {
  k8s::RequestPolicy policy;
  policy.observe = [&metrics](std::string_view verb, int code) { metrics.kubeRequest(verb, code); };
  return k8s::Client(k8s::makeHttpTransport(config), policy);
}

controller::EventSenderHooks eventSenderHooks(observability::Metrics& metrics,
                                              const observability::Logger& log,
                                              const controller::Cluster& cluster) {
  controller::EventSenderHooks hooks;
  // An Event about a job deleted meanwhile would be refused with its namespace, or read by no one.
  hooks.exists = [&cluster](const json& involved) {
    const auto job =
        cluster.job(k8s::text(involved, "namespace") + "/" + k8s::text(involved, "name"));
    return job && k8s::text(job->metadata, "uid") == k8s::text(involved, "uid");
  };
  hooks.failed = [log](const std::string& reason, const k8s::Error& error) {
    log.warn("could not record an Event", {{"reason", reason}, {"error", k8s::describe(error)}});
  };
  hooks.dropped = [&metrics](std::size_t count) { metrics.eventsDropped(count); };
  return hooks;
}

// How /metrics is served: plain, or over HTTPS to whom the API server says may get it.
tl::expected<observability::MetricsServing, std::string> metricsServing(
    const Options& options, k8s::AccessReviewer& reviewer) {
  observability::MetricsServing serving;
  serving.address = options.metricsAddress;
  if (!options.metricsSecure) {
    return serving;
  }
  auto certificate = observability::servingCertificate(options.metricsCertDir);
  if (!certificate) {
    return tl::unexpected(certificate.error());
  }
  serving.certificate = std::move(*certificate);
  serving.authorize = [&reviewer](std::string_view token) {
    if (token.empty()) {
      return observability::Access::kUnauthenticated;
    }
    const auto verdict = reviewer.review(token);
    if (!verdict) {
      return observability::Access::kUnknown;
    }
    switch (*verdict) {
      case k8s::Verdict::kAllowed:
        return observability::Access::kAllowed;
      case k8s::Verdict::kForbidden:
        return observability::Access::kForbidden;
      case k8s::Verdict::kUnauthenticated:
        break;
    }
    return observability::Access::kUnauthenticated;
  };
  return serving;
}

// Unique per replica: the Pod's name where there is one, and a random suffix.
std::string identity() {
  std::string host = environment("POD_NAME");
  if (host.empty()) {
    std::array<char, 256> name{};
    gethostname(name.data(), name.size() - 1);
    host = name.data();
  }
  return host + "_" + std::to_string(std::random_device()() % 1000000);
}

std::string outcomeLabel(api::Outcome outcome) { return std::string(api::toString(outcome)); }

std::string relaunchLabel(controller::Relaunch why) {
  switch (why) {
    case controller::Relaunch::kLost:
      return "lost";
    case controller::Relaunch::kPreempted:
      return "preempted";
    case controller::Relaunch::kNotMeasured:
      break;
  }
  return "not_measured";
}

std::string nextReconcileID() {
  static std::atomic<std::uint64_t> counter = 0;
  return std::to_string(++counter);
}

// Gauges over the whole cluster view: jobs by phase and GPU slots.
void publishClusterGauges(const controller::Cluster& cluster, observability::Metrics& metrics) {
  const auto phases = cluster.jobsByPhase();
  for (const auto phase : observability::kJobPhases) {
    const auto found = phases.find(phase);
    metrics.jobsInPhase(phase, found == phases.end() ? 0 : found->second);
  }
  const auto capacity = cluster.capacity();
  metrics.gpuSlots(capacity.used(), capacity.total());
}

// A job's per-job gauges, from its status as the cache holds it.
observability::JobFigures figuresOf(const controller::CachedAutotuneJob& job) {
  const api::Status& status = job.status;
  const std::string_view key = job.key;
  const auto slash = key.find('/');
  observability::JobFigures figures;
  figures.ns = std::string(key.substr(0, slash));
  figures.name = std::string(key.substr(slash + 1));
  figures.phase = std::string(api::toString(status.phase));
  const api::TrialCounts& trials = status.trials;
  figures.trials = {{"launched", trials.launched},
                    {"pending", trials.pending},
                    {"queued", trials.queued},
                    {"running", trials.running},
                    {"succeeded", trials.succeeded},
                    {"failed", trials.failed},
                    {"oom", trials.oom},
                    {"timedOut", trials.timedOut},
                    {"pruned", trials.pruned},
                    {"awaitingAdmission", trials.awaitingAdmission}};
  if (status.best) {
    figures.best = {std::string(api::toString(status.best->metric)), status.best->value};
  }
  return figures;
}

// Kueue's Workloads of trials (those `workloadSelector` selects; Kueue copies the label from the
// trial when told to) and the LocalQueues of a namespace, or of all.
void watchKueue(runtime::Manager& manager, const std::string& ns,
                const std::string& workloadSelector, controller::Cluster& cluster) {
  manager.watch<controller::Workload>(
      {controller::kWorkloads, ns, workloadSelector, {"managedFields", "podSets"}},
      cluster.addWorkloads(ns),
      [&cluster](const controller::Workload* before, const controller::Workload* after) {
        return cluster.jobsConcernedByWorkload(before, after);
      });
  manager.watch<controller::LocalQueue>(
      {controller::kLocalQueues, ns, ""}, cluster.addLocalQueues(ns),
      [&cluster](const controller::LocalQueue* before, const controller::LocalQueue* after) {
        return cluster.jobsConcernedByLocalQueue(before, after);
      });
}

// One watch of jobs, one of trial Pods and one of multi-node trials' batch Jobs per namespace (or
// for all), and one of the GPU Nodes; each change enqueues the jobs it concerns.
void watchAll(runtime::Manager& manager, const Options& options, controller::Cluster& cluster) {
  const std::vector<std::string> namespaces =
      options.namespaces.empty() ? std::vector<std::string>{""} : options.namespaces;
  for (const auto& ns : namespaces) {
    if (options.kueue) {
      watchKueue(manager, ns, options.workloadSelector, cluster);
    }
    manager.watch<controller::CachedAutotuneJob>({controller::kAutotuneJobs, ns, ""},
                                                 cluster.addAutotuneJobs(ns),
                                                 controller::jobKeysOfAutotuneJob);
    manager.watch<controller::Pod>(
        {k8s::kPods, ns, std::string(controller::kJobLabel)}, cluster.addPods(ns),
        [&cluster](const controller::Pod* before, const controller::Pod* after) {
          return cluster.jobsConcernedByPod(before, after);
        },
        kPodBatch,
        [&cluster](const controller::Pod* before, const controller::Pod* after) {
          return cluster.jobsWokenByPod(before, after);
        });
    manager.watch<controller::BatchJob>({k8s::kBatchJobs, ns, std::string(controller::kJobLabel)},
                                        cluster.addBatchJobs(ns), controller::jobKeysOfBatchJob);
    // Kept measurements are looked up as jobs launch trials: a change concerns no job now.
    manager.watch<controller::MeasurementObject>(
        {k8s::kConfigMaps, ns, std::string(controller::kMeasurementLabel)},
        cluster.addMeasurements(ns),
        [](const controller::MeasurementObject*, const controller::MeasurementObject*) {
          return std::vector<std::string>{};
        });
  }
  // A Node's new GPUs may let waiting jobs go on, and its loss concerns the jobs with Pods on it.
  manager.watch<controller::Node>(
      {k8s::kNodes, "", options.nodeSelector, {"managedFields", "images"}}, cluster.nodes(),
      [&cluster](const controller::Node* before, const controller::Node* after) {
        return cluster.jobsConcernedBy(before, after);
      });
}

// What the reconciler reports becomes metrics.
controller::ReconcilerHooks reconcilerHooks(observability::Metrics& metrics) {
  controller::ReconcilerHooks hooks;
  hooks.trialLaunched = [&metrics](const api::AutotuneJob& job, const std::string& /*trial*/) {
    metrics.trialLaunched(job.namespaceName(), job.name());
  };
  hooks.trialRelaunched = [&metrics](const api::AutotuneJob& job, controller::Relaunch why) {
    metrics.trialRelaunched(job.namespaceName(), job.name(), relaunchLabel(why));
  };
  hooks.trialPending = [&metrics](std::chrono::duration<double> waited) {
    metrics.trialPending(waited);
  };
  hooks.firstTrialLaunched = [&metrics](std::chrono::duration<double> sinceCreation) {
    metrics.firstTrialLaunched(sinceCreation);
  };
  hooks.trialFinished = [&metrics](const api::AutotuneJob& job, const api::TrialRecord& record) {
    metrics.trialFinished(job.namespaceName(), job.name(), outcomeLabel(record.outcome),
                          observability::Seconds(record.durationSeconds),
                          job.spec.resources.gpusPerTrial);
  };
  hooks.trialReused = [&metrics](const api::AutotuneJob& job, const api::TrialRecord& record) {
    metrics.trialReused(job.namespaceName(), job.name(), outcomeLabel(record.outcome),
                        observability::Seconds(record.durationSeconds),
                        job.spec.resources.gpusPerTrial);
  };
  hooks.jobGone = [&metrics](const std::string& ns, const std::string& name) {
    metrics.forgetJob(ns, name);
  };
  return hooks;
}

// What the manager reports becomes metrics and log lines, with the cluster gauges refreshed
// after every reconcile.
runtime::ManagerHooks managerHooks(observability::Metrics& metrics,
                                   const observability::Logger& log,
                                   const runtime::Manager& manager,
                                   const controller::Cluster& cluster) {
  runtime::ManagerHooks managerHooks;
  managerHooks.reconciled = [&metrics, log, &manager, &cluster](
                                const std::string& key, const runtime::ReconcileResult& result,
                                runtime::Duration took) {
    metrics.reconciled(result.exception      ? observability::ReconcileOutcome::kException
                       : result.failed       ? observability::ReconcileOutcome::kError
                       : result.requeueAfter ? observability::ReconcileOutcome::kRequeue
                                             : observability::ReconcileOutcome::kSuccess,
                       std::chrono::duration_cast<observability::Seconds>(took));
    metrics.workqueueDepth(manager.queue().len());
    publishClusterGauges(cluster, metrics);
    if (result.exception) {
      log.error("reconcile threw; retried with backoff",
                {{"job", key}, {"error", *result.exception}});
    } else {
      log.debug("reconciled", {{"job", key}, {"failed", result.failed}});
    }
  };
  managerHooks.watchRestarted = [&metrics, log](const runtime::WatchTarget& target,
                                                runtime::RestartReason reason) {
    metrics.watchRestarted(target.resource.plural, runtime::toString(reason));
    log.info("watch restarted", {{"resource", target.resource.plural},
                                 {"reason", std::string(runtime::toString(reason))}});
  };
  managerHooks.leadership = [&metrics, log](bool leading) {
    metrics.leading(leading);
    log.info(leading ? "leading: reconciling" : "not leading: reconciles stopped");
  };
  return managerHooks;
}

// Every watch's restart series, at 0 until a restart happens, so that dashboards show them.
void declareWatches(observability::Metrics& metrics, bool kueue) {
  std::vector<std::string> plurals = {"autotunejobs", "pods", "jobs", "nodes", "configmaps"};
  if (kueue) {
    plurals.insert(plurals.end(), {controller::kWorkloads.plural, controller::kLocalQueues.plural});
  }
  for (const auto& plural : plurals) {
    for (const auto reason : {runtime::RestartReason::kExpired, runtime::RestartReason::kGone,
                              runtime::RestartReason::kDropped, runtime::RestartReason::kListFailed,
                              runtime::RestartReason::kWatchFailed}) {
      metrics.watchDeclared(plural, runtime::toString(reason));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parseFlags(std::vector<std::string>(argv + 1, argv + argc), std::cerr);
  if (!options) {
    return kExitUsage;
  }
  const auto level = observability::parseLogLevel(options->logLevel);
  if (!level) {
    std::cerr << "--log-level: " << level.error() << "\n";
    return kExitUsage;
  }
  const observability::Logger log(*level);
  auto config = clusterConfig(*options);
  if (!config) {
    std::cerr << "cannot reach the cluster: " << k8s::describe(config.error()) << "\n";
    return kExitUsage;
  }

  // Stop signals go to one thread that asks everything else to stop.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  observability::Metrics metrics;
  const runtime::SystemClock clock;
  runtime::TokenBucket bucket(clock, options->qps, options->burst);
  k8s::RequestPolicy policy;
  policy.throttle = [&bucket, &metrics] {
    if (const auto wait = bucket.reserve(); wait > runtime::Duration::zero()) {
      metrics.clientThrottled(wait);
      std::this_thread::sleep_for(wait);
    }
  };
  policy.observe = [&metrics](std::string_view verb, int code) { metrics.kubeRequest(verb, code); };
  const k8s::Client client(k8s::makeHttpTransport(*config), policy);

  runtime::ManagerOptions managerOptions;
  managerOptions.workers = options->workers;
  if (options->leaderElect) {
    managerOptions.leaderElection =
        runtime::LeaseOptions{options->leaseNamespace, options->leaseName, identity()};
    managerOptions.leaseClient = leaseClient(*config, metrics);
  }
  runtime::Manager manager(client, clock, managerOptions);

  auto seal = controller::loadMeasurementSeal(client, options->leaseNamespace,
                                              options->measurementKeySecret);
  if (!seal) {
    std::cerr << "--measurement-key-secret: cannot read or make Secret " << options->leaseNamespace
              << "/" << options->measurementKeySecret << ": " << k8s::describe(seal.error())
              << "\n";
    return kExitFailure;
  }
  controller::Cluster cluster({std::move(*seal), options->measurementLimits},
                              options->nodeSelector);
  watchAll(manager, *options, cluster);
  const k8s::Client eventsClient = eventClient(*config, metrics);
  controller::EventSender events(eventsClient, clock, {}, eventSenderHooks(metrics, log, cluster));
  auto hooks = reconcilerHooks(metrics);
  hooks.sendEvent = [&events](json event) { events.send(std::move(event)); };
  controller::Reconciler reconciler(client, cluster, std::move(hooks));
  const std::jthread eventThread([&events](const std::stop_token& stop) { events.run(stop); });

  // A reconcile that runs far longer than any should is a wedged worker: restart the process.
  observability::Heartbeat heartbeat(std::chrono::minutes(10));
  manager.setReconciler([&](const std::string& key) {
    const auto beat = heartbeat.beat();
    const controller::Context context{log.with({{"job", key}, {"reconcileID", nextReconcileID()}}),
                                      std::chrono::system_clock::now(), manager.leadership()};
    return reconciler.reconcile(key, context);
  });
  manager.setHooks(managerHooks(metrics, log, manager, cluster));
  declareWatches(metrics, options->kueue);
  metrics.readJobsFrom([&cluster] {
    std::vector<observability::JobFigures> figures;
    for (const auto& job : cluster.jobs()) {
      figures.push_back(figuresOf(*job));
    }
    return figures;
  });
  auto health = std::make_shared<observability::Health>();
  health->addLiveness("reconcile-workers", [&heartbeat] { return heartbeat.healthy(); });
  health->addReadiness("caches-synced", [&manager] { return manager.synced(); });
  std::unique_ptr<observability::MetricsServer> metricsServer;
  k8s::AccessReviewer reviewer(client, "/metrics", "get");
  if (options->metricsAddress != "0") {
    auto serving = metricsServing(*options, reviewer);
    if (!serving) {
      std::cerr << "--metrics-cert-dir: " << serving.error() << "\n";
      return kExitUsage;
    }
    auto started = observability::MetricsServer::start(*serving, metrics);
    if (!started) {
      std::cerr << "--metrics-bind-address: " << started.error() << "\n";
      return kExitUsage;
    }
    metricsServer = std::move(*started);
  }
  auto probes = observability::ProbeServer::start(options->probeAddress, health);
  if (!probes) {
    std::cerr << "--health-probe-bind-address: " << probes.error() << "\n";
    return kExitUsage;
  }
  log.info("starting",
           {{"namespaces", options->namespaces.empty() ? json("all") : json(options->namespaces)},
            {"leaderElect", options->leaderElect},
            {"kueue", options->kueue},
            {"nodeSelector", options->nodeSelector},
            {"metricsPort", metricsServer ? metricsServer->port() : 0},
            {"metricsSecure", options->metricsSecure},
            {"probePort", (*probes)->port()}});

  std::stop_source stop;
  std::thread([&stop, &log, stopSignals] {
    int received = 0;
    sigwait(&stopSignals, &received);
    log.info("stopping", {{"signal", received}});
    stop.request_stop();
  }).detach();
  const runtime::RunEnd end = manager.run(stop.get_token());
  if (end == runtime::RunEnd::kLostLeadership) {
    log.error("lost the leader lease; exiting so that a fresh process campaigns again");
    return kExitFailure;
  }
  log.info("stopped");
  return 0;
}
