#include "tuning/trial_metrics.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace autotune::tuning {
namespace {

constexpr std::string_view kDeepSpeedMetrics =
    R"({"fwd": 1200.5, "bwd": 2400.25, "step": 300.0, "latency": 3900.75,
        "FLOPS_per_gpu": 12500000000000.0, "throughput": 87.3017, "rank": 0})";

TEST(TrialMetrics, EachSearchMetricReadsItsOwnKey) {
  EXPECT_DOUBLE_EQ(*MetricsFile(kDeepSpeedMetrics).value(api::Metric::kThroughput), 87.3017);
  EXPECT_DOUBLE_EQ(*MetricsFile(kDeepSpeedMetrics).value(api::Metric::kLatency), 3900.75);
}

// DeepSpeed's autotuner read "flops", a key its engine never writes (defect B4).
TEST(TrialMetrics, FlopsComesFromFlopsPerGpu) {
  EXPECT_EQ(metricsFileKey(api::Metric::kFlops), "FLOPS_per_gpu");
  EXPECT_DOUBLE_EQ(*MetricsFile(kDeepSpeedMetrics).value(api::Metric::kFlops), 1.25e13);
}

TEST(TrialMetrics, GarbageIsNotAMetric) {
  const auto result =
      MetricsFile("Traceback (most recent call last):").value(api::Metric::kThroughput);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), "the metrics file is not a JSON object");
}

TEST(TrialMetrics, AMissingKeyIsNamed) {
  const auto result = MetricsFile(R"({"throughput": 1.0})").value(api::Metric::kFlops);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error(), "the metrics file has no \"FLOPS_per_gpu\"");
}

TEST(TrialMetrics, ZeroNegativeOrNonNumericValuesAreRejected) {
  EXPECT_FALSE(MetricsFile(R"({"throughput": 0})").value(api::Metric::kThroughput));
  EXPECT_FALSE(MetricsFile(R"({"throughput": -3.5})").value(api::Metric::kThroughput));
  EXPECT_FALSE(MetricsFile(R"({"throughput": "fast"})").value(api::Metric::kThroughput));
  EXPECT_FALSE(MetricsFile(R"({"throughput": null})").value(api::Metric::kThroughput));
}

// A record keeps every search metric the file held, by the spec's names, and nothing else in it.
TEST(TrialMetrics, AllMetricsAreReadByTheSpecsNames) {
  const std::map<std::string, double> expected{
      {"flops", 1.25e13}, {"latency", 3900.75}, {"throughput", 87.3017}};
  EXPECT_EQ(readMetrics(kDeepSpeedMetrics), expected);
  const std::map<std::string, double> throughputOnly{{"throughput", 2.5}};
  EXPECT_EQ(readMetrics(R"({"throughput": 2.5, "latency": -1, "FLOPS_per_gpu": "many"})"),
            throughputOnly);
  EXPECT_TRUE(readMetrics("[87.3]").empty());
  EXPECT_TRUE(readMetrics(std::string(4096, '\xFF')).empty());
}

}  // namespace
}  // namespace autotune::tuning
