#include "api/codec.h"

#include <iterator>
#include <string>
#include <string_view>
#include <utility>

#include "api/autotuning_section.h"
#include "api/deepspeed_config_keys.h"
#include "api/defaults.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/schema.h"
#include "api/validation.h"

namespace autotune::api {
namespace schema {

// The fields of each struct, for the Decoder and the Encoder alike (schema.h). Defaults live in
// job.h; a field that is absent keeps its default. The templates of schema.h find each describe()
// by argument-dependent lookup, which sees no anonymous namespace: `static` keeps them here.
// NOLINTBEGIN(misc-use-anonymous-namespace)

static void describe(auto& field, Either<ModelInfo> auto& model) {
  field("numParameters", model.numParameters);
  field("activationMemoryPerSample", model.activationMemoryPerSample);
  field("hiddenSize", model.hiddenSize);
  field("numLayers", model.numLayers);
}

static void describe(auto& field, Either<Resources> auto& resources) {
  field("gpusPerTrial", resources.gpusPerTrial);
  field("nodesPerTrial", resources.nodesPerTrial);
  field("gpuMemory", resources.gpuMemory);
  field("modelParallelSize", resources.modelParallelSize);
}

static void describe(auto& field, Either<Search> auto& search) {
  field("strategy", search.strategy);
  field("fast", search.fast);
  field("metric", search.metric);
  field("maxTrials", search.maxTrials);
  field("earlyStopping", search.earlyStopping);
  field("plateauThreshold", search.plateauThreshold);
  field("minMicroBatchSize", search.minMicroBatchSize);
  field("maxMicroBatchSize", search.maxMicroBatchSize);
  field("maxTrainBatchSize", search.maxTrainBatchSize);
  field("numTuningMicroBatchSizes", search.numTuningMicroBatchSizes);
  field("seed", search.seed);
}

static void describe(auto& field, Either<Output> auto& output) {
  field("configMapName", output.configMapName, Write::kUnlessEmpty);
  field("retain", output.retain);
}

static void describe(auto& field, Either<Spec> auto& spec) {
  field("deepspeedConfig", spec.deepspeedConfig);
  field("model", spec.model, Write::kUnlessEmpty);
  field("resources", spec.resources);
  field("search", spec.search);
  field("parallelism", spec.parallelism);
  field("trialTimeout", spec.trialTimeout);
  field("schedulingTimeout", spec.schedulingTimeout);
  field("queueTimeout", spec.queueTimeout);
  field("maxFailedTrials", spec.maxFailedTrials);
  field("argMappings", spec.argMappings);
  field("template", spec.podTemplate);
  field("primaryContainer", spec.primaryContainer, Write::kUnlessEmpty);
  field("output", spec.output);
  field("cleanup", spec.cleanup);
  field("reuse", spec.reuse);
  field("queueName", spec.queueName, Write::kUnlessEmpty);
  field("afterTuning", spec.afterTuning, Write::kAlways, fields::asObject);
  field("gpuModels", spec.gpuModels, Write::kUnlessEmpty, fields::asStringList);
}

// metav1.Condition requires every one of these, empty or not.
static void describe(auto& field, Either<Condition> auto& condition) {
  field("type", condition.type);
  field("status", condition.status);
  field("reason", condition.reason);
  field("message", condition.message);
  field("lastTransitionTime", condition.lastTransitionTime);
  field("observedGeneration", condition.observedGeneration);
}

static void describe(auto& field, Either<TrialCounts> auto& trials) {
  field("launched", trials.launched);
  field("pending", trials.pending);
  field("running", trials.running);
  field("queued", trials.queued);
  field("awaitingAdmission", trials.awaitingAdmission);
  field("succeeded", trials.succeeded);
  field("failed", trials.failed);
  field("oom", trials.oom);
  field("timedOut", trials.timedOut);
  field("pruned", trials.pruned);
  field("reused", trials.reused);
}

static void describe(auto& field, Either<LaunchedTrial> auto& launched) {
  field("name", launched.name);
  field("attempt", launched.attempt);
  field("preemptions", launched.preemptions);
}

static void describe(auto& field, Either<BestTrial> auto& best) {
  field("trial", best.trial);
  field("metric", best.metric);
  field("value", best.value);
  field("zeroStage", best.zeroStage);
  field("microBatchSize", best.microBatchSize);
  field("gradientAccumulationSteps", best.gradientAccumulationSteps);
  field("speedup", best.speedup);
  field("nodes", best.nodes);
  field("gpus", best.gpus);
  field("config", best.config, Write::kAlways, fields::asObject);
}

static void describe(auto& field, Either<ModelSearch> auto& search) {
  field("gpuModel", search.gpuModel);
  field("job", search.job);
  field("phase", search.phase);
  field("message", search.message, Write::kUnlessEmpty);
  field("best", search.best);
}

static void describe(auto& field, Either<MeasuredModel> auto& model) {
  field("numParameters", model.numParameters);
  field("activationMemoryPerSample", model.activationMemoryPerSample);
}

static void describe(auto& field, Either<SpaceSummary> auto& space) {
  field("name", space.name);
  field("trials", space.trials);
  field("bestValue", space.bestValue);
  field("bestTrial", space.bestTrial, Write::kUnlessEmpty);
}

static void describe(auto& field, Either<TrialRecord> auto& record) {
  field("name", record.name);
  field("space", record.space);
  field("outcome", record.outcome);
  field("value", record.value);
  field("reason", record.reason, Write::kUnlessEmpty);
  field("startTime", record.startTime, Write::kUnlessEmpty);
  field("durationSeconds", record.durationSeconds);
  field("metrics", record.metrics, Write::kUnlessEmpty);
  field("reusedFrom", record.reusedFrom, Write::kUnlessEmpty);
  field("configVerified", record.configVerified);
  field("gpuModel", record.gpuModel, Write::kUnlessEmpty);
}

static void describe(auto& field, Either<GpuHours> auto& hours) {
  field("used", hours.used);
  field("saved", hours.saved);
  field("usedByOutcome", hours.usedByOutcome, Write::kUnlessEmpty);
}

static void describe(auto& field, Either<Status> auto& status) {
  field("phase", status.phase);
  field("observedGeneration", status.observedGeneration);
  field("conditions", status.conditions, Write::kUnlessEmpty);
  field("startTime", status.startTime, Write::kUnlessEmpty);
  field("completionTime", status.completionTime, Write::kUnlessEmpty);
  field("message", status.message, Write::kUnlessEmpty);
  field("trials", status.trials);
  field("inFlight", status.inFlight, Write::kUnlessEmpty);
  field("best", status.best);
  field("model", status.model);
  field("spaces", status.spaces, Write::kUnlessEmpty);
  field("results", status.results);
  field("gpuHours", status.gpuHours);
  field("afterTuningJob", status.afterTuningJob, Write::kUnlessEmpty);
  field("gpuModels", status.gpuModels, Write::kUnlessEmpty);
}
// NOLINTEND(misc-use-anonymous-namespace)

}  // namespace schema

namespace {

using fields::ObjectReader;
using nlohmann::json;

void expectConstant(ObjectReader& reader, std::string_view key, std::string_view expected) {
  const json* value = reader.get(key);
  if (value == nullptr) {
    reader.fail(key, "is required");
  } else if (!value->is_string() || value->get_ref<const std::string&>() != expected) {
    reader.fail(key, "must be " + std::string(expected));
  }
}

// The fields as written, each problem with its path; nothing defaulted or validated yet.
AutotuneJob readFields(const json& document, FieldErrors& errors) {
  AutotuneJob job;
  // A missing config stays null so that validation reports it as required, once.
  job.spec.deepspeedConfig = nullptr;
  fields::readObject(document, "", errors, [&](ObjectReader& reader) {
    expectConstant(reader, "apiVersion", kApiVersion);
    expectConstant(reader, "kind", kKind);
    reader.read("metadata", job.metadata, fields::asObject);
    if (!reader.readSection("spec",
                            [&](ObjectReader& spec) { schema::Decoder::into(spec, job.spec); })) {
      reader.fail("spec", "is required");
    }
    reader.readSection("status",
                       [&](ObjectReader& status) { schema::Decoder::into(status, job.status); });
  });
  return job;
}

}  // namespace

std::string format(const FieldError& error) {
  return error.path.empty() ? error.reason : error.path + ": " + error.reason;
}

tl::expected<Decoded, FieldErrors> decode(const json& document) {
  FieldErrors errors;
  AutotuneJob job = readFields(document, errors);
  normalizeIntegers(job.spec.deepspeedConfig);
  const json* specDocument = fields::findMember(document, "spec");
  AutotuningDefaults defaults = applyAutotuningSection(
      specDocument == nullptr ? json::object() : *specDocument, job.spec, errors);
  const bool configMapNameDefaulted = applyDefaults(job);
  for (FieldError& error : validateDecoded(job, errors, configMapNameDefaulted)) {
    error.path = sourcePath(error.path, defaults.supplied);
    errors.push_back(std::move(error));
  }
  if (!errors.empty()) {
    return tl::unexpected(std::move(errors));
  }
  // Keys DeepSpeed does not read and nothing tunes: validation refused the tuned ones.
  FieldErrors warnings;
  for (UnknownConfigKey& unknown : unknownConfigKeys(job.spec.deepspeedConfig)) {
    warnings.push_back({std::move(unknown.path), std::move(unknown.reason)});
  }
  warnings.insert(warnings.end(), std::make_move_iterator(defaults.warnings.begin()),
                  std::make_move_iterator(defaults.warnings.end()));
  return Decoded{std::move(job), std::move(warnings)};
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
    fields::readObject(status, "status", errors,
                       [&](ObjectReader& reader) { schema::Decoder::into(reader, result); });
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

json encode(const Spec& spec) { return schema::Encoder::value(spec); }

json encode(const Status& status) { return schema::Encoder::value(status); }

}  // namespace autotune::api
