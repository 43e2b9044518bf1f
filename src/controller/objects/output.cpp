#include "controller/objects/output.h"

#include <string>

#include "api/labels.h"
#include "controller/objects/trial_pod.h"
#include "object/read.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {

nlohmann::json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                               const std::vector<tuning::Trial>& trials, double elapsedSeconds) {
  const api::Spec& spec = job.spec;
  const tuning::Report report =
      tuning::report(spec, job.name(), job.status.results, best, trials, elapsedSeconds,
                     std::string(tuning::kTrialConfigPath));
  nlohmann::json configMap = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", spec.output.configMapName},
        {"namespace", job.namespaceName()},
        {"labels", {{std::string(api::kJobLabel), jobLabelValue(job.name())}}},
        {"annotations", {{std::string(kJobUidAnnotation), job.uid()}}}}},
      {"data",
       {{std::string(api::kOutputConfigFile), report.config},
        {std::string(api::kOutputCommandFile), report.command + "\n"},
        {std::string(api::kOutputSummaryFile), report.summary},
        {std::string(api::kOutputResultsFile), report.results}}}};
  if (!spec.output.retain) {
    configMap["metadata"]["ownerReferences"] = nlohmann::json::array({ownerReference(job)});
  }
  return configMap;
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
