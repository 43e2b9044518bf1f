#include "tuning/trial_metrics.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace autotune::tuning {
namespace {

tl::expected<double, std::string> metricIn(const nlohmann::json& metrics, api::Metric metric) {
  const std::string key(metricsFileKey(metric));
  const auto found = metrics.find(key);
  if (found == metrics.end()) {
    return tl::unexpected("the metrics file has no \"" + key + "\"");
  }
  if (!found->is_number() || !std::isfinite(found->get<double>()) || found->get<double>() <= 0) {
    return tl::unexpected("\"" + key +
                          "\" in the metrics file is not a positive number: " + found->dump());
  }
  return found->get<double>();
}

}  // namespace

std::string_view metricsFileKey(api::Metric metric) {
  switch (metric) {
    case api::Metric::kThroughput:
      return "throughput";
    case api::Metric::kLatency:
      return "latency";
    case api::Metric::kFlops:
      return "FLOPS_per_gpu";
  }
  return "throughput";
}

tl::expected<double, std::string> readMetric(std::string_view metricsFile, api::Metric metric) {
  const nlohmann::json metrics = nlohmann::json::parse(metricsFile, nullptr, false);
  if (metrics.is_discarded() || !metrics.is_object()) {
    return tl::unexpected(std::string("the metrics file is not a JSON object"));
  }
  return metricIn(metrics, metric);
}

std::map<std::string, double> readMetrics(std::string_view metricsFile) {
  const nlohmann::json metrics = nlohmann::json::parse(metricsFile, nullptr, false);
  std::map<std::string, double> found;
  if (metrics.is_discarded() || !metrics.is_object()) {
    return found;
  }
  for (const auto metric : {api::Metric::kThroughput, api::Metric::kLatency, api::Metric::kFlops}) {
    if (const auto value = metricIn(metrics, metric)) {
      found.emplace(api::toString(metric), *value);
    }
  }
  return found;
}

}  // namespace autotune::tuning
