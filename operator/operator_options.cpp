#include "operator_options.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <sstream>
#include <type_traits>
#include <utility>

#include "api/labels.h"
#include "api/units.h"
#include "command_line.h"

namespace autotune::wiring {
namespace {

constexpr std::string_view kUsage =
    "usage: autotune-operator [flags]\n"
    "\n"
    "Watches AutotuneJobs, their trial Pods and the GPU Nodes, and runs each job's search.\n"
    "\n"
    "Flags:\n";

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

// What the operator watches and where it takes its lease.
std::vector<cli::Flag> clusterFlags(Options& options) {
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
          text("dra-driver", "DRIVER",
               "count the GPUs of Nodes that advertise no nvidia.com/gpu from this DRA driver's "
               "ResourceSlices, and those its ResourceClaims hold (e.g. gpu.nvidia.com); "
               "default: none",
               options.draDriver),
          text("leader-election-namespace", "NS", "default: $POD_NAMESPACE, else default",
               options.leaseNamespace),
          text("leader-election-id", "NAME", "the Lease's name; default autotune-operator",
               options.leaseName)};
}

// Kept measurements: their key, their age and their number.
std::vector<cli::Flag> measurementFlags(Options& options) {
  auto& limits = options.measurementLimits;
  return {text("measurement-key-secret", "NAME",
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
                   limits.perNamespace)};
}

// How the process serves, logs and paces itself.
std::vector<cli::Flag> processFlags(Options& options) {
  return {text("metrics-bind-address", "ADDR", "default :8080 (0 turns metrics off)",
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
          positive("workers", "N", "concurrent reconciles; default 2", options.workers),
          positive("qps", "Q", "client-side API rate limit, requests a second; default 20",
                   options.qps),
          positive("burst", "B", "client-side API rate limit, burst; default 30", options.burst),
          text("log-level", "LEVEL", "debug, info, warn or error; default info", options.logLevel)};
}

std::vector<cli::Flag> operatorFlags(Options& options) {
  std::vector<cli::Flag> flags = clusterFlags(options);
  for (auto* more : {&measurementFlags, &processFlags}) {
    auto added = (*more)(options);
    flags.insert(flags.end(), std::make_move_iterator(added.begin()),
                 std::make_move_iterator(added.end()));
  }
  return flags;
}

}  // namespace

std::string environment(const char* name) {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up, before any thread
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

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

k8s::Result<k8s::ClusterConfig> clusterConfig(const Options& options) {
  auto config = !options.kubeconfig.empty() ? k8s::loadKubeconfig(options.kubeconfig)
                : !environment("KUBECONFIG").empty()
                    ? k8s::loadKubeconfigs(k8s::defaultKubeconfigFiles())
                    : k8s::inClusterConfig();
  if (config) {
    config->userAgent = std::string(api::kOperatorName) + "/" AUTOTUNE_VERSION;
  }
  return config;
}

}  // namespace autotune::wiring
