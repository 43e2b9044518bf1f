#pragma once
// Internal to the api library: validate()'s checks of the parts of a spec, one file each.
// validation.cpp checks the object as a whole, its names and numeric ranges;
// validation_config.cpp the DeepSpeed config; validation_template.cpp the trial template.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "api/codec.h"
#include "api/job.h"

namespace autotune::api::checks {

inline void fail(FieldErrors& errors, std::string path, std::string_view reason) {
  errors.push_back({std::move(path), std::string(reason)});
}

// The DeepSpeed config (validation_config.cpp): its size, its tuning syntax, the values the
// engine reads, a fixed global batch and the keys argMappings name.
void checkDeepSpeedConfig(const nlohmann::json& config, FieldErrors& errors);
void checkFixedTrainBatch(const Spec& spec, FieldErrors& errors);
void checkArgMappings(const Spec& spec, FieldErrors& errors);

// The trial template (validation_template.cpp): its containers, and the primary container's
// command, args and env with only known placeholders.
void checkTemplate(const Spec& spec, FieldErrors& errors);

}  // namespace autotune::api::checks
