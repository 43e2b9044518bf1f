// validate()'s checks of the DeepSpeed config: its size, its tuning syntax, the values the engine
// reads, tuned keys DeepSpeed does not read, a fixed global batch and the keys argMappings name.

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/deepspeed_config_keys.h"
#include "api/deepspeed_keys.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/tuning_syntax.h"
#include "api/validation.h"
#include "api/validation_checks.h"

namespace autotune::api {
namespace {

using checks::fail;
using checks::isAuto;
using checks::isPositiveInteger;
using checks::kConfigPath;
using fields::fieldPath;
using fields::findMember;
using fields::itemPath;
using nlohmann::json;

// --- the values the engine reads ---

template <typename Check>
void checkCandidates(const json& list, const std::string& path, FieldErrors& errors, Check check) {
  if (list.empty()) {
    fail(errors, path, checks::kEmptyCandidates);
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    check(list[i], itemPath(path, i), errors);
  }
}

// Sections whose values the engine reads are objects, or lists of objects as candidates (each
// item is checked on its own); zero_optimization is one object, since each trial sets its stage.
void checkSection(const json& value, const std::string& keyPath, const std::string& path,
                  FieldErrors& errors) {
  if (value.is_object() || (value.is_array() && keyPath != kZeroKey)) {
    return;
  }
  fail(errors, path,
       value.is_array() ? "must be an object, not a list: put the candidates inside it"
                        : "must be an object");
}

void checkPrecisionFlag(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_boolean() && !isAuto(value)) {
    fail(errors, path, R"(must be true, false or "auto")");
  }
}

void checkOffloadDevice(const json& value, const std::string& path, FieldErrors& errors) {
  const bool known = value.is_string() && (value == "none" || value == "cpu" || value == "nvme");
  if (!known) {
    fail(errors, path, "must be one of none, cpu, nvme");
  }
}

void checkBoolean(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_boolean()) {
    fail(errors, path, "must be true or false");
  }
}

void checkBucketSize(const json& value, const std::string& path, FieldErrors& errors) {
  if (!isAuto(value) && !(value.is_number() && value.get<double>() >= 0)) {
    fail(errors, path, R"(must be "auto" or a number of elements, at least 0)");
  }
}

using ValueCheck = void (*)(const json&, const std::string&, FieldErrors&);

struct ValueRule {
  ValueCheck check;
  bool listsAreCandidates;  // else the check reads lists itself
};

// The config keys whose values the engine reads, and how each must look.
const std::map<std::string, ValueRule, std::less<>>& valueRules() {
  static const std::map<std::string, ValueRule, std::less<>> rules = {
      {std::string(kZeroStagePath), {checks::checkStages, false}},
      {std::string(kMicroBatchKey), {checks::checkBatchChoice, false}},
      {std::string(kGradientAccumulationKey), {checks::checkBatchChoice, false}},
      {std::string(kTrainBatchKey), {checks::checkTrainBatch, false}},
      {"fp16.enabled", {checkPrecisionFlag, true}},
      {"bf16.enabled", {checkPrecisionFlag, true}},
      {"bfloat16.enabled", {checkPrecisionFlag, true}},
      {"zero_optimization.offload_optimizer.device", {checkOffloadDevice, true}},
      {"zero_optimization.offload_param.device", {checkOffloadDevice, true}},
      {std::string(kForceDeepSpeedCpuOptimizerKey), {checkBoolean, true}},
      {"zero_optimization.reduce_bucket_size", {checkBucketSize, true}},
      {"zero_optimization.allgather_bucket_size", {checkBucketSize, true}},
      {"zero_optimization.stage3_prefetch_bucket_size", {checkBucketSize, true}},
      {"zero_optimization.stage3_param_persistence_threshold", {checkBucketSize, true}},
      {"zero_optimization.stage3_max_live_parameters", {checkBucketSize, true}},
      {"zero_optimization.stage3_max_reuse_distance", {checkBucketSize, true}},
      {"zero_optimization.sub_group_size", {checkBucketSize, true}},
  };
  return rules;
}

bool isReadSection(std::string_view keyPath) {
  return keyPath == kFp16Key || keyPath == kBf16Key || keyPath == kBfloat16Key ||
         keyPath == kZeroKey || keyPath == kOptimizerKey ||
         keyPath == "zero_optimization.offload_optimizer" ||
         keyPath == "zero_optimization.offload_param";
}

// Walks the config; keyPath is the dotted config key ("zero_optimization.stage"), path the field
// path for errors, which also carries list indices.
void checkConfigValue(const json& value, const std::string& keyPath, const std::string& path,
                      FieldErrors& errors) {
  const auto& rules = valueRules();
  if (const auto rule = rules.find(keyPath); rule != rules.end()) {
    if (value.is_array() && rule->second.listsAreCandidates) {
      checkCandidates(value, path, errors, rule->second.check);
    } else {
      rule->second.check(value, path, errors);
    }
    return;
  }
  if (keyPath == kAutotuningKey) {
    return;  // DeepSpeed's autotuning section: read and checked with the spec it supplies
  }
  if (isReadSection(keyPath)) {
    checkSection(value, keyPath, path, errors);
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      checkConfigValue(child, fieldPath(keyPath, key), fieldPath(path, key), errors);
    }
  } else if (value.is_array() && !isValueList(keyPath, value)) {
    if (value.empty()) {
      fail(errors, path, checks::kEmptyCandidates);
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
      checkConfigValue(value[i], keyPath, itemPath(path, i), errors);
    }
  }
}

// --- a fixed global batch ---

std::string dividesReason(int batchPerReplica) {
  return "must divide train_batch_size ÷ data-parallel size (" + std::to_string(batchPerReplica) +
         ")";
}

bool anyDivisorWithin(int number, int lowest, int highest) {
  for (int small = 1; small <= number / small; ++small) {
    if (number % small != 0) {
      continue;
    }
    for (const int divisor : {small, number / small}) {
      if (divisor >= lowest && divisor <= highest) {
        return true;
      }
    }
  }
  return false;
}

// The batch keys the user set must reach the fixed batch per data-parallel rank. They are read as
// written rather than through tuningSyntaxOf, so that an error names the list item it is about,
// even in a list that breaks the syntax elsewhere.
void checkBatchKeysReach(const Spec& spec, int perReplica, FieldErrors& errors) {
  const Search& search = spec.search;
  const std::string gasPath = fieldPath(kConfigPath, kGradientAccumulationKey);
  const json* accumulation = findMember(spec.deepspeedConfig, kGradientAccumulationKey);
  std::optional<int> fixedAccumulation;
  if (accumulation != nullptr && accumulation->is_array()) {
    fail(errors, gasPath,
         "follows from the micro-batch when train_batch_size is a number; list micro-batch sizes "
         "instead");
  } else if (accumulation != nullptr && isPositiveInteger(*accumulation)) {
    fixedAccumulation = accumulation->get<int>();
    if (perReplica % *fixedAccumulation != 0) {
      fail(errors, gasPath, dividesReason(perReplica));
      return;
    }
  }
  const std::string microPath = fieldPath(kConfigPath, kMicroBatchKey);
  const json* micro = findMember(spec.deepspeedConfig, kMicroBatchKey);
  if (micro != nullptr && isPositiveInteger(*micro)) {
    const int start = micro->get<int>();
    if (perReplica % start != 0) {
      fail(errors, microPath, dividesReason(perReplica));
    } else if (fixedAccumulation && start * *fixedAccumulation != perReplica) {
      fail(errors, gasPath,
           "follows from the micro-batch when train_batch_size is a number: " +
               std::to_string(perReplica) + " ÷ " + std::to_string(start) + " = " +
               std::to_string(perReplica / start) + R"(, not )" +
               std::to_string(*fixedAccumulation) + R"(; set it to "auto")");
    }
  } else if (micro != nullptr && micro->is_array()) {
    for (std::size_t i = 0; i < micro->size(); ++i) {
      const json& item = (*micro)[i];
      if (isPositiveInteger(item) && perReplica % item.get<int>() != 0) {
        fail(errors, itemPath(microPath, i), dividesReason(perReplica));
      }
    }
  } else if (fixedAccumulation) {
    const int start = perReplica / *fixedAccumulation;
    if (start < search.minMicroBatchSize || start > search.maxMicroBatchSize) {
      fail(errors, gasPath,
           "gives micro-batch " + std::to_string(start) +
               ", outside spec.search.minMicroBatchSize and maxMicroBatchSize");
    }
  } else if (!anyDivisorWithin(perReplica, search.minMicroBatchSize, search.maxMicroBatchSize)) {
    fail(errors, fieldPath(kConfigPath, kTrainBatchKey),
         "no micro-batch between spec.search.minMicroBatchSize (" +
             std::to_string(search.minMicroBatchSize) + ") and maxMicroBatchSize (" +
             std::to_string(search.maxMicroBatchSize) + ") divides it per data-parallel rank (" +
             std::to_string(perReplica) + ")");
  }
}

// --- the keys argMappings name ---

// Key names whose values are settings rather than sections, anywhere in the config.
void collectLeafKeys(const json& value, std::set<std::string>& names) {
  for (const auto& [key, child] : value.items()) {
    if (child.is_object()) {
      collectLeafKeys(child, names);
    } else {
      names.insert(key);
    }
  }
}

void collectKeyPaths(const json& value, const std::string& prefix, std::set<std::string>& paths) {
  for (const auto& [key, child] : value.items()) {
    const std::string path = fieldPath(prefix, key);
    paths.insert(path);
    if (child.is_object()) {
      collectKeyPaths(child, path, paths);
    }
  }
}

std::set<std::string> keyPathSet(const json& deepspeedConfig) {
  const std::vector<std::string> paths = configKeyPaths(deepspeedConfig);
  return {paths.begin(), paths.end()};
}

// The config's own keys, without DeepSpeed's autotuning section, which configures the tuner.
json trainingKeys(const json& deepspeedConfig) {
  json keys = deepspeedConfig;
  if (keys.is_object()) {
    keys.erase(kAutotuningKey);
  }
  return keys;
}

// --- size and depth ---

// Real DeepSpeed configs are a few KiB, four levels deep. The bounds keep what is derived from one
// within the API's limits: each trial Pod carries its config in an annotation (256 KiB for all of
// a Pod's annotations), and the output ConfigMap holds the best one (1 MiB for all its data).
constexpr std::size_t kMaxConfigBytes = std::size_t{64} * 1024;
constexpr int kMaxConfigDepth = 32;

// The field path of a value nested deeper than kMaxConfigDepth, if there is one.
std::optional<std::string> tooDeep(const json& value, const std::string& path, int depth) {
  if (depth > kMaxConfigDepth) {
    return path;
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (auto found = tooDeep(child, fieldPath(path, key), depth + 1)) {
        return found;
      }
    }
  } else if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      if (auto found = tooDeep(value[i], itemPath(path, i), depth + 1)) {
        return found;
      }
    }
  }
  return std::nullopt;
}

// Whether the config fits the bounds above; an error for each it passes.
bool withinBounds(const json& config, FieldErrors& errors) {
  const std::size_t bytes = config.dump(-1, ' ', false, json::error_handler_t::replace).size();
  if (bytes > kMaxConfigBytes) {
    fail(errors, std::string(kConfigPath),
         "is " + std::to_string(bytes) + " bytes as compact JSON; at most " +
             std::to_string(kMaxConfigBytes) +
             " are allowed, as each trial Pod carries its config in an annotation");
    return false;
  }
  if (const auto deep = tooDeep(config, std::string(kConfigPath), 0)) {
    fail(errors, *deep,
         "nests deeper than " + std::to_string(kMaxConfigDepth) +
             " levels; DeepSpeed's own "
             "sections nest four");
    return false;
  }
  return true;
}

// Every configuration of the grid is built on each decision of the search; past this many the
// search could not reach them (maxTrials is at most 1,000) and building them would take over the
// operator.
constexpr std::size_t kMaxConfigurations = 10'000;

// How many configurations the config's candidate lists make in one ZeRO stage: the product of
// their lengths, saturating past kMaxConfigurations.
std::size_t configurations(const json& value, const std::string& keyPath) {
  const auto times = [](std::size_t count, std::size_t factor) {
    return std::min(count * std::min(factor, kMaxConfigurations + 1), kMaxConfigurations + 1);
  };
  std::size_t count = 1;
  if (keyPath == kAutotuningKey || keyPath == kZeroStagePath) {
    return count;
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      count = times(count, configurations(child, fieldPath(keyPath, key)));
    }
  } else if (value.is_array() && !isValueList(keyPath, value)) {
    count = times(count, value.size());
  }
  return count;
}

// --- keys DeepSpeed does not read ---

// Candidates for a key DeepSpeed does not read give trials that differ only in what DeepSpeed never
// sees: refused. Other such keys are only warned about (decode), as a key DeepSpeed added after
// the table was taken must not stop a job.
void checkTunedKeysAreRead(const json& config, FieldErrors& errors) {
  for (UnknownConfigKey& unknown : unknownConfigKeys(config)) {
    if (unknown.tuned) {
      fail(errors, std::move(unknown.path), unknown.reason);
    }
  }
}

}  // namespace

void checks::checkDeepSpeedConfig(const json& config, FieldErrors& errors) {
  if (config.is_null()) {
    fail(errors, std::string(kConfigPath), "is required");
  } else if (!config.is_object()) {
    fail(errors, std::string(kConfigPath), "must be an object");
  } else if (withinBounds(config, errors)) {
    checkConfigValue(config, "", std::string(kConfigPath), errors);
    checkTunedKeysAreRead(config, errors);
    // Each stage searched ("all" is four) is a space of its own.
    const std::size_t stages = tuningSyntaxOf(config).stages.size();
    if (configurations(config, "") * stages > kMaxConfigurations) {
      fail(errors, std::string(kConfigPath),
           "its candidate lists make more than " + std::to_string(kMaxConfigurations) +
               " configurations; shorten them (\"auto\" searches the micro-batch by itself)");
    }
  }
}

// With a numeric train_batch_size every trial keeps micro-batch × gradient accumulation ×
// data-parallel size equal to it: the micro-batch is searched over the divisors of the batch per
// data-parallel rank, and gradient accumulation follows.
void checks::checkFixedTrainBatch(const Spec& spec, FieldErrors& errors) {
  const std::optional<int> fixed = tuningSyntaxOf(spec.deepspeedConfig).trainBatch.fixed;
  const Resources& resources = spec.resources;
  const std::optional<int> dataParallel = resources.dataParallelRanks();
  if (!fixed || !dataParallel || resources.gpusPerTrial % resources.modelParallelSize != 0) {
    return;
  }
  const int batch = *fixed;
  if (batch % *dataParallel != 0) {
    fail(errors, fieldPath(kConfigPath, kTrainBatchKey),
         "must be a multiple of the data-parallel size " + std::to_string(*dataParallel) +
             " (spec.resources.gpusPerTrial ÷ modelParallelSize)");
    return;
  }
  if (spec.search.maxTrainBatchSize && *spec.search.maxTrainBatchSize < batch) {
    fail(errors, "spec.search.maxTrainBatchSize",
         "is less than the fixed train_batch_size (" + std::to_string(batch) + ")");
  }
  checkBatchKeysReach(spec, batch / *dataParallel, errors);
}

void checks::checkArgMappings(const Spec& spec, FieldErrors& errors) {
  // Without a usable config every key would look unknown; the config's own error says enough.
  const bool configUsable = spec.deepspeedConfig.is_object();
  const std::set<std::string> paths = keyPathSet(spec.deepspeedConfig);
  std::set<std::string> leafKeys;
  if (configUsable) {
    collectLeafKeys(trainingKeys(spec.deepspeedConfig), leafKeys);
  }
  for (const auto& [key, flag] : spec.argMappings) {
    const std::string path = fieldPath("spec.argMappings", key);
    if (configUsable && !paths.contains(key) && !leafKeys.contains(key)) {
      fail(errors, path, "names no key of spec.deepspeedConfig");
    }
    if (flag.empty()) {
      fail(errors, path, "must be a command-line flag such as --batch_size");
    }
  }
}

std::vector<std::string> configKeyPaths(const json& deepspeedConfig) {
  std::set<std::string> paths{std::string(kMicroBatchKey), std::string(kGradientAccumulationKey)};
  if (deepspeedConfig.is_object()) {
    collectKeyPaths(trainingKeys(deepspeedConfig), "", paths);
  }
  return {paths.begin(), paths.end()};
}

}  // namespace autotune::api
