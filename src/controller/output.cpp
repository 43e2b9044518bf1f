#include "controller/output.h"

#include <map>
#include <string>
#include <string_view>

#include "api/codec.h"
#include "controller/trial_pod.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

// Indentation multiplies the size of a deeply nested config; past this the file stays compact.
constexpr std::size_t kMaxIndentedConfigBytes = std::size_t{128} * 1024;

std::string configFile(const json& config) {
  std::string indented = config.dump(2);
  if (indented.size() > kMaxIndentedConfigBytes) {
    return config.dump() + "\n";
  }
  return indented + "\n";
}

// One compact record per line: at a thousand trials an indented file would pass 1 MiB.
std::string resultsFile(const api::Status& status, const json& bestConfig,
                        const std::vector<tuning::Trial>& trials) {
  std::map<std::string_view, const tuning::Trial*> byName;
  for (const tuning::Trial& trial : trials) {
    byName.emplace(trial.name, &trial);
  }
  std::string text = "[";
  const char* separator = "\n";
  const json encoded = api::encode(status);
  for (json entry : encoded["results"]) {
    const auto trial = byName.find(entry.value("name", ""));
    if (trial != byName.end()) {
      entry["configPatch"] = tuning::mergePatch(bestConfig, tuning::optimalConfig(*trial->second));
    }
    text += separator + entry.dump();
    separator = ",\n";
  }
  return text + "\n]\n";
}

}  // namespace

json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                     const std::vector<tuning::Trial>& trials, double elapsedSeconds) {
  const api::Spec& spec = job.spec;
  const json bestConfig = tuning::optimalConfig(best);
  const std::string command =
      tuning::shellJoin(tuning::trialCommand(spec, job.name(), best, tuning::kTrialConfigPath));
  json configMap = {{"apiVersion", "v1"},
                    {"kind", "ConfigMap"},
                    {"metadata",
                     {{"name", spec.output.configMapName},
                      {"namespace", job.namespaceName()},
                      {"labels", {{std::string(kJobLabel), jobLabelValue(job.name())}}}}},
                    {"data",
                     {{"ds_config.json", configFile(bestConfig)},
                      {"cmd.txt", command + "\n"},
                      {"summary.txt",
                       tuning::summaryTable(job.status.spaces, spec.search.metric, elapsedSeconds)},
                      {"results.json", resultsFile(job.status, bestConfig, trials)}}}};
  if (!spec.output.retain) {
    configMap["metadata"]["ownerReferences"] = json::array({ownerReference(job)});
  }
  return configMap;
}

}  // namespace autotune::controller
