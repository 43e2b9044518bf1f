#pragma once
// Reading what a trial measured: the JSON DeepSpeed's engine writes to autotuning.metric_path,
// e.g. {"throughput": 87.3, "latency": 5865000.0, "FLOPS_per_gpu": 1.2e13, ...}.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "api/job.h"

namespace autotune::tuning {

// The key that holds a search metric. `flops` is FLOPS_per_gpu, the key DeepSpeed writes (its
// own autotuner looked for "flops" and failed).
std::string_view metricsFileKey(api::Metric metric);

// A metrics file, parsed once for every metric read from it.
class MetricsFile {
 public:
  explicit MetricsFile(std::string_view text);

  // The metric's value, or why there is none (not JSON, no such key, not a positive finite
  // number).
  tl::expected<double, std::string> value(api::Metric metric) const;

  // Every metric the file holds as a positive finite number, by spec.search.metric's names
  // (throughput, latency, flops); nothing for a file that is not a JSON object.
  std::map<std::string, double> values() const;

  // The "effective" object of the file (tuning/effective_values.h), if it holds one.
  std::optional<nlohmann::json> effective() const;

 private:
  nlohmann::json parsed_;  // discarded when the text is no JSON
};

// MetricsFile(text).values(), for a caller with nothing else to read from the file.
std::map<std::string, double> readMetrics(std::string_view metricsFile);

}  // namespace autotune::tuning
