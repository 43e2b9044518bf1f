#include "api/codec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "api/job.h"
#include "api/units.h"
#include "api/validation.h"

namespace autotune::api {
namespace {

using nlohmann::json;

std::string fieldPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

std::string itemPath(const std::string& parent, std::size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

// ---------------------------------------------------------------------------------------------
// YAML to JSON

FieldError errorAt(const YAML::Mark& mark, std::string reason) {
  if (mark.is_null()) {
    return {"", std::move(reason)};
  }
  return {"line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1),
          std::move(reason)};
}

bool isOneOf(std::string_view text, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), text) != options.end();
}

// YAML 1.2 core schema integers: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+.
std::optional<json> integerScalar(std::string_view text) {
  int base = 10;
  bool negative = false;
  if (text.starts_with("0o") || text.starts_with("0x")) {
    base = text[1] == 'o' ? 8 : 16;
    text.remove_prefix(2);
  } else if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) {
    return std::nullopt;
  }
  std::uint64_t magnitude = 0;
  const char* end = text.data() + text.size();
  const auto [stop, status] = std::from_chars(text.data(), end, magnitude, base);
  if (stop != end || status != std::errc()) {
    return std::nullopt;  // not all digits, or too large for an integer: maybe a float
  }
  constexpr auto kMaxMagnitude =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!negative) {
    return magnitude <= kMaxMagnitude ? json(static_cast<std::int64_t>(magnitude))
                                      : json(magnitude);
  }
  if (magnitude > kMaxMagnitude + 1) {
    return std::nullopt;
  }
  // Negating in unsigned arithmetic reaches INT64_MIN without signed overflow.
  return json(static_cast<std::int64_t>(~magnitude + 1));
}

std::size_t countDigits(std::string_view text, std::size_t from) {
  std::size_t count = 0;
  while (from + count < text.size() && text[from + count] >= '0' && text[from + count] <= '9') {
    ++count;
  }
  return count;
}

// YAML 1.2 core schema floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?. The
// special values .inf and .nan have no JSON form, so they stay strings.
bool hasFloatSyntax(std::string_view text) {
  std::size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  const std::size_t wholeDigits = countDigits(text, i);
  i += wholeDigits;
  std::size_t fractionDigits = 0;
  if (i < text.size() && text[i] == '.') {
    fractionDigits = countDigits(text, i + 1);
    i += 1 + fractionDigits;
  }
  if (wholeDigits == 0 && fractionDigits == 0) {
    return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      ++i;
    }
    const std::size_t exponentDigits = countDigits(text, i);
    if (exponentDigits == 0) {
      return false;
    }
    i += exponentDigits;
  }
  return i == text.size();
}

std::optional<json> floatScalar(std::string_view text) {
  if (!hasFloatSyntax(text)) {
    return std::nullopt;
  }
  if (text[0] == '+') {
    text.remove_prefix(1);  // from_chars takes no plus sign
  }
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, status] = std::from_chars(text.data(), end, value);
  if (stop != end || status != std::errc()) {
    return std::nullopt;
  }
  return json(value);
}

json scalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  // yaml-cpp tags quoted and block scalars "!": the user asked for a string.
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") {
    return text;
  }
  if (isOneOf(text, {"", "~", "null", "Null", "NULL"})) {
    return nullptr;
  }
  if (isOneOf(text, {"true", "True", "TRUE"})) {
    return true;
  }
  if (isOneOf(text, {"false", "False", "FALSE"})) {
    return false;
  }
  if (std::optional<json> integer = integerScalar(text)) {
    return *integer;
  }
  if (std::optional<json> number = floatScalar(text)) {
    return *number;
  }
  return text;
}

// Converts a parsed YAML tree. Aliases make it a graph: a self-referencing alias would recurse
// forever and nested aliases expand exponentially, so depth and size are bounded.
class YamlConverter {
 public:
  tl::expected<json, FieldError> convert(const YAML::Node& node) { return convert(node, 0); }

 private:
  static constexpr int kMaxDepth = 100;
  static constexpr int kMaxNodes = 1'000'000;

  tl::expected<json, FieldError> convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) {
      return tl::unexpected(errorAt(node.Mark(), "nesting is too deep"));
    }
    if (++nodes_ > kMaxNodes) {
      return tl::unexpected(errorAt(node.Mark(), "the document is too large"));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        return scalarToJson(node);
      case YAML::NodeType::Sequence:
        return convertSequence(node, depth);
      case YAML::NodeType::Map:
        return convertMap(node, depth);
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return json(nullptr);
  }

  tl::expected<json, FieldError> convertSequence(const YAML::Node& node, int depth) {
    json array = json::array();
    for (const auto& item : node) {
      tl::expected<json, FieldError> value = convert(item, depth + 1);
      if (!value) {
        return value;
      }
      array.push_back(std::move(*value));
    }
    return array;
  }

  tl::expected<json, FieldError> convertMap(const YAML::Node& node, int depth) {
    json object = json::object();
    for (const auto& entry : node) {
      if (!entry.first.IsScalar() && !entry.first.IsNull()) {
        return tl::unexpected(errorAt(entry.first.Mark(), "mapping keys must be strings"));
      }
      const std::string& key = entry.first.Scalar();
      if (object.contains(key)) {
        return tl::unexpected(errorAt(entry.first.Mark(), "duplicate key \"" + key + "\""));
      }
      tl::expected<json, FieldError> value = convert(entry.second, depth + 1);
      if (!value) {
        return value;
      }
      object[key] = std::move(*value);
    }
    return object;
  }

  int nodes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Decoding: every field converted, every problem recorded with its path, nothing thrown.

constexpr std::string_view kStrategyChoices = "must be one of deepspeed, grid, random, model-based";
constexpr std::string_view kMetricChoices = "must be one of throughput, latency, flops";
constexpr std::string_view kCleanupChoices = "must be one of DeleteFinished, Keep";
constexpr std::string_view kPhaseChoices =
    "must be one of Pending, Profiling, Running, Succeeded, Failed";
constexpr std::string_view kOutcomeChoices =
    "must be one of Succeeded, MetricsUnavailable, OOM, Failed, TimedOut, Unschedulable";

// "must be an integer", or "must be an integer, not a list" for a user who tried to give several.
std::string mustBe(std::string_view what, const json& value) {
  std::string reason = "must be " + std::string(what);
  if (value.is_array()) {
    reason += ", not a list";
  }
  return reason;
}

std::optional<std::int64_t> asInt64(const json& value, const std::string& path,
                                    FieldErrors& errors) {
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    errors.push_back({path, "is out of range"});
    return std::nullopt;
  }
  if (value.is_number_integer()) {
    return value.get<std::int64_t>();
  }
  // YAML reads 7.74e8 as a float; a whole number written that way is still meant as an integer.
  if (value.is_number_float()) {
    const double number = value.get<double>();
    constexpr double kLimit = 9223372036854775808.0;  // 2^63
    if (number >= -kLimit && number < kLimit && number == std::trunc(number)) {
      return static_cast<std::int64_t>(number);
    }
  }
  errors.push_back({path, mustBe("an integer", value)});
  return std::nullopt;
}

std::optional<int> asInt(const json& value, const std::string& path, FieldErrors& errors) {
  const std::optional<std::int64_t> wide = asInt64(value, path, errors);
  if (!wide) {
    return std::nullopt;
  }
  if (*wide < std::numeric_limits<int>::min() || *wide > std::numeric_limits<int>::max()) {
    errors.push_back({path, "is out of range"});
    return std::nullopt;
  }
  return static_cast<int>(*wide);
}

std::optional<double> asDouble(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_number()) {
    errors.push_back({path, mustBe("a number", value)});
    return std::nullopt;
  }
  return value.get<double>();
}

std::optional<bool> asBool(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_boolean()) {
    errors.push_back({path, mustBe("a boolean", value)});
    return std::nullopt;
  }
  return value.get<bool>();
}

std::optional<std::string> asString(const json& value, const std::string& path,
                                    FieldErrors& errors) {
  if (!value.is_string()) {
    errors.push_back({path, mustBe("a string", value)});
    return std::nullopt;
  }
  return value.get<std::string>();
}

std::optional<json> asObject(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return std::nullopt;
  }
  return value;
}

// Free-form values (deepspeedConfig, template) are checked by validation, which knows their rules.
std::optional<json> asAny(const json& value, const std::string& /*path*/, FieldErrors& /*errors*/) {
  return value;
}

// Units are written as strings ("32Gi", "30m"); a plain number is also a quantity (of bytes), but
// never a duration, whose unit must be explicit. Anything else gets the unit's own explanation.
template <typename Unit>
std::optional<Unit> asUnit(const json& value, const std::string& path, FieldErrors& errors,
                           bool acceptNumbers) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (acceptNumbers && value.is_number()) {
    text = value.dump();
  }
  tl::expected<Unit, std::string> parsed = Unit::parse(text);
  if (!parsed) {
    errors.push_back({path, value.is_array() ? parsed.error() + ", not a list" : parsed.error()});
    return std::nullopt;
  }
  return *parsed;
}

std::optional<Quantity> asQuantity(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asUnit<Quantity>(value, path, errors, true);
}

std::optional<Duration> asDuration(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asUnit<Duration>(value, path, errors, false);
}

template <typename Enum>
std::optional<Enum> asEnum(const json& value, const std::string& path, FieldErrors& errors,
                           std::optional<Enum> (*parse)(std::string_view),
                           std::string_view choices) {
  if (!value.is_string()) {
    errors.push_back({path, mustBe("a string", value)});
    return std::nullopt;
  }
  std::optional<Enum> parsed = parse(value.get_ref<const std::string&>());
  if (!parsed) {
    errors.push_back({path, std::string(choices)});
  }
  return parsed;
}

std::optional<Strategy> asStrategy(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asEnum(value, path, errors, parseStrategy, kStrategyChoices);
}

std::optional<Metric> asMetric(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseMetric, kMetricChoices);
}

std::optional<Cleanup> asCleanup(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseCleanup, kCleanupChoices);
}

std::optional<Phase> asPhase(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parsePhase, kPhaseChoices);
}

std::optional<Outcome> asOutcome(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseOutcome, kOutcomeChoices);
}

std::optional<std::map<std::string, std::string>> asStringMap(const json& value,
                                                              const std::string& path,
                                                              FieldErrors& errors) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return std::nullopt;
  }
  std::map<std::string, std::string> result;
  for (const auto& [key, item] : value.items()) {
    if (std::optional<std::string> text = asString(item, fieldPath(path, key), errors)) {
      result.emplace(key, std::move(*text));
    }
  }
  return result;
}

// Reads one JSON object field by field and remembers which keys it asked for, so that whatever
// remains can be reported as an unknown field (most often a typo).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, FieldErrors& errors)
      : object_(object), path_(std::move(path)), errors_(errors) {}

  // nullptr when the key is absent or null: Kubernetes treats an explicit null as unset.
  const json* get(std::string_view key) {
    known_.emplace(key);
    const auto found = object_.find(key);
    return found == object_.end() || found->is_null() ? nullptr : &*found;
  }

  std::string pathOf(std::string_view key) const { return fieldPath(path_, key); }

  void fail(std::string_view key, std::string reason) {
    errors_.push_back({pathOf(key), std::move(reason)});
  }

  template <typename T, typename Convert>
  void read(std::string_view key, T& out, Convert convert) {
    if (const json* value = get(key)) {
      if (auto decoded = convert(*value, pathOf(key), errors_)) {
        out = std::move(*decoded);
      }
    }
  }

  // Decodes a nested object with decodeFields(ObjectReader&); false when the key is absent.
  template <typename DecodeFields>
  bool readSection(std::string_view key, DecodeFields decodeFields);

  // Decodes a list of objects, each with decodeItem(ObjectReader&, T&).
  template <typename T, typename DecodeItem>
  void readList(std::string_view key, std::vector<T>& out, DecodeItem decodeItem);

  void rejectUnknown() const {
    for (const auto& [key, value] : object_.items()) {
      if (!known_.contains(key)) {
        errors_.push_back({pathOf(key), "unknown field"});
      }
    }
  }

 private:
  const json& object_;
  std::string path_;
  FieldErrors& errors_;
  std::set<std::string, std::less<>> known_;
};

template <typename DecodeFields>
void readObject(const json& value, const std::string& path, FieldErrors& errors,
                DecodeFields decodeFields) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return;
  }
  ObjectReader reader(value, path, errors);
  decodeFields(reader);
  reader.rejectUnknown();
}

template <typename DecodeFields>
bool ObjectReader::readSection(std::string_view key, DecodeFields decodeFields) {
  const json* value = get(key);
  if (value == nullptr) {
    return false;
  }
  readObject(*value, pathOf(key), errors_, decodeFields);
  return true;
}

template <typename T, typename DecodeItem>
void ObjectReader::readList(std::string_view key, std::vector<T>& out, DecodeItem decodeItem) {
  const json* value = get(key);
  if (value == nullptr) {
    return;
  }
  if (!value->is_array()) {
    errors_.push_back({pathOf(key), "must be a list"});
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    T item;
    readObject((*value)[i], itemPath(pathOf(key), i), errors_,
               [&](ObjectReader& reader) { decodeItem(reader, item); });
    out.push_back(std::move(item));
  }
}

// --- spec ---

void decodeModel(ObjectReader& reader, ModelInfo& model) {
  reader.read("numParameters", model.numParameters, asInt64);
  reader.read("activationMemoryPerSample", model.activationMemoryPerSample, asInt64);
  reader.read("hiddenSize", model.hiddenSize, asInt64);
  reader.read("numLayers", model.numLayers, asInt64);
}

void decodeResources(ObjectReader& reader, Resources& resources) {
  reader.read("gpusPerTrial", resources.gpusPerTrial, asInt);
  reader.read("nodesPerTrial", resources.nodesPerTrial, asInt);
  reader.read("gpuMemory", resources.gpuMemory, asQuantity);
  reader.read("modelParallelSize", resources.modelParallelSize, asInt);
}

void decodeSearch(ObjectReader& reader, Search& search) {
  reader.read("strategy", search.strategy, asStrategy);
  reader.read("fast", search.fast, asBool);
  reader.read("metric", search.metric, asMetric);
  reader.read("maxTrials", search.maxTrials, asInt);
  reader.read("earlyStopping", search.earlyStopping, asInt);
  reader.read("plateauThreshold", search.plateauThreshold, asDouble);
  reader.read("minMicroBatchSize", search.minMicroBatchSize, asInt);
  reader.read("maxMicroBatchSize", search.maxMicroBatchSize, asInt);
  reader.read("maxTrainBatchSize", search.maxTrainBatchSize, asInt);
  reader.read("numTuningMicroBatchSizes", search.numTuningMicroBatchSizes, asInt);
  reader.read("seed", search.seed, asInt64);
}

void decodeOutput(ObjectReader& reader, Output& output) {
  reader.read("configMapName", output.configMapName, asString);
  reader.read("retain", output.retain, asBool);
}

void decodeSpec(ObjectReader& reader, Spec& spec) {
  // A missing config stays null so that validation reports it as required, once.
  spec.deepspeedConfig = nullptr;
  reader.read("deepspeedConfig", spec.deepspeedConfig, asAny);
  reader.readSection("model", [&](ObjectReader& section) { decodeModel(section, spec.model); });
  reader.readSection("resources",
                     [&](ObjectReader& section) { decodeResources(section, spec.resources); });
  reader.readSection("search", [&](ObjectReader& section) { decodeSearch(section, spec.search); });
  reader.read("parallelism", spec.parallelism, asInt);
  reader.read("trialTimeout", spec.trialTimeout, asDuration);
  reader.read("schedulingTimeout", spec.schedulingTimeout, asDuration);
  reader.read("maxFailedTrials", spec.maxFailedTrials, asInt);
  reader.read("argMappings", spec.argMappings, asStringMap);
  reader.read("template", spec.podTemplate, asAny);
  reader.read("primaryContainer", spec.primaryContainer, asString);
  reader.readSection("output", [&](ObjectReader& section) { decodeOutput(section, spec.output); });
  reader.read("cleanup", spec.cleanup, asCleanup);
  reader.read("queueName", spec.queueName, asString);
  reader.read("afterTuning", spec.afterTuning, asObject);
}

// --- status ---

void decodeCondition(ObjectReader& reader, Condition& condition) {
  reader.read("type", condition.type, asString);
  reader.read("status", condition.status, asString);
  reader.read("reason", condition.reason, asString);
  reader.read("message", condition.message, asString);
  reader.read("lastTransitionTime", condition.lastTransitionTime, asString);
  reader.read("observedGeneration", condition.observedGeneration, asInt64);
}

void decodeTrialCounts(ObjectReader& reader, TrialCounts& trials) {
  reader.read("launched", trials.launched, asInt);
  reader.read("pending", trials.pending, asInt);
  reader.read("running", trials.running, asInt);
  reader.read("succeeded", trials.succeeded, asInt);
  reader.read("failed", trials.failed, asInt);
  reader.read("oom", trials.oom, asInt);
  reader.read("timedOut", trials.timedOut, asInt);
  reader.read("pruned", trials.pruned, asInt);
}

void decodeBest(ObjectReader& reader, BestTrial& best) {
  reader.read("trial", best.trial, asString);
  reader.read("metric", best.metric, asMetric);
  reader.read("value", best.value, asDouble);
  reader.read("zeroStage", best.zeroStage, asInt);
  reader.read("microBatchSize", best.microBatchSize, asInt);
  reader.read("gradientAccumulationSteps", best.gradientAccumulationSteps, asInt);
  reader.read("speedup", best.speedup, asDouble);
}

void decodeMeasuredModel(ObjectReader& reader, MeasuredModel& model) {
  reader.read("numParameters", model.numParameters, asInt64);
  reader.read("activationMemoryPerSample", model.activationMemoryPerSample, asInt64);
}

void decodeSpaceSummary(ObjectReader& reader, SpaceSummary& space) {
  reader.read("name", space.name, asString);
  reader.read("trials", space.trials, asInt);
  reader.read("bestValue", space.bestValue, asDouble);
  reader.read("bestTrial", space.bestTrial, asString);
}

void decodeTrialRecord(ObjectReader& reader, TrialRecord& record) {
  reader.read("name", record.name, asString);
  reader.read("space", record.space, asString);
  reader.read("outcome", record.outcome, asOutcome);
  reader.read("value", record.value, asDouble);
  reader.read("reason", record.reason, asString);
  reader.read("startTime", record.startTime, asString);
  reader.read("durationSeconds", record.durationSeconds, asDouble);
}

void decodeStatusFields(ObjectReader& reader, Status& status) {
  reader.read("phase", status.phase, asPhase);
  reader.read("observedGeneration", status.observedGeneration, asInt64);
  reader.readList("conditions", status.conditions, decodeCondition);
  reader.read("startTime", status.startTime, asString);
  reader.read("completionTime", status.completionTime, asString);
  reader.read("message", status.message, asString);
  reader.readSection("trials",
                     [&](ObjectReader& section) { decodeTrialCounts(section, status.trials); });
  reader.readSection("best",
                     [&](ObjectReader& section) { decodeBest(section, status.best.emplace()); });
  reader.readSection("model", [&](ObjectReader& section) {
    decodeMeasuredModel(section, status.model.emplace());
  });
  reader.readList("spaces", status.spaces, decodeSpaceSummary);
  reader.readList("results", status.results, decodeTrialRecord);
  reader.read("afterTuningJob", status.afterTuningJob, asString);
}

// --- the whole document ---

void expectConstant(ObjectReader& reader, std::string_view key, std::string_view expected) {
  const json* value = reader.get(key);
  if (value == nullptr) {
    reader.fail(key, "is required");
  } else if (!value->is_string() || value->get_ref<const std::string&>() != expected) {
    reader.fail(key, "must be " + std::string(expected));
  }
}

// The member `key` of `value`, or nullptr when value is no object or lacks it.
const json* member(const json& value, std::string_view key) {
  if (!value.is_object()) {
    return nullptr;
  }
  const auto found = value.find(key);
  return found == value.end() ? nullptr : &*found;
}

// A string member, or "" when it is missing or of another type (decoding reports that).
std::string stringMember(const json& value, std::string_view key) {
  const json* found = member(value, key);
  return found != nullptr && found->is_string() ? found->get<std::string>() : std::string();
}

// Fills in the defaults that depend on other fields; returns whether configMapName was defaulted.
bool applyDefaults(AutotuneJob& job) {
  Spec& spec = job.spec;
  const json* podSpec = member(spec.podTemplate, "spec");
  const json* containers = podSpec == nullptr ? nullptr : member(*podSpec, "containers");
  if (spec.primaryContainer.empty() && containers != nullptr && containers->is_array() &&
      !containers->empty()) {
    spec.primaryContainer = stringMember(containers->front(), "name");
  }
  const std::string name = stringMember(job.metadata, "name");
  if (spec.output.configMapName.empty() && !name.empty()) {
    spec.output.configMapName = name + "-optimal";
    return true;
  }
  return false;
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

// Adds validation's findings, leaving out what would only repeat a decoding error: a field that
// failed to decode holds its default, and rules comparing it with another field would mislead.
void appendValidation(const AutotuneJob& job, bool configMapNameDefaulted, FieldErrors& errors) {
  std::vector<std::pair<std::string, std::string>> dependsOn{
      {"spec.search.maxMicroBatchSize", "spec.search.minMicroBatchSize"},
      {"spec.resources.modelParallelSize", "spec.resources.gpusPerTrial"},
  };
  if (configMapNameDefaulted) {
    dependsOn.emplace_back("spec.output.configMapName", "metadata.name");
  }
  const FieldErrors decodingErrors = errors;
  const FieldErrors validationErrors = validate(job);
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
      errors.push_back(error);
    }
  }
}

// --- encoding helpers ---

void putIfNotEmpty(json& out, const char* key, const std::string& value) {
  if (!value.empty()) {
    out[key] = value;
  }
}

template <typename T>
void putIfSet(json& out, const char* key, const std::optional<T>& value) {
  if (value) {
    out[key] = *value;
  }
}

json encodeModel(const ModelInfo& model) {
  json out = json::object();
  putIfSet(out, "numParameters", model.numParameters);
  putIfSet(out, "activationMemoryPerSample", model.activationMemoryPerSample);
  putIfSet(out, "hiddenSize", model.hiddenSize);
  putIfSet(out, "numLayers", model.numLayers);
  return out;
}

json encodeResources(const Resources& resources) {
  json out = {
      {"gpusPerTrial", resources.gpusPerTrial},
      {"nodesPerTrial", resources.nodesPerTrial},
      {"modelParallelSize", resources.modelParallelSize},
  };
  if (resources.gpuMemory) {
    out["gpuMemory"] = resources.gpuMemory->text();
  }
  return out;
}

json encodeSearch(const Search& search) {
  json out = {
      {"strategy", std::string(toString(search.strategy))},
      {"fast", search.fast},
      {"metric", std::string(toString(search.metric))},
      {"maxTrials", search.maxTrials},
      {"earlyStopping", search.earlyStopping},
      {"plateauThreshold", search.plateauThreshold},
      {"minMicroBatchSize", search.minMicroBatchSize},
      {"maxMicroBatchSize", search.maxMicroBatchSize},
      {"numTuningMicroBatchSizes", search.numTuningMicroBatchSizes},
      {"seed", search.seed},
  };
  putIfSet(out, "maxTrainBatchSize", search.maxTrainBatchSize);
  return out;
}

json encodeOutput(const Output& output) {
  json out = {{"retain", output.retain}};
  putIfNotEmpty(out, "configMapName", output.configMapName);
  return out;
}

json encodeCondition(const Condition& condition) {
  // metav1.Condition requires every one of these, empty or not.
  return {
      {"type", condition.type},
      {"status", condition.status},
      {"reason", condition.reason},
      {"message", condition.message},
      {"lastTransitionTime", condition.lastTransitionTime},
      {"observedGeneration", condition.observedGeneration},
  };
}

json encodeTrialCounts(const TrialCounts& trials) {
  return {
      {"launched", trials.launched},   {"pending", trials.pending}, {"running", trials.running},
      {"succeeded", trials.succeeded}, {"failed", trials.failed},   {"oom", trials.oom},
      {"timedOut", trials.timedOut},   {"pruned", trials.pruned},
  };
}

json encodeBest(const BestTrial& best) {
  json out = {
      {"trial", best.trial},
      {"metric", std::string(toString(best.metric))},
      {"value", best.value},
      {"zeroStage", best.zeroStage},
      {"microBatchSize", best.microBatchSize},
      {"gradientAccumulationSteps", best.gradientAccumulationSteps},
  };
  putIfSet(out, "speedup", best.speedup);
  return out;
}

json encodeSpaceSummary(const SpaceSummary& space) {
  json out = {{"name", space.name}, {"trials", space.trials}, {"bestValue", space.bestValue}};
  putIfNotEmpty(out, "bestTrial", space.bestTrial);
  return out;
}

json encodeTrialRecord(const TrialRecord& record) {
  json out = {
      {"name", record.name},
      {"space", record.space},
      {"outcome", std::string(toString(record.outcome))},
      {"durationSeconds", record.durationSeconds},
  };
  putIfSet(out, "value", record.value);
  putIfNotEmpty(out, "reason", record.reason);
  putIfNotEmpty(out, "startTime", record.startTime);
  return out;
}

template <typename T, typename Encode>
json encodeList(const std::vector<T>& items, Encode encodeItem) {
  json out = json::array();
  for (const T& item : items) {
    out.push_back(encodeItem(item));
  }
  return out;
}

}  // namespace

std::string format(const FieldError& error) {
  return error.path.empty() ? error.reason : error.path + ": " + error.reason;
}

tl::expected<json, FieldError> yamlToJson(std::string_view text) {
  try {
    const std::vector<YAML::Node> documents = YAML::LoadAll(std::string(text));
    if (documents.empty() || documents.front().IsNull()) {
      return tl::unexpected(FieldError{"", "the document is empty"});
    }
    return YamlConverter().convert(documents.front());
  } catch (const YAML::Exception& error) {
    return tl::unexpected(errorAt(error.mark, error.msg));
  } catch (const std::exception& error) {
    return tl::unexpected(FieldError{"", error.what()});
  }
}

tl::expected<AutotuneJob, FieldErrors> decodeJob(const json& document) {
  FieldErrors errors;
  AutotuneJob job;
  readObject(document, "", errors, [&](ObjectReader& reader) {
    expectConstant(reader, "apiVersion", kApiVersion);
    expectConstant(reader, "kind", kKind);
    reader.read("metadata", job.metadata, asObject);
    if (!reader.readSection("spec", [&](ObjectReader& spec) { decodeSpec(spec, job.spec); })) {
      reader.fail("spec", "is required");
    }
    reader.readSection("status",
                       [&](ObjectReader& status) { decodeStatusFields(status, job.status); });
  });
  const bool configMapNameDefaulted = applyDefaults(job);
  appendValidation(job, configMapNameDefaulted, errors);
  if (!errors.empty()) {
    return tl::unexpected(std::move(errors));
  }
  return job;
}

tl::expected<AutotuneJob, FieldErrors> decodeJobYaml(std::string_view text) {
  tl::expected<json, FieldError> document = yamlToJson(text);
  if (!document) {
    return tl::unexpected(FieldErrors{document.error()});
  }
  return decodeJob(*document);
}

tl::expected<Status, FieldErrors> decodeStatus(const json& status) {
  FieldErrors errors;
  Status result;
  if (!status.is_null()) {
    readObject(status, "status", errors,
               [&](ObjectReader& reader) { decodeStatusFields(reader, result); });
  }
  if (!errors.empty()) {
    return tl::unexpected(std::move(errors));
  }
  return result;
}

json encode(const AutotuneJob& job) {
  return {
      {"apiVersion", std::string(kApiVersion)},
      {"kind", std::string(kKind)},
      {"metadata", job.metadata},
      {"spec", encode(job.spec)},
      {"status", encode(job.status)},
  };
}

json encode(const Spec& spec) {
  json out = {
      {"deepspeedConfig", spec.deepspeedConfig},
      {"resources", encodeResources(spec.resources)},
      {"search", encodeSearch(spec.search)},
      {"parallelism", spec.parallelism},
      {"trialTimeout", spec.trialTimeout.text()},
      {"schedulingTimeout", spec.schedulingTimeout.text()},
      {"maxFailedTrials", spec.maxFailedTrials},
      {"argMappings", spec.argMappings},
      {"template", spec.podTemplate},
      {"output", encodeOutput(spec.output)},
      {"cleanup", std::string(toString(spec.cleanup))},
  };
  if (json model = encodeModel(spec.model); !model.empty()) {
    out["model"] = std::move(model);
  }
  putIfNotEmpty(out, "primaryContainer", spec.primaryContainer);
  putIfNotEmpty(out, "queueName", spec.queueName);
  putIfSet(out, "afterTuning", spec.afterTuning);
  return out;
}

json encode(const Status& status) {
  json out = {
      {"phase", std::string(toString(status.phase))},
      {"observedGeneration", status.observedGeneration},
      {"trials", encodeTrialCounts(status.trials)},
      {"results", encodeList(status.results, encodeTrialRecord)},
  };
  if (!status.conditions.empty()) {
    out["conditions"] = encodeList(status.conditions, encodeCondition);
  }
  putIfNotEmpty(out, "startTime", status.startTime);
  putIfNotEmpty(out, "completionTime", status.completionTime);
  putIfNotEmpty(out, "message", status.message);
  if (status.best) {
    out["best"] = encodeBest(*status.best);
  }
  if (status.model) {
    out["model"] = {{"numParameters", status.model->numParameters},
                    {"activationMemoryPerSample", status.model->activationMemoryPerSample}};
  }
  if (!status.spaces.empty()) {
    out["spaces"] = encodeList(status.spaces, encodeSpaceSummary);
  }
  putIfNotEmpty(out, "afterTuningJob", status.afterTuningJob);
  return out;
}

}  // namespace autotune::api
