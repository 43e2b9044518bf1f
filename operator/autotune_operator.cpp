// autotune-operator: watches AutotuneJobs, their trial Pods and the GPU Nodes, and reconciles each
// job (controller/apply/reconciler.h). Wiring only: flags (operator_options.h), the API clients,
// the manager and its watches, metrics (operator_metrics.h), probes and logs.

#include <pthread.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api/labels.h"
#include "command_line.h"
#include "controller/apply/event_sender.h"
#include "controller/apply/measurement_key.h"
#include "controller/apply/reconciler.h"
#include "controller/cache/cluster.h"
#include "controller/objects/trial_pod.h"
#include "k8s/access_review.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/resources.h"
#include "object/read.h"
#include "observability/endpoints.h"
#include "observability/health.h"
#include "observability/log.h"
#include "observability/metrics.h"
#include "observability/serving_certificate.h"
#include "operator_metrics.h"
#include "operator_options.h"
#include "runtime/clock.h"
#include "runtime/manager.h"
#include "runtime/rate_limiter.h"

namespace {

using namespace autotune;
using nlohmann::json;
using wiring::Options;

using cli::kExitUsage;
constexpr int kExitFailure = 1;
// Trials launched together change their Pods together: a job's Pod changes within this period are
// reconciled once, so they cost one status write rather than one each.
constexpr auto kPodBatch = std::chrono::milliseconds(500);

// The reconciles' client: within --qps and --burst, every request counted.
k8s::Client apiClient(const k8s::ClusterConfig& config, runtime::TokenBucket& bucket,
                      observability::Metrics& metrics) {
  k8s::RequestPolicy policy;
  policy.throttle = [&bucket, &metrics] {
    if (const auto wait = bucket.reserve(); wait > runtime::Duration::zero()) {
      metrics.clientThrottled(wait);
      std::this_thread::sleep_for(wait);
    }
  };
  policy.observe = [&metrics](std::string_view verb, int code) { metrics.kubeRequest(verb, code); };
  return k8s::Client(k8s::makeHttpTransport(config), policy);
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
  std::string host = wiring::environment("POD_NAME");
  if (host.empty()) {
    std::array<char, 256> name{};
    gethostname(name.data(), name.size() - 1);
    host = name.data();
  }
  return host + "_" + std::to_string(std::random_device()() % 1000000);
}

std::string nextReconcileID() {
  static std::atomic<std::uint64_t> counter = 0;
  return std::to_string(++counter);
}

// Kueue's Workloads of trials (those `workloadSelector` selects; Kueue copies the label from the
// trial when told to) and the LocalQueues of a namespace, or of all.
void watchKueue(runtime::Manager& manager, const std::string& ns,
                const std::string& workloadSelector, controller::Cluster& cluster) {
  manager.watch<controller::Workload>(
      {k8s::kWorkloads, ns, workloadSelector, {"managedFields", "podSets"}},
      cluster.addWorkloads(ns),
      [&cluster](const controller::Workload* before, const controller::Workload* after) {
        return cluster.jobsConcernedByWorkload(before, after);
      });
  manager.watch<controller::LocalQueue>(
      {k8s::kLocalQueues, ns, ""}, cluster.addLocalQueues(ns),
      [&cluster](const controller::LocalQueue* before, const controller::LocalQueue* after) {
        return cluster.jobsConcernedByLocalQueue(before, after);
      });
}

// The DRA driver's ResourceSlices and every namespace's ResourceClaims: the GPUs of Nodes that
// advertise no nvidia.com/gpu, and those held there.
void watchDeviceAllocation(runtime::Manager& manager, const std::string& driver,
                           controller::Cluster& cluster) {
  manager.watch<controller::DeviceSlice>(
      {k8s::kResourceSlices, "", ""}, cluster.addDeviceSlices(driver),
      [&cluster](const controller::DeviceSlice* before, const controller::DeviceSlice* after) {
        return cluster.jobsWokenBySlice(before, after);
      });
  manager.watch<controller::DeviceClaim>(
      {k8s::kResourceClaims, "", "", {"managedFields"}}, cluster.addDeviceClaims(driver),
      [&cluster](const controller::DeviceClaim* before, const controller::DeviceClaim* after) {
        return cluster.jobsWokenByClaim(before, after);
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
        {k8s::kPods, ns, std::string(api::kJobLabel)}, cluster.addPods(ns),
        [&cluster](const controller::Pod* before, const controller::Pod* after) {
          return cluster.jobsConcernedByPod(before, after);
        },
        kPodBatch,
        [&cluster](const controller::Pod* before, const controller::Pod* after) {
          return cluster.jobsWokenByPod(before, after);
        });
    manager.watch<controller::BatchJob>({k8s::kBatchJobs, ns, std::string(api::kJobLabel)},
                                        cluster.addBatchJobs(ns), controller::jobKeysOfBatchJob);
    // Kept measurements are looked up as jobs launch trials: a change concerns no job now.
    manager.watch<controller::MeasurementObject>(
        {k8s::kConfigMaps, ns, std::string(api::kMeasurementLabel)}, cluster.addMeasurements(ns),
        [](const controller::MeasurementObject*, const controller::MeasurementObject*) {
          return std::vector<std::string>{};
        });
  }
  if (!options.draDriver.empty()) {
    watchDeviceAllocation(manager, options.draDriver, cluster);
  }
  // A Node's new GPUs may let waiting jobs go on, and its loss concerns the jobs with Pods on it.
  manager.watch<controller::Node>(
      {k8s::kNodes, "", options.nodeSelector, {"managedFields", "images"}}, cluster.nodes(),
      [&cluster](const controller::Node* before, const controller::Node* after) {
        return cluster.jobsConcernedBy(before, after);
      });
}

// /metrics (unless --metrics-bind-address is 0) and the probes, serving; or the flag at fault and
// why.
struct Servers {
  std::unique_ptr<observability::MetricsServer> metrics;
  std::unique_ptr<observability::ProbeServer> probes;
};

tl::expected<Servers, std::string> startServers(const Options& options,
                                                k8s::AccessReviewer& reviewer,
                                                observability::Metrics& metrics,
                                                std::shared_ptr<observability::Health> health) {
  Servers servers;
  if (options.metricsAddress != "0") {
    auto serving = metricsServing(options, reviewer);
    if (!serving) {
      return tl::unexpected("--metrics-cert-dir: " + serving.error());
    }
    auto started = observability::MetricsServer::start(*serving, metrics);
    if (!started) {
      return tl::unexpected("--metrics-bind-address: " + started.error());
    }
    servers.metrics = std::move(*started);
  }
  auto probes = observability::ProbeServer::start(options.probeAddress, std::move(health));
  if (!probes) {
    return tl::unexpected("--health-probe-bind-address: " + probes.error());
  }
  servers.probes = std::move(*probes);
  return servers;
}

// Stop signals go to one thread that asks everything else to stop. They are blocked before any
// other thread starts, so that every thread inherits the mask.
sigset_t blockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

void stopOnSignal(sigset_t signals, std::stop_source& stop, const observability::Logger& log) {
  std::thread([&stop, log, signals] {
    int received = 0;
    sigwait(&signals, &received);
    log.info("stopping", {{"signal", received}});
    stop.request_stop();
  }).detach();
}

void logStart(const observability::Logger& log, const Options& options, const Servers& servers) {
  log.info("starting",
           {{"namespaces", options.namespaces.empty() ? json("all") : json(options.namespaces)},
            {"leaderElect", options.leaderElect},
            {"kueue", options.kueue},
            {"nodeSelector", options.nodeSelector},
            {"draDriver", options.draDriver},
            {"metricsPort", servers.metrics ? servers.metrics->port() : 0},
            {"metricsSecure", options.metricsSecure},
            {"probePort", servers.probes->port()}});
}

runtime::ManagerOptions managerOptions(const Options& options, const k8s::ClusterConfig& config,
                                       observability::Metrics& metrics) {
  runtime::ManagerOptions managed;
  managed.workers = options.workers;
  if (options.leaderElect) {
    managed.leaderElection =
        runtime::LeaseOptions{options.leaseNamespace, options.leaseName, identity()};
    managed.leaseClient = leaseClient(config, metrics);
  }
  return managed;
}

// The probes: live while no reconcile is wedged, ready once the caches have synced.
std::shared_ptr<observability::Health> healthOf(const observability::Heartbeat& heartbeat,
                                                const runtime::Manager& manager) {
  auto health = std::make_shared<observability::Health>();
  health->addLiveness("reconcile-workers", [&heartbeat] { return heartbeat.healthy(); });
  health->addReadiness("caches-synced", [&manager] { return manager.synced(); });
  return health;
}

// The operator on the cluster `config` names, until a stop signal or the loss of its lease.
int run(const Options& options, const observability::Logger& log,
        const k8s::ClusterConfig& config) {
  const sigset_t stopSignals = blockStopSignals();
  observability::Metrics metrics;
  const runtime::SystemClock clock;
  runtime::TokenBucket bucket(clock, options.qps, options.burst);
  const k8s::Client client = apiClient(config, bucket, metrics);

  runtime::Manager manager(client, clock, managerOptions(options, config, metrics));

  auto seal =
      controller::loadMeasurementSeal(client, options.leaseNamespace, options.measurementKeySecret);
  if (!seal) {
    std::cerr << "--measurement-key-secret: cannot read or make Secret " << options.leaseNamespace
              << "/" << options.measurementKeySecret << ": " << k8s::describe(seal.error()) << "\n";
    return kExitFailure;
  }
  controller::Cluster cluster({std::move(*seal), options.measurementLimits}, options.nodeSelector);
  watchAll(manager, options, cluster);
  const k8s::Client eventsClient = eventClient(config, metrics);
  controller::EventSender events(eventsClient, clock, {},
                                 wiring::eventSenderHooks(metrics, log, cluster));
  auto hooks = wiring::reconcilerHooks(metrics);
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
  manager.setHooks(wiring::managerHooks(metrics, log, manager, cluster));
  wiring::declareWatches(metrics, options.kueue);
  wiring::readJobFiguresFrom(cluster, metrics);
  k8s::AccessReviewer reviewer(client, "/metrics", "get");
  const auto servers = startServers(options, reviewer, metrics, healthOf(heartbeat, manager));
  if (!servers) {
    std::cerr << servers.error() << "\n";
    return kExitUsage;
  }
  logStart(log, options, *servers);

  std::stop_source stop;
  stopOnSignal(stopSignals, stop, log);
  if (manager.run(stop.get_token()) == runtime::RunEnd::kLostLeadership) {
    log.error("lost the leader lease; exiting so that a fresh process campaigns again");
    return kExitFailure;
  }
  log.info("stopped");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options =
      wiring::parseFlags(std::vector<std::string>(argv + 1, argv + argc), std::cerr);
  if (!options) {
    return kExitUsage;
  }
  const auto level = observability::parseLogLevel(options->logLevel);
  if (!level) {
    std::cerr << "--log-level: " << level.error() << "\n";
    return kExitUsage;
  }
  const auto config = wiring::clusterConfig(*options);
  if (!config) {
    std::cerr << "cannot reach the cluster: " << k8s::describe(config.error()) << "\n";
    return kExitUsage;
  }
  return run(*options, observability::Logger(*level), *config);
}
