#include "api/job.h"

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace autotune::api {
namespace {

// Each enum's API spelling, in declaration order; one table serves both directions.
template <typename Enum, std::size_t N>
using Spellings = std::array<std::pair<Enum, std::string_view>, N>;

constexpr Spellings<Strategy, 4> kStrategies{{
    {Strategy::kDeepSpeed, "deepspeed"},
    {Strategy::kGrid, "grid"},
    {Strategy::kRandom, "random"},
    {Strategy::kModelBased, "model-based"},
}};

constexpr Spellings<Metric, 3> kMetrics{{
    {Metric::kThroughput, "throughput"},
    {Metric::kLatency, "latency"},
    {Metric::kFlops, "flops"},
}};

constexpr Spellings<Cleanup, 2> kCleanups{{
    {Cleanup::kDeleteFinished, "DeleteFinished"},
    {Cleanup::kKeep, "Keep"},
}};

constexpr Spellings<Reuse, 2> kReuses{{
    {Reuse::kEnabled, "Enabled"},
    {Reuse::kDisabled, "Disabled"},
}};

constexpr Spellings<Phase, 5> kPhases{{
    {Phase::kPending, "Pending"},
    {Phase::kProfiling, "Profiling"},
    {Phase::kRunning, "Running"},
    {Phase::kSucceeded, "Succeeded"},
    {Phase::kFailed, "Failed"},
}};

constexpr Spellings<Outcome, 7> kOutcomes{{
    {Outcome::kSucceeded, "Succeeded"},
    {Outcome::kMetricsUnavailable, "MetricsUnavailable"},
    {Outcome::kOOM, "OOM"},
    {Outcome::kFailed, "Failed"},
    {Outcome::kTimedOut, "TimedOut"},
    {Outcome::kUnschedulable, "Unschedulable"},
    {Outcome::kConfigNotApplied, "ConfigNotApplied"},
}};

template <typename Enum, std::size_t N>
std::string_view spell(const Spellings<Enum, N>& table, Enum value) {
  for (const auto& [candidate, text] : table) {
    if (candidate == value) {
      return text;
    }
  }
  return "";
}

template <typename Enum, std::size_t N>
std::optional<Enum> lookUp(const Spellings<Enum, N>& table, std::string_view text) {
  for (const auto& [value, candidate] : table) {
    if (candidate == text) {
      return value;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view toString(Strategy strategy) { return spell(kStrategies, strategy); }
std::string_view toString(Metric metric) { return spell(kMetrics, metric); }
std::string_view toString(Cleanup cleanup) { return spell(kCleanups, cleanup); }
std::string_view toString(Reuse reuse) { return spell(kReuses, reuse); }
std::string_view toString(Phase phase) { return spell(kPhases, phase); }
std::string_view toString(Outcome outcome) { return spell(kOutcomes, outcome); }

std::optional<Strategy> parseStrategy(std::string_view text) { return lookUp(kStrategies, text); }
std::optional<Metric> parseMetric(std::string_view text) { return lookUp(kMetrics, text); }
std::optional<Cleanup> parseCleanup(std::string_view text) { return lookUp(kCleanups, text); }
std::optional<Reuse> parseReuse(std::string_view text) { return lookUp(kReuses, text); }
std::optional<Phase> parsePhase(std::string_view text) { return lookUp(kPhases, text); }
std::optional<Outcome> parseOutcome(std::string_view text) { return lookUp(kOutcomes, text); }

const ModelSearch* primarySearch(const Spec& spec, const Status& status) {
  const ModelSearch* primary = nullptr;
  const bool everyModel = !spec.gpuModels.empty() && spec.gpuModels.front() == kAllGpuModels;
  const bool higher = higherIsBetter(spec.search.metric);
  for (const auto& search : status.gpuModels) {
    if (search.phase != Phase::kSucceeded || !search.best || !search.best->config) {
      continue;
    }
    if (primary == nullptr) {
      primary = &search;
      if (!everyModel) {
        break;
      }
    } else if (higher ? search.best->value > primary->best->value
                      : search.best->value < primary->best->value) {
      primary = &search;
    }
  }
  return primary;
}

bool searchesPerModel(const Spec& spec) {
  return spec.gpuModels.size() > 1 ||
         (spec.gpuModels.size() == 1 && spec.gpuModels.front() == kAllGpuModels);
}

}  // namespace autotune::api
