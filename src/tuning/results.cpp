#include "tuning/results.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "api/codec.h"
#include "api/deepspeed_keys.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"

namespace autotune::tuning {
namespace {

using nlohmann::json;

// One compact record per line: at a thousand trials an indented file would pass 1 MiB.
std::string resultsFile(const std::vector<api::TrialRecord>& finished, const json& bestConfig,
                        const std::vector<Trial>& trials, const api::Spec& spec) {
  std::map<std::string_view, const Trial*> byName;
  for (const Trial& trial : trials) {
    byName.emplace(trial.name, &trial);
  }
  api::Status status;
  status.results = finished;
  const json encoded = api::encode(status);
  std::string text = "[";
  const char* separator = "\n";
  for (json entry : encoded["results"]) {
    const auto trial = byName.find(entry.value("name", ""));
    if (trial != byName.end()) {
      entry["configPatch"] = mergePatch(bestConfig, optimalConfig(*trial->second, spec));
    }
    text += separator + entry.dump();
    separator = ",\n";
  }
  return text + "\n]\n";
}

// One word of a multi-node launch for a shell: each $(AUTOTUNE_NODE_RANK) and the like, which
// the kubelet expands in a trial Pod, as "${AUTOTUNE_NODE_RANK}" from the node's environment,
// the rest quoted as it is.
std::string shellWord(const std::string& word) {
  std::string quoted;
  std::size_t from = 0;
  while (from < word.size()) {
    std::size_t next = std::string::npos;
    std::string_view variable;
    for (const auto name : api::kRendezvousVariables) {
      const std::size_t at = word.find("$(" + std::string(name) + ")", from);
      if (at < next) {
        next = at;
        variable = name;
      }
    }
    if (next == std::string::npos) {
      quoted += shellJoin({word.substr(from)});
      break;
    }
    if (next > from) {
      quoted += shellJoin({word.substr(from, next - from)});
    }
    quoted += "\"${" + std::string(variable) + "}\"";
    from = next + variable.size() + 3;
  }
  return quoted.empty() ? shellJoin({word}) : quoted;
}

// The command that runs the best config: on each node, for a multi-node trial.
std::string launchCommand(const api::Spec& spec, std::string_view jobName, const Trial& best,
                          const std::string& configPath) {
  const auto argv = trialCommand(spec, jobName, best, configPath);
  const int nodes = spec.resources.nodesPerTrial;
  if (nodes <= 1) {
    return shellJoin(argv);
  }
  std::string command = "# On each of " + std::to_string(nodes) + " nodes with " +
                        std::to_string(spec.resources.gpusPerNode()) +
                        " GPUs each, with AUTOTUNE_NUM_NODES=" + std::to_string(nodes) +
                        ", AUTOTUNE_NODE_RANK the node's rank (0 to " + std::to_string(nodes - 1) +
                        "), AUTOTUNE_MASTER_ADDR rank 0's address and AUTOTUNE_MASTER_PORT=" +
                        std::to_string(api::kMasterPort) + "\n";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    command += (i == 0 ? "" : " ") + shellWord(argv[i]);
  }
  return command;
}

}  // namespace

std::string configFile(const json& config) {
  // Indentation multiplies the size of a deeply nested config; past this the file stays compact.
  constexpr std::size_t kMaxIndentedConfigBytes = std::size_t{128} * 1024;
  const std::string indented = config.dump(2);
  if (indented.size() > kMaxIndentedConfigBytes) {
    return config.dump() + "\n";
  }
  return indented + "\n";
}

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

api::GpuHours gpuHoursOf(const std::vector<api::TrialRecord>& finished, int gpusPerTrial) {
  constexpr double kSecondsPerHour = 3600;
  api::GpuHours hours;
  for (const auto& record : finished) {
    const double gpuHours = record.durationSeconds * gpusPerTrial / kSecondsPerHour;
    if (!record.reusedFrom.empty()) {
      hours.saved += gpuHours;
      continue;
    }
    hours.used += gpuHours;
    hours.usedByOutcome[std::string(api::toString(record.outcome))] += gpuHours;
  }
  return hours;
}

std::string gpuHoursLine(const api::GpuHours& hours) {
  const auto figure = [](double value) {
    std::array<char, 32> text{};
    if (value >= 100) {
      std::snprintf(text.data(), text.size(), "%.0f", value);
    } else if (value >= 0.001 || value == 0) {
      std::snprintf(text.data(), text.size(), "%.3g", value);
    } else {
      return std::string("<0.001");
    }
    return std::string(text.data());
  };
  std::vector<std::string> parts;
  std::map<std::string, double> rest = hours.usedByOutcome;
  for (const auto outcome : {api::Outcome::kSucceeded, api::Outcome::kMetricsUnavailable,
                             api::Outcome::kOOM, api::Outcome::kFailed, api::Outcome::kTimedOut,
                             api::Outcome::kUnschedulable, api::Outcome::kConfigNotApplied}) {
    const auto found = rest.find(std::string(api::toString(outcome)));
    if (found != rest.end()) {
      parts.push_back(found->first + " " + figure(found->second));
      rest.erase(found);
    }
  }
  for (const auto& [outcome, value] : rest) {
    parts.push_back(outcome + " " + figure(value));
  }
  std::string line = "GPU-hours: " + figure(hours.used) + " used";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    line += (i == 0 ? " (" : ", ") + parts[i];
  }
  line += parts.empty() ? "" : ")";
  return line + ", " + figure(hours.saved) + " saved by reused results";
}

api::BestTrial bestTrial(const Trial& trial, double value, api::Metric metric,
                         std::optional<double> baseline, const api::Resources& resources) {
  api::BestTrial best;
  best.trial = trial.name;
  best.metric = metric;
  best.value = value;
  best.zeroStage = trial.stage;
  best.microBatchSize = trial.microBatch;
  best.gradientAccumulationSteps = trial.gradientAccumulation;
  best.nodes = resources.nodesPerTrial;
  best.gpus = resources.gpusPerTrial;
  if (baseline && *baseline > 0 && value > 0) {
    best.speedup = api::higherIsBetter(metric) ? value / *baseline : *baseline / value;
  }
  return best;
}

nlohmann::json optimalConfig(const Trial& best, const api::Spec& spec) {
  nlohmann::json config = best.config;
  config.erase(api::kAutotuningKey);
  // DeepSpeed derives the global batch from the other two and the GPUs it runs on: the one the
  // trial was given would hold the config to the trial's GPU count. The user's own value, a
  // fixed batch or "auto", stays.
  if (!spec.deepspeedConfig.contains(api::kTrainBatchKey)) {
    config.erase(api::kTrainBatchKey);
  }
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

Report report(const api::Spec& spec, std::string_view jobName,
              const std::vector<api::TrialRecord>& finished, const Trial& best,
              const std::vector<Trial>& trials, double elapsedSeconds,
              const std::string& configPath) {
  const json bestConfig = optimalConfig(best, spec);
  return {configFile(bestConfig), launchCommand(spec, jobName, best, configPath),
          summaryTable(summarizeSpaces(finished, spec.search.metric), spec.search.metric,
                       elapsedSeconds),
          resultsFile(finished, bestConfig, trials, spec)};
}

}  // namespace autotune::tuning
