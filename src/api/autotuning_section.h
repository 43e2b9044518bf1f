#pragma once
// Internal to the api library: DeepSpeed's own `autotuning` section of a config, which users of
// `deepspeed --autotuning tune` keep, read as the job's defaults. Where spec.search,
// spec.argMappings, spec.model or spec.resources say nothing, the section's keys fill them in;
// where both say something, the spec wins and the user is told.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job.h"

namespace autotune::api {

// A spec field whose value the section supplied: what validation finds wrong with it is reported
// at the section's key, where the user wrote it.
struct SuppliedField {
  std::string specPath;     // e.g. spec.search.maxTrials
  std::string sectionPath;  // e.g. spec.deepspeedConfig.autotuning.tuner_num_trials
};

struct AutotuningDefaults {
  FieldErrors warnings;  // keys with no effect here, and keys the spec overrides
  std::vector<SuppliedField> supplied;
};

// Applies spec.deepspeedConfig.autotuning to `spec`. `specDocument` is the spec as written, to
// tell what it sets from what it leaves to defaults. Values of the wrong type go to `errors`.
AutotuningDefaults applyAutotuningSection(const nlohmann::json& specDocument, Spec& spec,
                                          FieldErrors& errors);

// `path` with a supplied spec field's prefix replaced by the section key it came from.
std::string sourcePath(const std::string& path, const std::vector<SuppliedField>& supplied);

}  // namespace autotune::api
