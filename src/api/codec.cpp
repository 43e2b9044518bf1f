#include "api/codec.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/autotuning_section.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/units.h"
#include "api/validation.h"

namespace autotune::api {
namespace {

using nlohmann::json;
using namespace fields;  // NOLINT(google-build-using-namespace): the codec is made of them

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
  reader.read("metrics", record.metrics, asNumberMap);
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

// A string member, or "" when it is missing or of another type (decoding reports that).
std::string stringMember(const json& value, std::string_view key) {
  const json* found = member(value, key);
  return found != nullptr && found->is_string() ? found->get<std::string>() : std::string();
}

// The config keys the engine reads as integers. Users write them as YAML and JSON let them
// (16.0, 1.6e1); a whole number is an integer whatever its spelling.
void normalizeInteger(json& value) {
  if (value.is_array()) {
    for (json& item : value) {
      normalizeInteger(item);
    }
    return;
  }
  FieldErrors ignored;  // a value that is no whole number is left for validation to report
  if (value.is_number_float()) {
    if (std::optional<std::int64_t> whole = asInt64(value, "", ignored)) {
      value = *whole;
    }
  }
}

void normalizeIntegers(json& config) {
  if (!config.is_object()) {
    return;
  }
  for (const char* key :
       {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}) {
    if (config.contains(key)) {
      normalizeInteger(config[key]);
    }
  }
  const auto zero = config.find("zero_optimization");
  if (zero != config.end() && zero->is_object() && zero->contains("stage")) {
    normalizeInteger((*zero)["stage"]);
  }
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
  if (!record.metrics.empty()) {
    out["metrics"] = record.metrics;
  }
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

tl::expected<Decoded, FieldErrors> decode(const json& document) {
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
  normalizeIntegers(job.spec.deepspeedConfig);
  const json* specDocument = member(document, "spec");
  AutotuningDefaults defaults = applyAutotuningSection(
      specDocument == nullptr ? json::object() : *specDocument, job.spec, errors);
  const bool configMapNameDefaulted = applyDefaults(job);
  const std::size_t decodingErrors = errors.size();
  appendValidation(job, configMapNameDefaulted, errors);
  for (std::size_t i = decodingErrors; i < errors.size(); ++i) {
    errors[i].path = sourcePath(errors[i].path, defaults.supplied);
  }
  if (!errors.empty()) {
    return tl::unexpected(std::move(errors));
  }
  return Decoded{std::move(job), std::move(defaults.warnings)};
}

tl::expected<Decoded, FieldErrors> decodeYaml(std::string_view text) {
  tl::expected<json, FieldError> document = yamlToJson(text);
  if (!document) {
    return tl::unexpected(FieldErrors{document.error()});
  }
  return decode(*document);
}

tl::expected<AutotuneJob, FieldErrors> decodeJob(const json& document) {
  return decode(document).map([](Decoded&& decoded) { return std::move(decoded.job); });
}

tl::expected<AutotuneJob, FieldErrors> decodeJobYaml(std::string_view text) {
  return decodeYaml(text).map([](Decoded&& decoded) { return std::move(decoded.job); });
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
