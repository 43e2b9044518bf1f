#pragma once
// Internal to the api library: validate()'s checks of the parts of a spec, one file each.
// validation.cpp checks the object as a whole, its names and numeric ranges;
// validation_config.cpp the DeepSpeed config (tuning_syntax.cpp the keys the engine searches);
// validation_template.cpp the trial template.

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "api/codec.h"
#include "api/job.h"

namespace autotune::api::checks {

inline constexpr std::string_view kConfigPath = "spec.deepspeedConfig";
inline constexpr std::string_view kEmptyCandidates = "a list of candidate values must not be empty";

inline void fail(FieldErrors& errors, std::string path, std::string_view reason) {
  errors.push_back({std::move(path), std::string(reason)});
}

// Batch sizes are counted in int, as DeepSpeed's engine and the search count them.
inline bool isPositiveInteger(const nlohmann::json& value) {
  return value.is_number_integer() && value.get<std::int64_t>() > 0 &&
         value.get<std::int64_t>() <= std::numeric_limits<int>::max();
}

inline bool isAuto(const nlohmann::json& value) {
  return value.is_string() && value.get_ref<const std::string&>() == "auto";
}

// The DeepSpeed config (validation_config.cpp): its size, its tuning syntax, the values the
// engine reads, a fixed global batch and the keys argMappings name.
void checkDeepSpeedConfig(const nlohmann::json& config, FieldErrors& errors);
void checkFixedTrainBatch(const Spec& spec, FieldErrors& errors);
void checkArgMappings(const Spec& spec, FieldErrors& errors);

// The keys of the tuning syntax (tuning_syntax.cpp, beside how the engine reads them), each
// checked where checkDeepSpeedConfig's walk meets it, so that errors keep the config's order.
void checkStages(const nlohmann::json& value, const std::string& path, FieldErrors& errors);
void checkBatchChoice(const nlohmann::json& value, const std::string& path, FieldErrors& errors);
void checkTrainBatch(const nlohmann::json& value, const std::string& path, FieldErrors& errors);

// The trial template (validation_template.cpp): its containers, and the primary container's
// command, args and env with only known placeholders.
void checkTemplate(const Spec& spec, FieldErrors& errors);
// The afterTuning Job's template, as the trial template's, and its restartPolicy.
void checkAfterTuning(const Spec& spec, FieldErrors& errors);

}  // namespace autotune::api::checks
