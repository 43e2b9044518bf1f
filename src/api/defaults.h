#pragma once
// Internal to the api library: what decoding settles after the fields are read, before
// validation: the config's integer keys in one spelling, and the defaults that depend on other
// fields.

#include <nlohmann/json.hpp>

#include "api/job.h"

namespace autotune::api {

// The config keys the engine reads as integers, written as floats without a fraction (16.0,
// 1.6e1, as YAML and JSON let users write them), become integers.
void normalizeIntegers(nlohmann::json& deepspeedConfig);

// Fills in spec.primaryContainer (the template's first container) and spec.output.configMapName
// ("<name>-optimal") when unset; returns whether configMapName was defaulted.
bool applyDefaults(AutotuneJob& job);

}  // namespace autotune::api
