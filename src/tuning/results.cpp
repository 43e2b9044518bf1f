#include "tuning/results.h"

#include <algorithm>
#include <array>
#include <cstdio>

#include "tuning/naming.h"

namespace autotune::tuning {

std::string formatMetricValue(double value) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.6g", value);
  return text.data();
}

std::vector<api::SpaceSummary> summarizeSpaces(const std::vector<api::TrialRecord>& finished,
                                               api::Metric metric) {
  std::vector<api::SpaceSummary> spaces;
  for (const auto& record : finished) {
    if (record.space == kProfileTrialName) {
      continue;
    }
    auto row = std::find_if(spaces.begin(), spaces.end(),
                            [&](const auto& s) { return s.name == record.space; });
    if (row == spaces.end()) {
      spaces.push_back({record.space, 0, 0, ""});
      row = std::prev(spaces.end());
    }
    ++row->trials;
    if (record.outcome != api::Outcome::kSucceeded || !record.value) {
      continue;
    }
    const bool better =
        row->bestTrial.empty() || (api::higherIsBetter(metric) ? *record.value > row->bestValue
                                                               : *record.value < row->bestValue);
    if (better) {
      row->bestValue = *record.value;
      row->bestTrial = record.name;
    }
  }
  return spaces;
}

std::string summaryTable(const std::vector<api::SpaceSummary>& spaces, api::Metric metric,
                         double elapsedSeconds) {
  std::vector<std::array<std::string, 4>> rows = {
      {"tuning_space", "num_experiments", "best_metric_val", "best_exp_name"}};
  api::SpaceSummary global{"global", 0, 0, ""};
  for (const auto& space : spaces) {
    rows.push_back({space.name, std::to_string(space.trials),
                    space.bestTrial.empty() ? "0" : formatMetricValue(space.bestValue),
                    space.bestTrial});
    global.trials += space.trials;
    const bool better = api::higherIsBetter(metric) ? space.bestValue > global.bestValue
                                                    : space.bestValue < global.bestValue;
    if (!space.bestTrial.empty() && (global.bestTrial.empty() || better)) {
      global.bestValue = space.bestValue;
      global.bestTrial = space.bestTrial;
    }
  }
  rows.push_back({"global", std::to_string(global.trials),
                  global.bestTrial.empty() ? "0" : formatMetricValue(global.bestValue),
                  global.bestTrial});

  std::array<std::size_t, 4> widths{};
  for (const auto& row : rows) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      widths[c] = std::max(widths[c], row[c].size());
    }
  }
  std::string table;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < rows[r].size(); ++c) {
      table += "| " + rows[r][c] + std::string(widths[c] - rows[r][c].size(), ' ') + " ";
    }
    table += "|\n";
    if (r == 0) {
      for (const std::size_t width : widths) {
        table += "|" + std::string(width + 2, '-');
      }
      table += "|\n";
    }
  }
  const auto seconds = static_cast<long long>(elapsedSeconds);
  std::array<char, 64> elapsed{};
  std::snprintf(elapsed.data(), elapsed.size(), "%lld:%02lld:%02lld", seconds / 3600,
                (seconds / 60) % 60, seconds % 60);
  table += "\nTuning completed in " + std::string(elapsed.data()) +
           ". Total number of experiments: " + std::to_string(global.trials) + ".\n";
  return table;
}

std::optional<double> baselineValue(const std::vector<api::TrialRecord>& finished) {
  for (const auto& record : finished) {
    if (record.space != kProfileTrialName && record.outcome == api::Outcome::kSucceeded &&
        record.value) {
      return record.value;
    }
  }
  return std::nullopt;
}

api::BestTrial bestTrial(const Trial& trial, double value, api::Metric metric,
                         std::optional<double> baseline) {
  api::BestTrial best;
  best.trial = trial.name;
  best.metric = metric;
  best.value = value;
  best.zeroStage = trial.stage;
  best.microBatchSize = trial.microBatch;
  best.gradientAccumulationSteps = trial.gradientAccumulation;
  if (baseline && *baseline > 0 && value > 0) {
    best.speedup = api::higherIsBetter(metric) ? value / *baseline : *baseline / value;
  }
  return best;
}

nlohmann::json optimalConfig(const Trial& best) {
  nlohmann::json config = best.config;
  config.erase("autotuning");
  return config;
}

nlohmann::json mergePatch(const nlohmann::json& from, const nlohmann::json& to) {
  if (!from.is_object() || !to.is_object()) {
    return to;
  }
  nlohmann::json patch = nlohmann::json::object();
  for (const auto& [key, value] : from.items()) {
    if (!to.contains(key)) {
      patch[key] = nullptr;
    }
  }
  for (const auto& [key, value] : to.items()) {
    const auto before = from.find(key);
    if (before == from.end() || !before->is_object() || !value.is_object()) {
      if (before == from.end() || *before != value) {
        patch[key] = value;
      }
    } else if (auto nested = mergePatch(*before, value); !nested.empty()) {
      patch[key] = std::move(nested);
    }
  }
  return patch;
}

}  // namespace autotune::tuning
