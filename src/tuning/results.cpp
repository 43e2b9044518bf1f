#include "tuning/results.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>

#include "tuning/naming.h"

namespace autotune::tuning {
namespace {

std::string formatNumber(double value) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.6g", value);
  return text.data();
}

// The value of a config key given as a dotted path, or else the first key of that name found
// anywhere in the config (as DeepSpeed's autotuner looks keys up).
const nlohmann::json* findKey(const nlohmann::json& config, const std::string& key) {
  const nlohmann::json::json_pointer pointer("/" + [&] {
    std::string path = key;
    std::replace(path.begin(), path.end(), '.', '/');
    return path;
  }());
  if (config.contains(pointer)) {
    return &config.at(pointer);
  }
  if (!config.is_object()) {
    return nullptr;
  }
  if (const auto found = config.find(key); found != config.end()) {
    return &*found;
  }
  for (const auto& [name, value] : config.items()) {
    if (value.is_object()) {
      if (const auto* nested = findKey(value, key)) {
        return nested;
      }
    }
  }
  return nullptr;
}

std::string substitutePlaceholders(std::string text, const nlohmann::json& config,
                                   std::string_view jobName, const std::string& trialName) {
  std::size_t start = 0;
  while ((start = text.find("${", start)) != std::string::npos) {
    const std::size_t end = text.find('}', start);
    if (end == std::string::npos) {
      break;
    }
    const std::string key = text.substr(start + 2, end - start - 2);
    std::string replacement;
    if (key == "trial") {
      replacement = trialName;
    } else if (key == "job") {
      replacement = jobName;
    } else if (const auto* value = findKey(config, key)) {
      replacement = value->is_string() ? value->get<std::string>() : value->dump();
    } else {
      start = end + 1;  // validation rejects unknown placeholders; leave it visible
      continue;
    }
    text.replace(start, end - start + 1, replacement);
    start += replacement.size();
  }
  return text;
}

void setFlag(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag && i + 1 < argv.size()) {
      argv[i + 1] = value;
      return;
    }
    if (argv[i].starts_with(flag + "=")) {
      argv[i] = flag;
      argv[i] += "=";
      argv[i] += value;
      return;
    }
  }
  argv.push_back(flag);
  argv.push_back(value);
}

std::optional<nlohmann::json> primaryContainer(const api::Spec& spec) {
  const auto containers = spec.podTemplate.value("spec", nlohmann::json::object())
                              .value("containers", nlohmann::json::array());
  for (const auto& container : containers) {
    if (spec.primaryContainer.empty() || container.value("name", "") == spec.primaryContainer) {
      return container;
    }
  }
  return std::nullopt;
}

}  // namespace

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
                    space.bestTrial.empty() ? "0" : formatNumber(space.bestValue),
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
                  global.bestTrial.empty() ? "0" : formatNumber(global.bestValue),
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

std::vector<std::string> trialCommand(const api::Spec& spec, std::string_view jobName,
                                      const Trial& trial, std::string_view configPath) {
  const auto container = primaryContainer(spec);
  if (!container) {
    return {};
  }
  std::vector<std::string> argv;
  for (const auto* field : {"command", "args"}) {
    for (const auto& word : container->value(field, nlohmann::json::array())) {
      argv.push_back(
          substitutePlaceholders(word.get<std::string>(), trial.config, jobName, trial.name));
    }
  }
  for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--deepspeed" || argv[i] == "--deepspeed_config") {
      argv[i + 1] = configPath;
    }
  }
  for (const auto& [key, flag] : spec.argMappings) {
    const auto* value = findKey(trial.config, key);
    if (value != nullptr && !(value->is_string() && value->get<std::string>() == "auto")) {
      setFlag(argv, flag, value->is_string() ? value->get<std::string>() : value->dump());
    }
  }
  return argv;
}

std::string shellJoin(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) {
    if (!line.empty()) {
      line += ' ';
    }
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      line += word;
    } else {
      line += '\'';
      for (const char c : word) {
        line += c == '\'' ? std::string("'\\''") : std::string(1, c);
      }
      line += '\'';
    }
  }
  return line;
}

}  // namespace autotune::tuning
