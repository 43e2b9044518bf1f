// kubectl-autotune: the autotune program as a kubectl plugin (kubectl finds kubectl-autotune on
// the PATH and runs it for `kubectl autotune ...`). It reads the cluster of the current kubeconfig
// context, as kubectl would:
//   kubectl autotune report JOB [-n NS] [-o OUT] [--format html|svg]   the search drawn
//   kubectl autotune best JOB [-n NS]     the tuned ds_config.json, from the output ConfigMap
//   kubectl autotune plan -f FILE         what the job would run, as `autotune plan FILE`
// --kubeconfig FILE and --context NAME choose another kubeconfig or context, as kubectl's do.

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "commands.h"
#include "controller/output.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/object.h"
#include "k8s/resources.h"
#include "k8s/transport.h"

namespace autotune::cli {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

const k8s::Resource kAutotuneJobs{std::string(api::kGroup), std::string(api::kVersion),
                                  "autotunejobs", true};

constexpr std::string_view kUsage =
    "usage: kubectl autotune report JOB [-n NS] [-o OUT] [--format html|svg]\n"
    "       kubectl autotune best JOB [-n NS]\n"
    "       kubectl autotune plan -f FILE\n"
    "\n"
    "  report JOB  draw the AutotuneJob's search (see autotune report): from its output\n"
    "              ConfigMap once it has one, else from its status\n"
    "  best JOB    print the tuned ds_config.json of the job's output ConfigMap\n"
    "  plan -f F   print what the job in file F would run (see autotune plan)\n"
    "  -n NS       the namespace (default: the kubeconfig context's, else default)\n"
    "  --kubeconfig FILE, --context NAME   as kubectl's (default: $KUBECONFIG, else\n"
    "              ~/.kube/config, and its current context)\n";

struct PluginOptions {
  std::string command;
  std::string job;   // report, best
  std::string file;  // plan -f
  std::string namespaceName;
  std::string output = "-";
  report::Format format = report::Format::kHtml;
  std::string kubeconfig;
  std::string context;
};

// Takes one flag and its value; false when args[i] is none of the plugin's flags.
bool takeFlag(const std::vector<std::string>& args, std::size_t& i, PluginOptions& options,
              bool& valid) {
  const std::string& flag = args[i];
  const bool hasValue = i + 1 < args.size();
  std::string* target = nullptr;
  if (flag == "-n" || flag == "--namespace") {
    target = &options.namespaceName;
  } else if (flag == "-o" || flag == "--output") {
    target = &options.output;
  } else if (flag == "-f" || flag == "--filename") {
    target = &options.file;
  } else if (flag == "--kubeconfig") {
    target = &options.kubeconfig;
  } else if (flag == "--context") {
    target = &options.context;
  } else if (flag != "--format") {
    return false;
  }
  if (!hasValue) {
    std::cerr << "kubectl autotune: " << flag << " needs a value\n";
    valid = false;
    return true;
  }
  const std::string& value = args[++i];
  if (target != nullptr) {
    *target = value;
  } else if (const auto format = report::parseFormat(value)) {
    options.format = *format;
  } else {
    std::cerr << "kubectl autotune: --format must be html or svg, not \"" << value << "\"\n";
    valid = false;
  }
  return true;
}

std::optional<PluginOptions> parse(const std::vector<std::string>& args) {
  PluginOptions options;
  bool valid = true;
  for (std::size_t i = 0; i < args.size() && valid; ++i) {
    if (takeFlag(args, i, options, valid)) {
      continue;
    }
    if (options.command.empty() && !args[i].starts_with("-")) {
      options.command = args[i];
    } else if (options.job.empty() && !args[i].starts_with("-") && options.command != "plan") {
      options.job = args[i];
    } else {
      std::cerr << "kubectl autotune: unexpected argument \"" << args[i] << "\"\n";
      valid = false;
    }
  }
  const bool needsJob = options.command == "report" || options.command == "best";
  const bool complete =
      (needsJob && !options.job.empty()) || (options.command == "plan" && !options.file.empty());
  if (!valid || !complete) {
    std::cerr << kUsage;
    return std::nullopt;
  }
  return options;
}

// The kubeconfig kubectl would read: --kubeconfig, else the first file of $KUBECONFIG, else
// ~/.kube/config.
std::string kubeconfigPath(const PluginOptions& options) {
  if (!options.kubeconfig.empty()) {
    return options.kubeconfig;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; nothing here sets variables
  const char* listed = std::getenv("KUBECONFIG");
  if (listed != nullptr && *listed != '\0') {
    const std::string paths(listed);
    return paths.substr(0, paths.find(':'));
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; nothing here sets variables
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.kube/config";
}

struct Cluster {
  k8s::Client client;
  std::string namespaceName;
};

std::optional<Cluster> connect(const PluginOptions& options) {
  auto config = k8s::loadKubeconfig(kubeconfigPath(options), options.context);
  if (!config) {
    std::cerr << config.error().message << "\n";
    return std::nullopt;
  }
  config->userAgent = "kubectl-autotune";
  std::string namespaceName = options.namespaceName;
  if (namespaceName.empty()) {
    namespaceName = config->namespaceName.empty() ? "default" : config->namespaceName;
  }
  return Cluster{k8s::Client(k8s::makeHttpTransport(*config)), namespaceName};
}

std::optional<api::AutotuneJob> fetchJob(const Cluster& cluster, const std::string& name) {
  const std::string what = "AutotuneJob " + cluster.namespaceName + "/" + name;
  const auto object = cluster.client.get(kAutotuneJobs, cluster.namespaceName, name);
  if (!object) {
    std::cerr << what << ": "
              << (object.error().kind == k8s::ErrorKind::kNotFound ? "not found"
                                                                   : k8s::describe(object.error()))
              << "\n";
    return std::nullopt;
  }
  auto job = api::decodeJob(*object);
  if (!job) {
    for (const auto& error : job.error()) {
      std::cerr << what << ": " << api::format(error) << "\n";
    }
    return std::nullopt;
  }
  return std::move(*job);
}

// The job's output ConfigMap, when it is this job's by the operator's own rule (written for it,
// or controlled by it): a ConfigMap of that name that anyone else made, or an earlier job of the
// same name, is not the job's tuned config.
std::optional<nlohmann::json> outputOf(const Cluster& cluster, const api::AutotuneJob& job) {
  auto configMap =
      cluster.client.get(k8s::kConfigMaps, cluster.namespaceName, job.spec.output.configMapName);
  if (!configMap || !controller::isOutputOf(*configMap, job.uid())) {
    return std::nullopt;
  }
  return std::move(*configMap);
}

// A job still searching has no output ConfigMap yet: its status holds every finished trial.
report::SearchResults fromStatus(const api::AutotuneJob& job) {
  report::SearchResults results;
  results.jobName = job.name();
  for (const auto& record : job.status.results) {
    results.trials.push_back({record, ""});
  }
  results.model = job.status.model;
  return results;
}

int reportCommand(const Cluster& cluster, const PluginOptions& options) {
  const auto job = fetchJob(cluster, options.job);
  if (!job) {
    return kExitFailed;
  }
  report::SearchResults results = fromStatus(*job);
  if (const auto configMap = outputOf(cluster, *job)) {
    auto fromOutput =
        report::parseResults(configMap->dump(), "ConfigMap " + cluster.namespaceName + "/" +
                                                    job->spec.output.configMapName);
    if (!fromOutput) {
      std::cerr << fromOutput.error() << "\n";
      return kExitFailed;
    }
    results = std::move(*fromOutput);
    results.model = job->status.model;
  }
  return writeReport(results, job, options.format, options.output);
}

int bestCommand(const Cluster& cluster, const PluginOptions& options) {
  const auto job = fetchJob(cluster, options.job);
  if (!job) {
    return kExitFailed;
  }
  const auto configMap = outputOf(cluster, *job);
  const nlohmann::json& config =
      configMap ? k8s::member(k8s::member(*configMap, "data"), "ds_config.json") : nlohmann::json();
  if (!config.is_string()) {
    std::cerr << "AutotuneJob " << cluster.namespaceName << "/" << options.job
              << " has no tuned config yet: ConfigMap " << job->spec.output.configMapName
              << " holds no ds_config.json (phase " << api::toString(job->status.phase) << ")\n";
    return kExitFailed;
  }
  std::cout << config.get<std::string>();
  return std::cout.flush() ? 0 : kExitFailed;
}

}  // namespace

int kubectlPlugin(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::cout << kUsage;
    return 0;
  }
  const auto options = parse(args);
  if (!options) {
    return kExitUsage;
  }
  if (options->command == "plan") {
    return plan(options->file);
  }
  const auto cluster = connect(*options);
  if (!cluster) {
    return kExitFailed;
  }
  return options->command == "report" ? reportCommand(*cluster, *options)
                                      : bestCommand(*cluster, *options);
}

}  // namespace autotune::cli
