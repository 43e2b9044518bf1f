#include "api/validation.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/fields.h"
#include "api/job.h"

namespace autotune::api {
namespace {

using fields::fieldPath;
using fields::itemPath;
using fields::member;
using nlohmann::json;

constexpr std::string_view kMicroBatchKey = "train_micro_batch_size_per_gpu";
constexpr std::string_view kGradientAccumulationKey = "gradient_accumulation_steps";
constexpr std::string_view kTrainBatchKey = "train_batch_size";
constexpr std::string_view kStageKey = "zero_optimization.stage";
constexpr std::string_view kAutotuningKey = "autotuning";
constexpr std::string_view kZeroKey = "zero_optimization";

constexpr std::string_view kConfigPath = "spec.deepspeedConfig";
constexpr std::string_view kContainersPath = "spec.template.spec.containers";

constexpr std::string_view kEmptyCandidates = "a list of candidate values must not be empty";
constexpr std::string_view kStageRange = "ZeRO stages are 0 to 3";
constexpr std::string_view kStageSyntax = R"(must be an integer 0-3, a list of them, or "all")";
constexpr std::string_view kBatchSyntax =
    R"(must be "auto", a positive integer or a non-empty list of positive integers)";
constexpr std::string_view kTrainBatchList =
    "is derived per trial from micro-batch × gradient accumulation × data-parallel size; bound "
    "it with spec.search.maxTrainBatchSize";
constexpr std::string_view kDnsSubdomain =
    "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
    "with a letter or digit, at most 253 characters";
constexpr std::string_view kLabelValue =
    "must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with "
    "a letter or digit";

void fail(FieldErrors& errors, std::string path, std::string_view reason) {
  errors.push_back({std::move(path), std::string(reason)});
}

bool isAlphanumeric(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool isLowerAlphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*, at most 253 characters.
bool isDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || !isLowerAlphanumeric(label.front()) ||
        !isLowerAlphanumeric(label.back()) || !std::all_of(label.begin(), label.end(), [](char c) {
          return isLowerAlphanumeric(c) || c == '-';
        })) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

// (([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?, at most 63 characters.
bool isLabelValue(std::string_view value) {
  if (value.empty()) {
    return true;
  }
  return value.size() <= 63 && isAlphanumeric(value.front()) && isAlphanumeric(value.back()) &&
         std::all_of(value.begin(), value.end(),
                     [](char c) { return isAlphanumeric(c) || c == '-' || c == '_' || c == '.'; });
}

// Batch sizes are counted in int, as DeepSpeed's engine and the search count them.
bool isPositiveInteger(const json& value) {
  return value.is_number_integer() && value.get<std::int64_t>() > 0 &&
         value.get<std::int64_t>() <= std::numeric_limits<int>::max();
}

bool isAuto(const json& value) {
  return value.is_string() && value.get_ref<const std::string&>() == "auto";
}

// --- the object as a whole ---

void checkMetadata(const json& metadata, FieldErrors& errors) {
  if (!metadata.is_object()) {
    fail(errors, "metadata", "must be an object");
    return;
  }
  const json* name = member(metadata, "name");
  if (name == nullptr || name->is_null() ||
      (name->is_string() && name->get_ref<const std::string&>().empty())) {
    fail(errors, "metadata.name", "is required");
  } else if (!name->is_string()) {
    fail(errors, "metadata.name", "must be a string");
  } else if (!isDnsSubdomain(name->get_ref<const std::string&>())) {
    fail(errors, "metadata.name", kDnsSubdomain);
  }
}

// --- numbers and ranges ---

void checkSearch(const Search& search, FieldErrors& errors) {
  if (search.maxTrials < 1 || search.maxTrials > 1000) {
    fail(errors, "spec.search.maxTrials", "must be between 1 and 1000");
  }
  if (search.earlyStopping < 0) {
    fail(errors, "spec.search.earlyStopping", "must be at least 0 (0 turns early stopping off)");
  }
  if (!(search.plateauThreshold >= 0 && search.plateauThreshold < 1)) {
    fail(errors, "spec.search.plateauThreshold", "must be at least 0 and less than 1");
  }
  if (search.minMicroBatchSize < 1) {
    fail(errors, "spec.search.minMicroBatchSize", "must be at least 1");
  }
  if (search.maxMicroBatchSize < search.minMicroBatchSize) {
    fail(errors, "spec.search.maxMicroBatchSize",
         "must be at least spec.search.minMicroBatchSize (" +
             std::to_string(search.minMicroBatchSize) + ")");
  }
  if (search.maxTrainBatchSize && *search.maxTrainBatchSize < 1) {
    fail(errors, "spec.search.maxTrainBatchSize", "must be at least 1");
  }
  if (search.numTuningMicroBatchSizes < 1) {
    fail(errors, "spec.search.numTuningMicroBatchSizes", "must be at least 1");
  }
}

void checkResources(const Resources& resources, FieldErrors& errors) {
  if (resources.gpusPerTrial < 1) {
    fail(errors, "spec.resources.gpusPerTrial", "must be at least 1");
  }
  if (resources.nodesPerTrial < 1) {
    fail(errors, "spec.resources.nodesPerTrial", "must be at least 1");
  } else if (resources.nodesPerTrial > kMaxNodesPerTrial) {
    fail(errors, "spec.resources.nodesPerTrial",
         "must be at most " + std::to_string(kMaxNodesPerTrial));
  } else if (resources.gpusPerTrial >= 1 && resources.gpusPerTrial % resources.nodesPerTrial != 0) {
    fail(errors, "spec.resources.nodesPerTrial",
         "must divide spec.resources.gpusPerTrial (" + std::to_string(resources.gpusPerTrial) +
             "): each node of a trial gets the same number of GPUs");
  }
  if (resources.modelParallelSize < 1) {
    fail(errors, "spec.resources.modelParallelSize", "must be at least 1");
  } else if (resources.gpusPerTrial >= 1 &&
             resources.gpusPerTrial % resources.modelParallelSize != 0) {
    fail(
        errors, "spec.resources.modelParallelSize",
        "must divide spec.resources.gpusPerTrial (" + std::to_string(resources.gpusPerTrial) + ")");
  }
  if (resources.gpuMemory && resources.gpuMemory->value() <= 0) {
    fail(errors, "spec.resources.gpuMemory", "must be more than 0");
  }
}

void checkModel(const ModelInfo& model, FieldErrors& errors) {
  const auto checkPositive = [&](std::string_view field, const std::optional<std::int64_t>& value) {
    if (value && *value <= 0) {
      fail(errors, fieldPath("spec.model", field), "must be more than 0");
    }
  };
  checkPositive("numParameters", model.numParameters);
  checkPositive("activationMemoryPerSample", model.activationMemoryPerSample);
  checkPositive("hiddenSize", model.hiddenSize);
  checkPositive("numLayers", model.numLayers);
}

// A timeout is added to a time point with nanoseconds, which a few million hours overflow: every
// trial would time out at once. Thirty days is far beyond any trial or wait for GPUs.
constexpr std::chrono::hours kLongestTimeout{720};

void checkTimeout(const std::string& path, const Duration& timeout, FieldErrors& errors) {
  if (timeout.value().count() <= 0) {
    fail(errors, path, "must be longer than 0s");
  } else if (timeout.value() > kLongestTimeout) {
    fail(errors, path, "must be at most 720h");
  }
}

void checkRunLimits(const Spec& spec, FieldErrors& errors) {
  if (spec.parallelism < 1) {
    fail(errors, "spec.parallelism", "must be at least 1");
  }
  if (spec.maxFailedTrials < 1) {
    fail(errors, "spec.maxFailedTrials", "must be at least 1");
  }
  checkTimeout("spec.trialTimeout", spec.trialTimeout, errors);
  checkTimeout("spec.schedulingTimeout", spec.schedulingTimeout, errors);
}

// --- the DeepSpeed config's tuning syntax ---

void checkStage(const json& value, const std::string& path, FieldErrors& errors) {
  const auto inRange = [](const json& stage) {
    return stage.get<std::int64_t>() >= 0 && stage.get<std::int64_t>() <= 3;
  };
  if (value.is_number_integer()) {
    if (!inRange(value)) {
      fail(errors, path, kStageRange);
    }
  } else if (value.is_string()) {
    if (value.get_ref<const std::string&>() != "all") {
      fail(errors, path, kStageSyntax);
    }
  } else if (value.is_array()) {
    if (value.empty()) {
      fail(errors, path, kEmptyCandidates);
    }
    std::set<std::int64_t> seen;
    for (std::size_t i = 0; i < value.size(); ++i) {
      const json& stage = value[i];
      if (!stage.is_number_integer()) {
        fail(errors, itemPath(path, i), kStageSyntax);
      } else if (!inRange(stage)) {
        fail(errors, itemPath(path, i), kStageRange);
      } else if (!seen.insert(stage.get<std::int64_t>()).second) {
        fail(errors, itemPath(path, i), "lists stage " + stage.dump() + " twice");
      }
    }
  } else {
    fail(errors, path, kStageSyntax);
  }
}

// train_micro_batch_size_per_gpu and gradient_accumulation_steps: "auto", a start, or a list.
void checkBatchKey(const json& value, const std::string& path, FieldErrors& errors) {
  if (isAuto(value)) {
    return;
  }
  if (value.is_number_integer()) {
    if (!isPositiveInteger(value)) {
      fail(errors, path, "must be a positive integer");
    }
    return;
  }
  if (!value.is_array()) {
    fail(errors, path, kBatchSyntax);
    return;
  }
  if (value.empty()) {
    fail(errors, path, kEmptyCandidates);
  }
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!isPositiveInteger(value[i])) {
      fail(errors, itemPath(path, i), "must be a positive integer");
    }
  }
}

// Optimizer and scheduler parameters such as betas are lists by nature, not candidates.
bool isPlainNumberList(std::string_view keyPath, const json& value) {
  const bool underParams =
      keyPath.starts_with("optimizer.params.") || keyPath.starts_with("scheduler.params.");
  return underParams && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const json& item) { return item.is_number(); });
}

template <typename Check>
void checkCandidates(const json& list, const std::string& path, FieldErrors& errors, Check check) {
  if (list.empty()) {
    fail(errors, path, kEmptyCandidates);
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    check(list[i], itemPath(path, i), errors);
  }
}

// A numeric train_batch_size is the fixed global batch every trial keeps; "auto" or null leaves
// it free.
void checkTrainBatch(const json& value, const std::string& path, FieldErrors& errors) {
  if (value.is_array()) {
    fail(errors, path, kTrainBatchList);
  } else if (!value.is_null() && !isAuto(value) && !isPositiveInteger(value)) {
    fail(errors, path, R"(must be "auto" or a positive integer (a fixed global batch))");
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
      {std::string(kStageKey), {checkStage, false}},
      {std::string(kMicroBatchKey), {checkBatchKey, false}},
      {std::string(kGradientAccumulationKey), {checkBatchKey, false}},
      {std::string(kTrainBatchKey), {checkTrainBatch, false}},
      {"fp16.enabled", {checkPrecisionFlag, true}},
      {"bf16.enabled", {checkPrecisionFlag, true}},
      {"bfloat16.enabled", {checkPrecisionFlag, true}},
      {"zero_optimization.offload_optimizer.device", {checkOffloadDevice, true}},
      {"zero_optimization.offload_param.device", {checkOffloadDevice, true}},
      {"zero_force_ds_cpu_optimizer", {checkBoolean, true}},
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
  return keyPath == "fp16" || keyPath == "bf16" || keyPath == "bfloat16" || keyPath == kZeroKey ||
         keyPath == "optimizer" || keyPath == "zero_optimization.offload_optimizer" ||
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
  } else if (value.is_array() && !isPlainNumberList(keyPath, value)) {
    if (value.empty()) {
      fail(errors, path, kEmptyCandidates);
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

// The batch keys the user set must reach the fixed batch per data-parallel rank.
void checkBatchKeysReach(const Spec& spec, int perReplica, FieldErrors& errors) {
  const Search& search = spec.search;
  const std::string gasPath = fieldPath(kConfigPath, kGradientAccumulationKey);
  const json* accumulation = member(spec.deepspeedConfig, kGradientAccumulationKey);
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
  const json* micro = member(spec.deepspeedConfig, kMicroBatchKey);
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

// With a numeric train_batch_size every trial keeps micro-batch × gradient accumulation ×
// data-parallel size equal to it: the micro-batch is searched over the divisors of the batch per
// data-parallel rank, and gradient accumulation follows.
void checkFixedTrainBatch(const Spec& spec, FieldErrors& errors) {
  const json* train = member(spec.deepspeedConfig, kTrainBatchKey);
  const Resources& resources = spec.resources;
  if (train == nullptr || !isPositiveInteger(*train) || resources.gpusPerTrial < 1 ||
      resources.modelParallelSize < 1 ||
      resources.gpusPerTrial % resources.modelParallelSize != 0) {
    return;
  }
  const int batch = train->get<int>();
  const int dataParallel = resources.gpusPerTrial / resources.modelParallelSize;
  if (batch % dataParallel != 0) {
    fail(errors, fieldPath(kConfigPath, kTrainBatchKey),
         "must be a multiple of the data-parallel size " + std::to_string(dataParallel) +
             " (spec.resources.gpusPerTrial ÷ modelParallelSize)");
    return;
  }
  if (spec.search.maxTrainBatchSize && *spec.search.maxTrainBatchSize < batch) {
    fail(errors, "spec.search.maxTrainBatchSize",
         "is less than the fixed train_batch_size (" + std::to_string(batch) + ")");
  }
  checkBatchKeysReach(spec, batch / dataParallel, errors);
}

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

void checkArgMappings(const Spec& spec, FieldErrors& errors) {
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

// --- the trial template ---

// The template's containers, or nullptr after reporting why there are none to use.
const json* checkContainers(const json& podTemplate, FieldErrors& errors) {
  if (podTemplate.is_null() || (podTemplate.is_object() && podTemplate.empty())) {
    fail(errors, "spec.template", "is required");
    return nullptr;
  }
  if (!podTemplate.is_object()) {
    fail(errors, "spec.template", "must be an object");
    return nullptr;
  }
  const json* podSpec = member(podTemplate, "spec");
  if (podSpec != nullptr && !podSpec->is_object()) {
    fail(errors, "spec.template.spec", "must be an object");
    return nullptr;
  }
  const json* containers = podSpec == nullptr ? nullptr : member(*podSpec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    fail(errors, std::string(kContainersPath), "must list at least one container");
    return nullptr;
  }
  for (std::size_t i = 0; i < containers->size(); ++i) {
    const json& container = (*containers)[i];
    const std::string path = itemPath(kContainersPath, i);
    const json* name = member(container, "name");
    if (!container.is_object()) {
      fail(errors, path, "must be an object");
    } else if (name == nullptr || name->is_null() ||
               (name->is_string() && name->get_ref<const std::string&>().empty())) {
      fail(errors, path + ".name", "is required");
    } else if (!name->is_string()) {
      fail(errors, path + ".name", "must be a string");
    }
  }
  return containers;
}

std::string unknownPlaceholder(const std::string& key) {
  if (std::ranges::find(kRendezvousVariables, key) != kRendezvousVariables.end()) {
    return "${" + key +
           "} is set only for multi-node trials (spec.resources.nodesPerTrial above 1)";
  }
  return "unknown placeholder ${" + key + "}";
}

// `known` is nullptr when the config is unusable: every placeholder would look unknown, and the
// config's own error says enough.
void checkPlaceholdersIn(std::string_view text, const std::string& path,
                         const std::set<std::string>* known, FieldErrors& errors) {
  if (known == nullptr) {
    return;
  }
  std::size_t start = text.find("${");
  while (start != std::string_view::npos) {
    const std::size_t end = text.find('}', start + 2);
    if (end == std::string_view::npos) {
      fail(errors, path, "unterminated placeholder " + std::string(text.substr(start)));
      return;
    }
    const std::string key(text.substr(start + 2, end - start - 2));
    if (!known->contains(key)) {
      fail(errors, path, unknownPlaceholder(key));
    }
    start = text.find("${", end + 1);
  }
}

void checkEnv(const json* env, const std::string& envPath, const std::set<std::string>* known,
              FieldErrors& errors) {
  if (env == nullptr || env->is_null()) {
    return;
  }
  if (!env->is_array()) {
    fail(errors, envPath, "must be a list");
    return;
  }
  for (std::size_t i = 0; i < env->size(); ++i) {
    const json& entry = (*env)[i];
    const std::string entryPath = itemPath(envPath, i);
    const json* name = member(entry, "name");
    const json* value = member(entry, "value");
    if (!entry.is_object()) {
      fail(errors, entryPath, "must be an object");
    } else if (name == nullptr || !name->is_string()) {
      fail(errors, entryPath + ".name", "must be a string");
    }
    if (value != nullptr && !value->is_null() && !value->is_string()) {
      fail(errors, entryPath + ".value", "must be a string");
    } else if (value != nullptr && value->is_string()) {
      checkPlaceholdersIn(value->get_ref<const std::string&>(), entryPath + ".value", known,
                          errors);
    }
  }
}

// The primary container's command, args and env, which every trial rewrites: lists of strings,
// and env entries with a string name and value, with only known placeholders.
void checkPrimaryContainer(const json& container, const std::string& path,
                           const std::set<std::string>* known, FieldErrors& errors) {
  for (const std::string_view field : {"command", "args"}) {
    const json* list = member(container, field);
    if (list == nullptr || list->is_null()) {
      continue;
    }
    const std::string listPath = fieldPath(path, field);
    if (!list->is_array()) {
      fail(errors, listPath, "must be a list of strings");
      continue;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) {
        fail(errors, itemPath(listPath, i), "must be a string");
      } else {
        checkPlaceholdersIn((*list)[i].get_ref<const std::string&>(), itemPath(listPath, i), known,
                            errors);
      }
    }
  }
  checkEnv(member(container, "env"), fieldPath(path, "env"), known, errors);
}

void checkTemplate(const Spec& spec, FieldErrors& errors) {
  const json* containers = checkContainers(spec.podTemplate, errors);
  // An unnamed first container leaves the default empty; its own error covers that.
  if (containers == nullptr || spec.primaryContainer.empty()) {
    return;
  }
  const auto primary = std::find_if(containers->begin(), containers->end(), [&](const json& c) {
    const json* name = member(c, "name");
    return name != nullptr && name->is_string() && *name == spec.primaryContainer;
  });
  if (primary == containers->end()) {
    fail(errors, "spec.primaryContainer",
         "no container named \"" + spec.primaryContainer + "\" in spec.template");
    return;
  }
  std::set<std::string> known = keyPathSet(spec.deepspeedConfig);
  known.insert("trial");
  known.insert("job");
  if (spec.resources.nodesPerTrial > 1) {
    known.insert(kRendezvousVariables.begin(), kRendezvousVariables.end());
  }
  const auto index = static_cast<std::size_t>(std::distance(containers->begin(), primary));
  checkPrimaryContainer(*primary, itemPath(kContainersPath, index),
                        spec.deepspeedConfig.is_object() ? &known : nullptr, errors);
}

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

// How many configurations the config's candidate lists make: the product of their lengths,
// saturating past kMaxConfigurations.
std::size_t configurations(const json& value, const std::string& keyPath) {
  const auto times = [](std::size_t count, std::size_t factor) {
    return std::min(count * std::min(factor, kMaxConfigurations + 1), kMaxConfigurations + 1);
  };
  std::size_t count = 1;
  if (keyPath == kAutotuningKey) {
    return count;
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      count = times(count, configurations(child, fieldPath(keyPath, key)));
    }
  } else if (value.is_array() && !isPlainNumberList(keyPath, value)) {
    count = times(count, value.size());
  }
  return count;
}

void checkDeepSpeedConfig(const json& config, FieldErrors& errors) {
  if (config.is_null()) {
    fail(errors, std::string(kConfigPath), "is required");
  } else if (!config.is_object()) {
    fail(errors, std::string(kConfigPath), "must be an object");
  } else if (withinBounds(config, errors)) {
    checkConfigValue(config, "", std::string(kConfigPath), errors);
    if (configurations(config, "") > kMaxConfigurations) {
      fail(errors, std::string(kConfigPath),
           "its candidate lists make more than " + std::to_string(kMaxConfigurations) +
               " configurations; shorten them (\"auto\" searches the micro-batch by itself)");
    }
  }
}

void checkNames(const Spec& spec, FieldErrors& errors) {
  if (!spec.output.configMapName.empty() && !isDnsSubdomain(spec.output.configMapName)) {
    fail(errors, "spec.output.configMapName", kDnsSubdomain);
  }
  if (!isLabelValue(spec.queueName)) {
    fail(errors, "spec.queueName", kLabelValue);
  }
}

// Whether `path` is `covering` itself or a field inside it ("" covers the whole document).
bool isWithin(const std::string& path, const std::string& covering) {
  if (covering.empty() || path == covering) {
    return true;
  }
  return path.starts_with(covering) &&
         (path[covering.size()] == '.' || path[covering.size()] == '[');
}

bool hasErrorWithin(const FieldErrors& errors, const std::string& path) {
  return std::any_of(errors.begin(), errors.end(),
                     [&](const FieldError& error) { return isWithin(path, error.path); });
}

bool hasErrorAt(const FieldErrors& errors, const std::string& path) {
  return std::any_of(errors.begin(), errors.end(),
                     [&](const FieldError& error) { return error.path == path; });
}

}  // namespace

FieldErrors validate(const AutotuneJob& job) {
  FieldErrors errors;
  const Spec& spec = job.spec;
  checkMetadata(job.metadata, errors);
  checkDeepSpeedConfig(spec.deepspeedConfig, errors);
  checkModel(spec.model, errors);
  checkResources(spec.resources, errors);
  checkSearch(spec.search, errors);
  checkRunLimits(spec, errors);
  checkFixedTrainBatch(spec, errors);
  checkArgMappings(spec, errors);
  checkTemplate(spec, errors);
  checkNames(spec, errors);
  return errors;
}

std::vector<std::string> configKeyPaths(const json& deepspeedConfig) {
  std::set<std::string> paths{std::string(kMicroBatchKey), std::string(kGradientAccumulationKey)};
  if (deepspeedConfig.is_object()) {
    collectKeyPaths(trainingKeys(deepspeedConfig), "", paths);
  }
  return {paths.begin(), paths.end()};
}

FieldErrors validateDecoded(const AutotuneJob& job, const FieldErrors& decodingErrors,
                            bool configMapNameDefaulted) {
  std::vector<std::pair<std::string, std::string>> dependsOn{
      {"spec.search.maxMicroBatchSize", "spec.search.minMicroBatchSize"},
      {"spec.resources.modelParallelSize", "spec.resources.gpusPerTrial"},
  };
  if (configMapNameDefaulted) {
    dependsOn.emplace_back("spec.output.configMapName", "metadata.name");
  }
  const FieldErrors validationErrors = validate(job);
  FieldErrors kept;
  for (const FieldError& error : validationErrors) {
    if (hasErrorWithin(decodingErrors, error.path)) {
      continue;
    }
    const bool dependencyFailed =
        std::any_of(dependsOn.begin(), dependsOn.end(), [&](const auto& rule) {
          return rule.first == error.path && (hasErrorAt(decodingErrors, rule.second) ||
                                              hasErrorAt(validationErrors, rule.second));
        });
    if (!dependencyFailed) {
      kept.push_back(error);
    }
  }
  return kept;
}

}  // namespace autotune::api
