#include "api/defaults.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/deepspeed_keys.h"
#include "api/fields.h"

namespace autotune::api {
namespace {

using nlohmann::json;

// A string member, or "" when it is missing or of another type (decoding reports that).
std::string stringMember(const json& value, std::string_view key) {
  const json* found = fields::findMember(value, key);
  return found != nullptr && found->is_string() ? found->get<std::string>() : std::string();
}

// A whole number is an integer whatever its spelling.
void normalizeInteger(json& value) {
  if (value.is_array()) {
    for (json& item : value) {
      normalizeInteger(item);
    }
    return;
  }
  FieldErrors ignored;  // a value that is no whole number is left for validation to report
  if (value.is_number_float()) {
    if (std::optional<std::int64_t> whole = fields::asInt64(value, "", ignored)) {
      value = *whole;
    }
  }
}

}  // namespace

void normalizeIntegers(json& deepspeedConfig) {
  if (!deepspeedConfig.is_object()) {
    return;
  }
  for (const std::string_view key : {kTrainBatchKey, kMicroBatchKey, kGradientAccumulationKey}) {
    if (deepspeedConfig.contains(key)) {
      normalizeInteger(deepspeedConfig[std::string(key)]);
    }
  }
  const auto zero = deepspeedConfig.find(kZeroKey);
  if (zero != deepspeedConfig.end() && zero->is_object() && zero->contains(kStageKey)) {
    normalizeInteger((*zero)[std::string(kStageKey)]);
  }
}

bool applyDefaults(AutotuneJob& job) {
  Spec& spec = job.spec;
  const json* podSpec = fields::findMember(spec.podTemplate, "spec");
  const json* containers =
      podSpec == nullptr ? nullptr : fields::findMember(*podSpec, "containers");
  if (spec.primaryContainer.empty() && containers != nullptr && containers->is_array() &&
      !containers->empty()) {
    spec.primaryContainer = stringMember(containers->front(), "name");
  }
  const std::string name = stringMember(job.metadata, "name");
  if (spec.output.configMapName.empty() && !name.empty()) {
    spec.output.configMapName = name + "-optimal";
    return true;
  }
  return false;
}

}  // namespace autotune::api
