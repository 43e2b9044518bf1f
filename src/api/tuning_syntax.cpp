#include "api/tuning_syntax.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>

#include "api/deepspeed_keys.h"
#include "api/fields.h"
#include "api/validation_checks.h"

namespace autotune::api {
namespace {

using checks::isAuto;
using checks::isPositiveInteger;
using fields::findMember;
using fields::itemPath;
using nlohmann::json;

constexpr int kStageCount = 4;

constexpr std::string_view kStageRange = "ZeRO stages are 0 to 3";
constexpr std::string_view kStageSyntax = R"(must be an integer 0-3, a list of them, or "all")";
constexpr std::string_view kBatchSyntax =
    R"(must be "auto", a positive integer or a non-empty list of positive integers)";
constexpr std::string_view kTrainBatchList =
    "is derived per trial from micro-batch × gradient accumulation × data-parallel size; bound "
    "it with spec.search.maxTrainBatchSize";

bool isStage(const json& value) {
  return value.is_number_integer() && value.get<std::int64_t>() >= 0 &&
         value.get<std::int64_t>() < kStageCount;
}

// Each key's value as the engine reads it, or nothing when it breaks the syntax (validation says
// how); a stage listed twice counts once.
std::optional<std::vector<int>> stagesOf(const json& value) {
  if (value == "all") {
    std::vector<int> all(kStageCount);
    for (int stage = 0; stage < kStageCount; ++stage) {
      all[static_cast<std::size_t>(stage)] = stage;
    }
    return all;
  }
  if (isStage(value)) {
    return std::vector<int>{value.get<int>()};
  }
  if (!value.is_array() || value.empty() || !std::all_of(value.begin(), value.end(), isStage)) {
    return std::nullopt;
  }
  std::set<int> distinct;
  for (const json& stage : value) {
    distinct.insert(stage.get<int>());
  }
  return std::vector<int>(distinct.begin(), distinct.end());
}

std::optional<BatchChoice> batchChoiceOf(const json& value) {
  if (isAuto(value)) {
    return BatchChoice{};
  }
  if (isPositiveInteger(value)) {
    return BatchChoice{BatchChoice::Kind::kStart, {value.get<int>()}};
  }
  if (!value.is_array() || value.empty() ||
      !std::all_of(value.begin(), value.end(), isPositiveInteger)) {
    return std::nullopt;
  }
  BatchChoice choice{BatchChoice::Kind::kList, {}};
  for (const json& item : value) {
    if (std::find(choice.values.begin(), choice.values.end(), item.get<int>()) ==
        choice.values.end()) {
      choice.values.push_back(item.get<int>());
    }
  }
  return choice;
}

std::optional<TrainBatch> trainBatchOf(const json& value) {
  if (isPositiveInteger(value)) {
    return TrainBatch{value.get<int>(), false};
  }
  if (isAuto(value) || value.is_null()) {
    return TrainBatch{std::nullopt, isAuto(value)};
  }
  return std::nullopt;
}

// `key` of `object` as `decode` reads it into `out`, when it is there and readable.
template <typename T, typename Decode>
void decodeKey(const json* object, std::string_view key, Decode decode, T& out) {
  const json* value = object == nullptr ? nullptr : findMember(*object, key);
  if (value == nullptr) {
    return;
  }
  if (std::optional<T> decoded = decode(*value)) {
    out = std::move(*decoded);
  }
}

}  // namespace

void checks::checkStages(const json& value, const std::string& path, FieldErrors& errors) {
  if (value.is_number_integer()) {
    if (!isStage(value)) {
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
      } else if (!isStage(stage)) {
        fail(errors, itemPath(path, i), kStageRange);
      } else if (!seen.insert(stage.get<std::int64_t>()).second) {
        fail(errors, itemPath(path, i), "lists stage " + stage.dump() + " twice");
      }
    }
  } else {
    fail(errors, path, kStageSyntax);
  }
}

void checks::checkBatchChoice(const json& value, const std::string& path, FieldErrors& errors) {
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

void checks::checkTrainBatch(const json& value, const std::string& path, FieldErrors& errors) {
  if (value.is_array()) {
    fail(errors, path, kTrainBatchList);
  } else if (!value.is_null() && !isAuto(value) && !isPositiveInteger(value)) {
    fail(errors, path, R"(must be "auto" or a positive integer (a fixed global batch))");
  }
}

TuningSyntax tuningSyntaxOf(const json& deepspeedConfig) {
  TuningSyntax syntax;
  decodeKey(findMember(deepspeedConfig, kZeroKey), kStageKey, stagesOf, syntax.stages);
  decodeKey(&deepspeedConfig, kMicroBatchKey, batchChoiceOf, syntax.microBatch);
  decodeKey(&deepspeedConfig, kGradientAccumulationKey, batchChoiceOf, syntax.gradientAccumulation);
  syntax.gradientAccumulationSet = findMember(deepspeedConfig, kGradientAccumulationKey) != nullptr;
  decodeKey(&deepspeedConfig, kTrainBatchKey, trainBatchOf, syntax.trainBatch);
  return syntax;
}

bool isValueList(std::string_view keyPath, const json& value) {
  const bool underParams =
      keyPath.starts_with("optimizer.params.") || keyPath.starts_with("scheduler.params.");
  return underParams && !value.empty() &&
         std::all_of(value.begin(), value.end(), [](const json& item) { return item.is_number(); });
}

}  // namespace autotune::api
