#include "tuning/protocol.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <utility>

#include "api/deepspeed_keys.h"
#include "api/placeholders.h"
#include "api/shell_command.h"
#include "api/text.h"
#include "tuning/effective_values.h"
#include "tuning/naming.h"
#include "tuning/trial_metrics.h"

namespace autotune::tuning {
namespace {

// Every finished trial keeps its reason in status.results, up to 1,000 of them in one object: a
// reason takes at most this many bytes there, as a JSON string.
constexpr std::size_t kReasonBytes = 256;

// The name a shell script of a trial runs under ($0) when its command gives none.
constexpr std::string_view kScriptName = "autotune-trial";

// Texts that PyTorch, CUDA, cuBLAS and ROCm print when a device allocation fails.
constexpr std::array<std::string_view, 5> kOutOfMemoryTexts = {
    "CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory",
    "CUBLAS_STATUS_ALLOC_FAILED", "HIP out of memory"};

// A byte count a trial wrote: any JSON number, held within 0 and int64's largest before it is
// converted, since converting a double beyond that range (1e300) is undefined.
std::int64_t byteCount(const nlohmann::json& number) {
  if (number.is_number_unsigned()) {
    return static_cast<std::int64_t>(std::min<std::uint64_t>(
        number.get<std::uint64_t>(), std::numeric_limits<std::int64_t>::max()));
  }
  if (number.is_number_integer()) {
    return std::max<std::int64_t>(0, number.get<std::int64_t>());
  }
  const double bytes = number.get<double>();
  // 2^63, the first double past int64's range.
  constexpr double kBeyond = 9223372036854775808.0;
  if (std::isnan(bytes) || bytes <= 0) {
    return 0;
  }
  return bytes >= kBeyond ? std::numeric_limits<std::int64_t>::max()
                          : static_cast<std::int64_t>(bytes);
}

std::optional<api::MeasuredModel> readModelInfo(const std::string& text) {
  const nlohmann::json info = nlohmann::json::parse(text, nullptr, false);
  if (info.is_discarded() || !info.is_object() || !info.contains("num_params") ||
      !info["num_params"].is_number_integer() || info["num_params"].get<std::int64_t>() <= 0) {
    return std::nullopt;
  }
  api::MeasuredModel measured;
  measured.numParameters = info["num_params"].get<std::int64_t>();
  const auto activation = info.find("activation_mem_per_gpu");
  if (activation != info.end() && activation->is_number()) {
    measured.activationMemoryPerSample = byteCount(*activation);
  }
  return measured;
}

// An outcome without a value, a measured model or metrics.
Classification ended(api::Outcome outcome, std::string reason) {
  Classification classified;
  classified.outcome = outcome;
  classified.reason = std::move(reason);
  return classified;
}

Classification exitedCleanly(const TrialExit& exit, api::Metric metric, bool profilingTrial) {
  if (!exit.metrics) {
    return ended(api::Outcome::kMetricsUnavailable, "exited 0 without writing its metrics file");
  }
  if (profilingTrial) {
    Classification profiled = ended(api::Outcome::kSucceeded, "");
    profiled.measured = readModelInfo(*exit.metrics);
    if (!profiled.measured) {
      return ended(api::Outcome::kMetricsUnavailable,
                   "the model info file has no positive num_params");
    }
    return profiled;
  }
  const MetricsFile file(*exit.metrics);
  auto value = file.value(metric);
  if (!value) {
    return ended(api::Outcome::kMetricsUnavailable, value.error());
  }
  Classification succeeded = ended(api::Outcome::kSucceeded, "");
  succeeded.value = *value;
  succeeded.metrics = file.values();
  succeeded.effective = file.effective();
  return succeeded;
}

// The primary container's command and args as the template gives them; nothing without one.
std::optional<std::vector<std::string>> templateCommand(const api::Spec& spec) {
  const auto container = primaryContainer(spec);
  if (!container) {
    return std::nullopt;
  }
  std::vector<std::string> words;
  for (const auto* field : {"command", "args"}) {
    for (const auto& word : container->container.value(field, nlohmann::json::array())) {
      words.push_back(word.is_string() ? word.get<std::string>() : word.dump());
    }
  }
  return words;
}

// The flags whose value the trial's config path replaces.
bool isConfigFlag(std::string_view word) {
  return word == "--deepspeed" || word == "--deepspeed_config";
}

// The value of a config key given as a dotted path, or else the first key of that name found
// anywhere in the config (as DeepSpeed's autotuner looks keys up).
const nlohmann::json* findKey(const nlohmann::json& config, const std::string& key) {
  if (const auto* value = atDottedPath(config, key)) {
    return value;
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

// What a placeholder becomes in a trial, or nothing for a key the config lacks: validation rejects
// those, and one that got here anyway is left visible.
std::optional<std::string> replacementFor(std::string_view key, const nlohmann::json& config,
                                          std::string_view jobName, const std::string& trialName) {
  if (key == api::kTrialPlaceholder) {
    return trialName;
  }
  if (key == api::kJobPlaceholder) {
    return std::string(jobName);
  }
  if (std::ranges::find(api::kRendezvousVariables, key) != api::kRendezvousVariables.end()) {
    return "$(" + std::string(key) + ")";  // each Pod of the trial has its own
  }
  if (const auto* value = findKey(config, std::string(key))) {
    return value->is_string() ? value->get<std::string>() : value->dump();
  }
  return std::nullopt;
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

// The line of Hugging Face's refusal of a config its Trainer flags contradict ("- ds
// train_micro_batch_size_per_gpu=14 vs hf per_device_train_batch_size=1"), if the message holds
// that refusal.
std::optional<std::string> trainerMismatch(std::string_view message) {
  constexpr std::string_view kRefusal = "mismatch TrainingArguments values";
  constexpr std::string_view kLine = "- ds ";
  if (message.find(kRefusal) == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view first = "a DeepSpeed value";
  if (const auto line = message.find(kLine); line != std::string_view::npos) {
    first = message.substr(line + kLine.size());
    first = first.substr(0, first.find('\n'));
  }
  const std::string contradiction =
      "the Trainer's flags contradict the trial's config (" + std::string(first) + "): ";
  // The Trainer calculates the global batch from the GPUs the trial sees.
  if (first.starts_with("train_batch_size=")) {
    return contradiction + "the trial had another number of GPUs than " +
           "spec.resources.gpusPerTrial, or the Trainer another gradient accumulation";
  }
  return contradiction + "map the flag in spec.argMappings, and let the command pass it";
}

// Why metrics of a success show another global batch than the trial asked for, if they do: the
// engine writes throughput as train_batch_size × 10^6 / latency.
std::optional<std::string> ranAnotherBatch(const std::map<std::string, double>& metrics,
                                           int asked) {
  const auto throughput = metrics.find("throughput");
  const auto latency = metrics.find("latency");
  if (throughput == metrics.end() || latency == metrics.end() || !(latency->second > 0)) {
    return std::nullopt;
  }
  const double ran = throughput->second * latency->second / 1e6;
  // Both numbers are rounded in the metrics file. Only a whole number of samples is a batch the
  // engine ran: metrics a script wrote in units of its own imply none, and tell nothing.
  const double whole = std::round(ran);
  const bool aBatch = std::isfinite(ran) && whole >= 1 && std::abs(ran - whole) <= 0.01 * whole;
  if (!aBatch || std::abs(ran - asked) <= std::max(0.5, 0.01 * asked)) {
    return std::nullopt;
  }
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.0f", ran);
  return "the engine ran a global batch of " + std::string(text.data()) +
         " (throughput x latency), not the " + std::to_string(asked) +
         " the trial's config asks (micro-batch x gradient accumulation x data-parallel ranks): " +
         std::string(kNotAppliedAdvice) + ", or the trial had another number of GPUs than " +
         "spec.resources.gpusPerTrial";
}

// How the trial ended, with a reason of any length.
Classification classifyUnbounded(const TrialExit& exit, api::Metric metric, bool profilingTrial) {
  if (exit.timedOut) {
    return ended(api::Outcome::kTimedOut, "ran longer than spec.trialTimeout");
  }
  if (exit.oomKilled) {
    return ended(api::Outcome::kOOM, "OOMKilled");
  }
  if (exit.exitCode == 0) {
    Classification clean = exitedCleanly(exit, metric, profilingTrial);
    if (clean.outcome == api::Outcome::kSucceeded || !mentionsOutOfMemory(exit.message)) {
      return clean;
    }
  }
  if (mentionsOutOfMemory(exit.message)) {
    return ended(api::Outcome::kOOM, tail(exit.message, kReasonBytes));
  }
  if (auto mismatch = trainerMismatch(exit.message)) {
    return ended(api::Outcome::kConfigNotApplied, *mismatch);
  }
  std::string reason = exit.signal ? "killed by signal " + std::to_string(*exit.signal)
                                   : "exited " + std::to_string(exit.exitCode.value_or(-1));
  const std::string message = tail(exit.message, kReasonBytes - reason.size() - 2);
  if (!message.empty()) {
    reason += ": " + message;
  }
  return ended(api::Outcome::kFailed, reason);
}

}  // namespace

std::optional<PrimaryContainer> primaryContainer(const api::Spec& spec) {
  const auto containers = spec.podTemplate.value("spec", nlohmann::json::object())
                              .value("containers", nlohmann::json::array());
  for (std::size_t i = 0; i < containers.size(); ++i) {
    if (spec.primaryContainer.empty() || containers[i].value("name", "") == spec.primaryContainer) {
      return PrimaryContainer{i, containers[i]};
    }
  }
  return std::nullopt;
}

nlohmann::json launchConfig(const api::Spec& spec, const Trial& trial, const TrialFiles& files) {
  nlohmann::json config = trial.config;
  const nlohmann::json user =
      spec.deepspeedConfig.value(api::kAutotuningKey, nlohmann::json::object());
  nlohmann::json autotuning = {{api::kEnabledKey, true}};
  if (trial.profile) {
    autotuning[api::kModelInfoKey] = {{"profile", true}};
    autotuning[api::kModelInfoPathKey] = files.metrics;
  } else {
    autotuning[api::kMetricPathKey] = files.metrics;
    const int start = user.value(api::kStartProfileStepKey, api::kDefaultStartProfileStep);
    const int end =
        user.value(api::kEndProfileStepKey,
                   std::max(api::kDefaultEndProfileStep,
                            start + api::kDefaultEndProfileStep - api::kDefaultStartProfileStep));
    autotuning[api::kStartProfileStepKey] = start;
    autotuning[api::kEndProfileStepKey] = end;
  }
  config[api::kAutotuningKey] = std::move(autotuning);
  return config;
}

std::vector<std::pair<std::string, std::string>> protocolEnvironment(std::string_view jobName,
                                                                     const Trial& trial,
                                                                     const TrialFiles& files) {
  return {{std::string(kJobVariable), std::string(jobName)},
          {std::string(kTrialVariable), trial.name},
          {std::string(kConfigVariable), files.config},
          {std::string(kMetricsVariable), files.metrics}};
}

Classification classify(const TrialExit& exit, api::Metric metric, bool profilingTrial) {
  Classification classified = classifyUnbounded(exit, metric, profilingTrial);
  classified.reason = boundedReason(classified.reason);
  return classified;
}

std::optional<int> askedGlobalBatch(const api::Spec& spec, std::string_view trialName) {
  const auto named = coordinatesFromName(trialName);
  const auto ranks = spec.resources.dataParallelRanks();
  if (!named || !ranks) {
    return std::nullopt;
  }
  const std::int64_t batch = std::int64_t{named->microBatch} * named->gradientAccumulation * *ranks;
  return batch > std::numeric_limits<int>::max() ? std::nullopt
                                                 : std::optional<int>(static_cast<int>(batch));
}

RecordedExit recordExit(std::string_view name, std::string_view space, const TrialExit& exit,
                        const api::Spec& spec, bool profilingTrial, std::string_view startTime,
                        double seconds) {
  Classification classified = classify(exit, spec.search.metric, profilingTrial);
  std::optional<bool> verified;
  if (classified.outcome == api::Outcome::kSucceeded && !profilingTrial) {
    const auto asked = askedGlobalBatch(spec, name);
    std::optional<std::string> notApplied =
        asked ? ranAnotherBatch(classified.metrics, *asked) : std::nullopt;
    EffectiveCheck check;
    if (!notApplied && classified.effective) {
      check = checkEffective(spec, name, *classified.effective);
      notApplied = check.contradiction;
    }
    if (notApplied) {
      classified = ended(api::Outcome::kConfigNotApplied, boundedReason(*notApplied));
    } else {
      verified = check.checked > 0;
    }
  }
  api::TrialRecord record;
  record.name = name;
  record.space = space;
  record.outcome = classified.outcome;
  record.value = classified.value;
  record.reason = std::move(classified.reason);
  record.startTime = startTime;
  record.durationSeconds = seconds;
  record.metrics = std::move(classified.metrics);
  record.configVerified = verified;
  return {std::move(record), classified.measured};
}

std::string boundedReason(std::string_view reason) {
  const std::string line = api::oneLine(reason);
  std::size_t encoded = 0;
  std::size_t fits = 0;
  for (const char c : line) {
    encoded += c == '"' || c == '\\' ? 2 : 1;
    if (encoded > kReasonBytes) {
      break;
    }
    ++fits;
  }
  return api::headOf(line, fits);
}

bool mentionsOutOfMemory(std::string_view message) {
  return std::ranges::any_of(kOutOfMemoryTexts, [&](std::string_view text) {
    return message.find(text) != std::string_view::npos;
  });
}

std::string tail(std::string_view text, std::size_t maxBytes) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  if (text.size() <= maxBytes) {
    return api::validUtf8(text);
  }
  const bool startsAtLine = text[text.size() - maxBytes - 1] == '\n';
  std::string last = api::tailOf(text, maxBytes);
  const auto newline = last.find('\n');
  if (!startsAtLine && newline != std::string::npos && newline + 1 < last.size()) {
    last.erase(0, newline + 1);
  }
  return last;
}

std::string substitutePlaceholders(std::string_view text, const Trial& trial,
                                   std::string_view jobName) {
  std::string filled;
  std::size_t copied = 0;
  for (const api::Placeholder& placeholder : api::scanPlaceholders(text).placeholders) {
    const std::string_view whole = text.substr(placeholder.position, placeholder.length);
    filled += text.substr(copied, placeholder.position - copied);
    filled += placeholder.escape
                  ? std::string("${")
                  : replacementFor(placeholder.key, trial.config, jobName, trial.name)
                        .value_or(std::string(whole));
    copied = placeholder.position + placeholder.length;
  }
  filled += text.substr(copied);
  return filled;
}

std::vector<std::string> trialCommand(const api::Spec& spec, std::string_view jobName,
                                      const Trial& trial, std::string_view configPath) {
  auto words = templateCommand(spec);
  if (!words) {
    return {};
  }
  std::vector<std::string> argv;
  for (const auto& word : *words) {
    argv.push_back(substitutePlaceholders(word, trial, jobName));
  }
  for (std::size_t i = 0; i + 1 < argv.size(); ++i) {
    if (isConfigFlag(argv[i])) {
      argv[i + 1] = configPath;
    }
  }
  // The words the mapped flags are set among: every word, or for a shell's script its positional
  // parameters, after the name it runs under ($0), given when the command gives none.
  std::size_t fixed = 0;
  if (const auto script = api::shellScriptIndex(argv); script && !spec.argMappings.empty()) {
    if (argv.size() == *script + 1) {
      argv.emplace_back(kScriptName);
    }
    fixed = *script + 2;
  }
  std::vector<std::string> arguments(
      std::make_move_iterator(argv.begin() + static_cast<std::ptrdiff_t>(fixed)),
      std::make_move_iterator(argv.end()));
  argv.resize(fixed);
  for (const auto& [key, flag] : spec.argMappings) {
    const auto* value = findKey(trial.config, key);
    if (value != nullptr && !(value->is_string() && value->get<std::string>() == "auto")) {
      setFlag(arguments, flag, value->is_string() ? value->get<std::string>() : value->dump());
    }
  }
  argv.insert(argv.end(), std::make_move_iterator(arguments.begin()),
              std::make_move_iterator(arguments.end()));
  return argv;
}

std::string howTheConfigIsPassed(const api::Spec& spec) {
  const std::vector<std::string> argv = templateCommand(spec).value_or(std::vector<std::string>{});
  const auto flag = std::ranges::find_if(argv, isConfigFlag);
  std::string how = flag != argv.end() && flag + 1 != argv.end()
                        ? "the command gets the trial's config as the file after " + *flag
                        : "the command gets the trial's config only as $" +
                              std::string(kConfigVariable) +
                              " (it has no --deepspeed or --deepspeed_config)";
  for (const auto& [key, mapped] : spec.argMappings) {
    how.append(", ").append(key).append(" as ").append(mapped);
  }
  if (!spec.argMappings.empty() && api::shellScriptIndex(argv)) {
    how += " (appended after the shell script: it must pass them on with \"$@\")";
  }
  return how;
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
