#include "controller/objects/output.h"

#include <string>

#include "api/labels.h"
#include "controller/objects/trial_pod.h"
#include "object/read.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {

namespace {

// The output ConfigMap of `job` holding `data`: owned by the job unless spec.output.retain.
nlohmann::json outputOf(const api::AutotuneJob& job, nlohmann::json data) {
  nlohmann::json configMap = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", job.spec.output.configMapName},
        {"namespace", job.namespaceName()},
        {"labels", {{std::string(api::kJobLabel), jobLabelValue(job.name())}}},
        {"annotations", {{std::string(kJobUidAnnotation), job.uid()}}}}},
      {"data", std::move(data)}};
  if (!job.spec.output.retain) {
    configMap["metadata"]["ownerReferences"] = nlohmann::json::array({ownerReference(job)});
  }
  return configMap;
}

}  // namespace

nlohmann::json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                               const std::vector<tuning::Trial>& trials, double elapsedSeconds) {
  const api::Spec& spec = job.spec;
  const tuning::Report report =
      tuning::report(spec, job.name(), job.status.results, best, trials, elapsedSeconds,
                     std::string(tuning::kTrialConfigPath));
  return outputOf(job, {{std::string(api::kOutputConfigFile), report.config},
                        {std::string(api::kOutputCommandFile), report.command + "\n"},
                        {std::string(api::kOutputSummaryFile), report.summary},
                        {std::string(api::kOutputResultsFile), report.results}});
}

nlohmann::json modelsOutputConfigMap(const api::AutotuneJob& job, const std::string& primaryModel) {
  nlohmann::json data = nlohmann::json::object();
  for (const auto& search : job.status.gpuModels) {
    if (!search.best || !search.best->config) {
      continue;
    }
    const std::string config = tuning::configFile(*search.best->config);
    data[api::modelConfigFile(search.gpuModel)] = config;
    if (search.gpuModel == primaryModel) {
      data[std::string(api::kOutputConfigFile)] = config;
    }
  }
  return outputOf(job, std::move(data));
}

namespace {

std::string writtenFor(const nlohmann::json& configMap) {
  return object::text(object::member(object::metadataOf(configMap), "annotations"),
                      kJobUidAnnotation);
}

}  // namespace

bool isOutputOf(const nlohmann::json& configMap, const std::string& jobUid) {
  return !jobUid.empty() &&
         (writtenFor(configMap) == jobUid || object::controlledBy(configMap, jobUid));
}

std::string holderOf(const nlohmann::json& configMap) {
  if (const std::string uid = writtenFor(configMap); !uid.empty()) {
    return "written for the AutotuneJob with UID " + uid;
  }
  if (const nlohmann::json* controller = object::controllerOf(configMap)) {
    return "controlled by " + object::text(*controller, "kind") + " " +
           object::text(*controller, "name");
  }
  return "made by none of the operator's jobs";
}

}  // namespace autotune::controller
