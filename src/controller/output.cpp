#include "controller/output.h"

#include <string>

#include "controller/trial_pod.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {

nlohmann::json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                               const std::vector<tuning::Trial>& trials, double elapsedSeconds) {
  const api::Spec& spec = job.spec;
  const tuning::Report report =
      tuning::report(spec, job.name(), job.status.results, best, trials, elapsedSeconds,
                     std::string(tuning::kTrialConfigPath));
  nlohmann::json configMap = {{"apiVersion", "v1"},
                              {"kind", "ConfigMap"},
                              {"metadata",
                               {{"name", spec.output.configMapName},
                                {"namespace", job.namespaceName()},
                                {"labels", {{std::string(kJobLabel), jobLabelValue(job.name())}}}}},
                              {"data",
                               {{"ds_config.json", report.config},
                                {"cmd.txt", report.command + "\n"},
                                {"summary.txt", report.summary},
                                {"results.json", report.results}}}};
  if (!spec.output.retain) {
    configMap["metadata"]["ownerReferences"] = nlohmann::json::array({ownerReference(job)});
  }
  return configMap;
}

}  // namespace autotune::controller
