#pragma once
// Reading and writing AutotuneJobs: YAML or JSON in, JSON out. Decoding reports every problem it
// finds, each with the field path and the reason, and runs validation (validation.h) as well.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "api/job.h"

namespace autotune::api {

// A problem with one field of the input, e.g. {"spec.search.metric", "must be one of throughput,
// latency, flops"}. A YAML syntax error has the path "line L, column C".
struct FieldError {
  std::string path;
  std::string reason;

  bool operator==(const FieldError&) const = default;
};
using FieldErrors = std::vector<FieldError>;

// "path: reason"
std::string format(const FieldError& error);

// YAML (a superset of JSON) to the JSON document model. Plain scalars become numbers or null where
// YAML 1.2's core schema says so, and booleans where Kubernetes' YAML reader does (YAML 1.1's
// true/false, yes/no, on/off, y/n); quoted scalars stay strings.
tl::expected<nlohmann::json, FieldError> yamlToJson(std::string_view text);

// A decoded job, and what decoding noticed without refusing it: config keys DeepSpeed does not read
// (deepspeed_config_keys.h), and keys of the config's DeepSpeed `autotuning` section that have no
// effect here or that the spec overrides (see docs/api.md).
struct Decoded {
  AutotuneJob job;
  FieldErrors warnings;
};

// A whole AutotuneJob document, decoded and validated; every error at once.
tl::expected<Decoded, FieldErrors> decode(const nlohmann::json& document);
tl::expected<Decoded, FieldErrors> decodeYaml(std::string_view text);

// The job alone, for callers with nobody to tell the warnings to.
tl::expected<AutotuneJob, FieldErrors> decodeJob(const nlohmann::json& document);
tl::expected<AutotuneJob, FieldErrors> decodeJobYaml(std::string_view text);

// The status subresource alone (as read back from the API server).
tl::expected<Status, FieldErrors> decodeStatus(const nlohmann::json& status);

// Back to the API's JSON form. Defaults are written out explicitly; decodeJob(encode(job)) == job.
nlohmann::json encode(const AutotuneJob& job);
nlohmann::json encode(const Spec& spec);
nlohmann::json encode(const Status& status);

}  // namespace autotune::api
