#include "tuning/trial_metrics.h"

#include <array>
#include <cmath>

#include "tuning/effective_values.h"

namespace autotune::tuning {

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

MetricsFile::MetricsFile(std::string_view text)
    : parsed_(nlohmann::json::parse(text, nullptr, false)) {}

tl::expected<double, std::string> MetricsFile::value(api::Metric metric) const {
  if (parsed_.is_discarded() || !parsed_.is_object()) {
    return tl::unexpected(std::string("the metrics file is not a JSON object"));
  }
  const std::string key(metricsFileKey(metric));
  const auto found = parsed_.find(key);
  if (found == parsed_.end()) {
    return tl::unexpected("the metrics file has no \"" + key + "\"");
  }
  if (!found->is_number() || !std::isfinite(found->get<double>()) || found->get<double>() <= 0) {
    return tl::unexpected("\"" + key +
                          "\" in the metrics file is not a positive number: " + found->dump());
  }
  return found->get<double>();
}

std::map<std::string, double> MetricsFile::values() const {
  constexpr std::array kMetrics = {api::Metric::kThroughput, api::Metric::kLatency,
                                   api::Metric::kFlops};
  std::map<std::string, double> found;
  for (const auto metric : kMetrics) {
    if (const auto measured = value(metric)) {
      found.emplace(api::toString(metric), *measured);
    }
  }
  return found;
}

std::optional<nlohmann::json> MetricsFile::effective() const {
  if (!parsed_.is_object()) {
    return std::nullopt;
  }
  const auto found = parsed_.find(kEffectiveKey);
  if (found == parsed_.end() || !found->is_object()) {
    return std::nullopt;
  }
  return *found;
}

std::map<std::string, double> readMetrics(std::string_view metricsFile) {
  return MetricsFile(metricsFile).values();
}

}  // namespace autotune::tuning
