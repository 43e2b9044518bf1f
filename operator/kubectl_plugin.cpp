// kubectl-autotune: the autotune program as a kubectl plugin (kubectl finds kubectl-autotune on
// the PATH and runs it for `kubectl autotune ...`). It reads the cluster of the current kubeconfig
// context, as kubectl would:
//   kubectl autotune report JOB [-n NS] [-o html|svg] [--output-file OUT] [--gpu-model MODEL]
//                                         the search drawn
//   kubectl autotune best JOB [-n NS] [--gpu-model MODEL]
//                                         the tuned ds_config.json, from the output ConfigMap
//   kubectl autotune plan [-f] FILE       what the job would run, as `autotune plan`
// --kubeconfig FILE and --context NAME choose another kubeconfig or context, as kubectl's do.

#include <algorithm>
#include <iostream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/labels.h"
#include "commands.h"
#include "controller/objects/output.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/resources.h"
#include "k8s/transport.h"
#include "object/read.h"

namespace autotune::cli {
namespace {

constexpr int kExitFailed = 1;
constexpr std::string_view kProgram = "kubectl autotune";

const k8s::Resource kAutotuneJobs{std::string(api::kGroup), std::string(api::kVersion),
                                  "autotunejobs", true};

constexpr std::string_view kUsage =
    "usage: kubectl autotune report JOB [-n NS] [-o html|svg] [--output-file OUT]\n"
    "                                   [--gpu-model MODEL]\n"
    "       kubectl autotune best JOB [-n NS] [--gpu-model MODEL]\n"
    "       kubectl autotune plan [-f] FILE\n"
    "       kubectl autotune --version\n"
    "\n"
    "  report  draw the AutotuneJob's search (see autotune report): from its output ConfigMap\n"
    "          once it has one, else from its status; of a job of several GPU models, each\n"
    "          model's search in one page (with --gpu-model, that model's alone)\n"
    "  best    print the tuned ds_config.json of the job's output ConfigMap (with --gpu-model,\n"
    "          the one tuned for that GPU model)\n"
    "  plan    print what the job in FILE (- for standard input) would run (see autotune plan)\n"
    "\n"
    "The cluster is the current kubeconfig context's ($KUBECONFIG's files merged, else\n"
    "~/.kube/config), as kubectl's. 'kubectl autotune VERB --help' describes a verb's flags.\n";

// Which cluster, as kubectl is told.
struct ClusterChoice {
  std::string kubeconfig;
  std::string context;
  std::string namespaceName;
};

std::vector<Flag> clusterFlags(ClusterChoice& choice) {
  const auto into = [](std::string& target) {
    return [&target](const std::string& value) {
      target = value;
      return std::optional<std::string>();
    };
  };
  return {
      {"namespace", 'n', "NS", "the namespace (default: the kubeconfig context's, else default)",
       into(choice.namespaceName)},
      {"kubeconfig", 0, "FILE", "the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
       into(choice.kubeconfig)},
      {"context", 0, "NAME", "the kubeconfig context (default: its current-context)",
       into(choice.context)}};
}

struct Cluster {
  k8s::Client client;
  std::string namespaceName;
};

std::optional<Cluster> connect(const ClusterChoice& choice) {
  auto config = choice.kubeconfig.empty()
                    ? k8s::loadKubeconfigs(k8s::defaultKubeconfigFiles(), choice.context)
                    : k8s::loadKubeconfig(choice.kubeconfig, choice.context);
  if (!config) {
    std::cerr << config.error().message << "\n";
    return std::nullopt;
  }
  config->userAgent = "kubectl-autotune";
  std::string namespaceName = choice.namespaceName;
  if (namespaceName.empty()) {
    namespaceName = config->namespaceName.empty() ? "default" : config->namespaceName;
  }
  return Cluster{k8s::Client(k8s::makeHttpTransport(*config)), namespaceName};
}

// The AutotuneJob, or what kept it: "AutotuneJob NS/NAME: not found", or each field at fault.
tl::expected<api::AutotuneJob, std::string> fetchJob(const Cluster& cluster,
                                                     const std::string& name) {
  const std::string what = "AutotuneJob " + cluster.namespaceName + "/" + name;
  const auto object = cluster.client.get(kAutotuneJobs, cluster.namespaceName, name);
  if (!object) {
    return tl::unexpected(what + ": " +
                          (object.error().kind == k8s::ErrorKind::kNotFound
                               ? "not found"
                               : k8s::describe(object.error())));
  }
  auto job = api::decodeJob(*object);
  if (!job) {
    std::string errors;
    for (const auto& error : job.error()) {
      errors += (errors.empty() ? "" : "\n") + what + ": " + api::format(error);
    }
    return tl::unexpected(errors);
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

// The AutotuneJob that runs the job's search of one GPU model: only one that the job controls.
tl::expected<api::AutotuneJob, std::string> fetchSearch(const Cluster& cluster,
                                                        const api::AutotuneJob& job,
                                                        const api::ModelSearch& search) {
  auto searched = fetchJob(cluster, search.job);
  if (searched && !object::controlledBy({{"metadata", searched->metadata}}, job.uid())) {
    return tl::unexpected("AutotuneJob " + cluster.namespaceName + "/" + search.job +
                          " is not the search of " + job.name() + " it is named for");
  }
  return searched;
}

// A search's results: from its output ConfigMap once it has one, else from its status.
tl::expected<report::SearchResults, std::string> resultsOf(const Cluster& cluster,
                                                           const api::AutotuneJob& job) {
  const auto configMap = outputOf(cluster, job);
  if (!configMap) {
    return fromStatus(job);
  }
  auto results = report::parseResults(configMap->dump(), "ConfigMap " + cluster.namespaceName +
                                                             "/" + job.spec.output.configMapName);
  if (results) {
    results->model = job.status.model;
  }
  return results;
}

int drawSearch(const Cluster& cluster, const api::AutotuneJob& job, const ReportOutput& output) {
  const auto results = resultsOf(cluster, job);
  if (!results) {
    std::cerr << results.error() << "\n";
    return kExitFailed;
  }
  return writeReport(*results, job, output);
}

// One GPU model's search drawn, or why it cannot be.
report::ModelSearchResults modelResults(const Cluster& cluster, const api::AutotuneJob& job,
                                        const api::ModelSearch& search) {
  report::ModelSearchResults model;
  model.gpuModel = search.gpuModel;
  model.searchJob = search.job;
  auto searched = fetchSearch(cluster, job, search);
  auto results = searched ? resultsOf(cluster, *searched) : tl::unexpected(searched.error());
  if (!results) {
    model.note = std::string(api::toString(search.phase)) +
                 (search.message.empty() ? "" : ": " + search.message) + ". " + results.error();
    return model;
  }
  model.results = std::move(*results);
  model.job = std::move(*searched);
  return model;
}

// A job that tunes for several GPU models: every model's search in one page, or with `gpuModel`
// that model's alone, drawn as any search is.
int drawModels(const Cluster& cluster, const api::AutotuneJob& job, const ReportOutput& output,
               const std::string& gpuModel) {
  const auto& searches = job.status.gpuModels;
  if (!gpuModel.empty()) {
    const auto search = std::ranges::find(searches, gpuModel, &api::ModelSearch::gpuModel);
    auto searched = search == searches.end()
                        ? tl::unexpected("AutotuneJob " + cluster.namespaceName + "/" + job.name() +
                                         " searches no GPU model " + gpuModel)
                        : fetchSearch(cluster, job, *search);
    if (!searched) {
      std::cerr << searched.error() << "\n";
      return kExitFailed;
    }
    return drawSearch(cluster, *searched, output);
  }
  if (output.format != report::Format::kHtml) {
    std::cerr << "AutotuneJob " << cluster.namespaceName << "/" << job.name()
              << " searches per GPU model: the chart alone (-o svg) is one model's; name it with "
                 "--gpu-model\n";
    return kExitUsage;
  }
  std::vector<report::ModelSearchResults> models;
  models.reserve(searches.size());
  for (const auto& search : searches) {
    models.push_back(modelResults(cluster, job, search));
  }
  return writeRendered(report::renderModelsReport(job.name(), models), output);
}

int drawReport(const Cluster& cluster, const std::string& name, const ReportOutput& output,
               const std::string& gpuModel) {
  const auto job = fetchJob(cluster, name);
  if (!job) {
    std::cerr << job.error() << "\n";
    return kExitFailed;
  }
  return job->status.gpuModels.empty() ? drawSearch(cluster, *job, output)
                                       : drawModels(cluster, *job, output, gpuModel);
}

// The tuned config of the job's output ConfigMap: ds_config.json, or with `gpuModel` that model's
// (a job that tunes for several).
int printBest(const Cluster& cluster, const std::string& name, const std::string& gpuModel) {
  const auto job = fetchJob(cluster, name);
  if (!job) {
    std::cerr << job.error() << "\n";
    return kExitFailed;
  }
  const std::string file =
      gpuModel.empty() ? std::string(api::kOutputConfigFile) : api::modelConfigFile(gpuModel);
  const auto configMap = outputOf(cluster, *job);
  const nlohmann::json& config =
      configMap ? object::member(object::member(*configMap, "data"), file) : nlohmann::json();
  if (!config.is_string()) {
    std::cerr << "AutotuneJob " << cluster.namespaceName << "/" << name << " has no tuned config "
              << (gpuModel.empty() ? "" : "for " + gpuModel + " ") << "yet: ConfigMap "
              << job->spec.output.configMapName << " holds no " << file << " (phase "
              << api::toString(job->status.phase) << ")\n";
    return kExitFailed;
  }
  std::cout << config.get<std::string>();
  return std::cout.flush() ? 0 : kExitFailed;
}

// A verb that reads one job of the cluster: its flags read, the cluster reached, then `act`.
template <typename Act>
int onOneJob(const std::vector<std::string>& args, std::string_view verb, std::string_view usage,
             std::vector<Flag> flags, ClusterChoice& choice, Act act) {
  for (auto& flag : clusterFlags(choice)) {
    flags.push_back(std::move(flag));
  }
  const auto line = parseCommandLine(args, flags);
  if (const auto answered = answeredAlone(line, kProgram, verb, usage, flags)) {
    return *answered;
  }
  if (line->arguments.size() != 1) {
    std::cerr << kProgram << " " << verb << ": "
              << (line->arguments.empty() ? "JOB is missing" : "one JOB only") << "\nSee '"
              << kProgram << " " << verb << " --help'.\n";
    return kExitUsage;
  }
  const auto cluster = connect(choice);
  return cluster ? act(*cluster, line->arguments.front()) : kExitFailed;
}

}  // namespace

int kubectlPlugin(const std::vector<std::string>& args) {
  const std::string verb = args.empty() ? "" : args.front();
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  ClusterChoice choice;
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (verb == "--version") {
    std::cout << versionLine(kProgram);
    return 0;
  }
  if (verb == "plan") {
    return planVerb(rest, kProgram);
  }
  std::string gpuModel;
  const Flag gpuModelFlag{"gpu-model", 0, "MODEL",
                          "this GPU model's, of a job that tunes for several",
                          [&gpuModel](const std::string& value) -> std::optional<std::string> {
                            gpuModel = value;
                            return std::nullopt;
                          }};
  if (verb == "report") {
    ReportOutput output;
    auto flags = reportOutputFlags(output);
    flags.push_back(gpuModelFlag);
    return onOneJob(rest, verb,
                    "usage: kubectl autotune report JOB [flags]\n\nDraws the AutotuneJob's "
                    "search: from its output ConfigMap once it has one, else\nfrom its status. "
                    "A job that tunes for several GPU models: every model's search\nin one page, "
                    "or --gpu-model's alone.\n",
                    std::move(flags), choice,
                    [&output, &gpuModel](const Cluster& cluster, const std::string& job) {
                      return drawReport(cluster, job, output, gpuModel);
                    });
  }
  if (verb == "best") {
    std::vector<Flag> flags{gpuModelFlag};
    return onOneJob(rest, verb,
                    "usage: kubectl autotune best JOB [flags]\n\nPrints the tuned ds_config.json "
                    "of the AutotuneJob's output ConfigMap.\n",
                    std::move(flags), choice,
                    [&gpuModel](const Cluster& cluster, const std::string& job) {
                      return printBest(cluster, job, gpuModel);
                    });
  }
  std::cerr << (verb.empty()            ? ""
                : verb.starts_with("-") ? "kubectl autotune: the verb comes first, then its flags\n"
                                        : "kubectl autotune: unknown verb \"" + verb + "\"\n")
            << kUsage;
  return kExitUsage;
}

}  // namespace autotune::cli
