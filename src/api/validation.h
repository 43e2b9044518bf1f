#pragma once
// Semantic checks of a decoded AutotuneJob: ranges, enums, cross-field rules, the DeepSpeed
// config's tuning syntax and the trial template. Returns every problem, not only the first.

#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job.h"

namespace autotune::api {

FieldErrors validate(const AutotuneJob& job);

// validate()'s findings on a job that decoding found `decodingErrors` in, less those that would
// only repeat one: a field that failed to decode holds its default, and rules comparing it with
// another field (or with a default derived from metadata.name) would mislead.
FieldErrors validateDecoded(const AutotuneJob& job, const FieldErrors& decodingErrors,
                            bool configMapNameDefaulted);

// The keys a placeholder `${key}` or an argMappings entry may name: the dotted paths of every
// key in the DeepSpeed config but its autotuning section, plus the per-trial keys always set.
std::vector<std::string> configKeyPaths(const nlohmann::json& deepspeedConfig);

}  // namespace autotune::api
