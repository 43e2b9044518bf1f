#pragma once
// Internal to the api library: the keys of spec.deepspeedConfig that DeepSpeed does not read. A
// misspelt key is never an error in DeepSpeed's own top level, so without this check a job would
// tune a key no trial uses and report the search as if it had. The keys DeepSpeed reads are data,
// with the DeepSpeed versions they come from: deepspeed_config_keys.json.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace autotune::api {

// A key DeepSpeed does not read, at the top level or in a section whose keys DeepSpeed names.
struct UnknownConfigKey {
  std::string path;    // e.g. spec.deepspeedConfig.zero_optimisation
  std::string reason;  // what DeepSpeed does with it, and the nearest key it reads, if one is close
  // Whether its value holds candidates or "auto": the search would then vary what no trial reads.
  bool tuned = false;
};

// Sections whose keys are free-form (optimizer.params, scheduler.params, autotuning) are not
// looked into.
std::vector<UnknownConfigKey> unknownConfigKeys(const nlohmann::json& deepspeedConfig);

}  // namespace autotune::api
