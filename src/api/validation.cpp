// validate() and validateDecoded(), with the checks of the object as a whole, its names and its
// numeric ranges; the DeepSpeed config and the trial template have files of their own.

#include "api/validation.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/labels.h"
#include "api/names.h"
#include "api/validation_checks.h"

namespace autotune::api {
namespace {

using checks::fail;
using fields::fieldPath;
using fields::findMember;
using nlohmann::json;

constexpr std::string_view kDnsSubdomain =
    "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
    "with a letter or digit, at most 253 characters";
constexpr std::string_view kLabelValue =
    "must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending with "
    "a letter or digit";

// --- the object as a whole ---

void checkMetadata(const json& metadata, FieldErrors& errors) {
  if (!metadata.is_object()) {
    fail(errors, "metadata", "must be an object");
    return;
  }
  const json* name = findMember(metadata, "name");
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
  if (search.maxTrials < 1 || search.maxTrials > kMaxTrials) {
    fail(errors, "spec.search.maxTrials", "must be between 1 and " + std::to_string(kMaxTrials));
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
  if (resources.gpusPerTrial < 1 || resources.gpusPerTrial > kMaxGpusPerTrial) {
    fail(errors, "spec.resources.gpusPerTrial",
         "must be between 1 and " + std::to_string(kMaxGpusPerTrial));
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
  if (spec.parallelism < 1 || spec.parallelism > kMaxTrials) {
    fail(errors, "spec.parallelism", "must be between 1 and " + std::to_string(kMaxTrials));
  }
  if (spec.maxFailedTrials < 1) {
    fail(errors, "spec.maxFailedTrials", "must be at least 1");
  }
  checkTimeout("spec.trialTimeout", spec.trialTimeout, errors);
  checkTimeout("spec.schedulingTimeout", spec.schedulingTimeout, errors);
  if (spec.queueTimeout) {
    checkTimeout("spec.queueTimeout", *spec.queueTimeout, errors);
  }
}

// --- names ---

void checkNames(const Spec& spec, FieldErrors& errors) {
  if (!spec.output.configMapName.empty() && !isDnsSubdomain(spec.output.configMapName)) {
    fail(errors, "spec.output.configMapName", kDnsSubdomain);
  }
  if (!isLabelValue(spec.queueName)) {
    fail(errors, "spec.queueName", kLabelValue);
  }
}

// Each trial Pod selects its nodes by the model (nodeSelector), so a model is a label value.
void checkGpuModelNames(const Spec& spec, FieldErrors& errors) {
  const auto& models = spec.gpuModels;
  if (models.size() > kMaxGpuModels) {
    fail(errors, "spec.gpuModels",
         "must name at most " + std::to_string(kMaxGpuModels) + " GPU models, not " +
             std::to_string(models.size()));
  }
  for (std::size_t index = 0; index < models.size(); ++index) {
    const std::string& model = models[index];
    const std::string path = fields::itemPath("spec.gpuModels", index);
    if (model.empty() || !isLabelValue(model)) {
      fail(errors, path, std::string(kLabelValue) + ", not empty");
    } else if (model == kAllGpuModels && models.size() > 1) {
      fail(errors, path, std::string(kAllGpuModels) + " stands for every model and stands alone");
    } else if (std::find(models.begin(), models.begin() + static_cast<std::ptrdiff_t>(index),
                         model) != models.begin() + static_cast<std::ptrdiff_t>(index)) {
      fail(errors, path, "names " + model + " a second time");
    }
  }
}

// Whether a node selector term's expression on the GPU model label admits `model` (one on
// another label says nothing of it).
bool expressionAdmits(const json& expression, const std::string& model) {
  const json* key = findMember(expression, "key");
  const json* op = findMember(expression, "operator");
  if (key == nullptr || *key != kGpuProductLabel || op == nullptr || !op->is_string()) {
    return true;
  }
  const json* values = findMember(expression, "values");
  const bool listed = values != nullptr && values->is_array() &&
                      std::find(values->begin(), values->end(), model) != values->end();
  return !((*op == "In" && !listed) || (*op == "NotIn" && listed) || *op == "DoesNotExist");
}

bool termAdmits(const json& term, const std::string& model) {
  const json* expressions = findMember(term, "matchExpressions");
  return expressions == nullptr || !expressions->is_array() ||
         std::ranges::all_of(*expressions, [&](const json& expression) {
           return expressionAdmits(expression, model);
         });
}

// A required node affinity none of whose terms admits a model of spec.gpuModels leaves that
// model's trials no node at all. (Terms are ORed, a term's expressions ANDed.)
void checkGpuModelAffinity(const Spec& spec, FieldErrors& errors) {
  const json* podSpec = findMember(spec.podTemplate, "spec");
  const json* affinity = podSpec != nullptr ? findMember(*podSpec, "affinity") : nullptr;
  const json* nodeAffinity = affinity != nullptr ? findMember(*affinity, "nodeAffinity") : nullptr;
  const json* required =
      nodeAffinity != nullptr
          ? findMember(*nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution")
          : nullptr;
  const json* terms = required != nullptr ? findMember(*required, "nodeSelectorTerms") : nullptr;
  if (terms == nullptr || !terms->is_array() || terms->empty()) {
    return;
  }
  std::string excluded;
  for (const auto& model : spec.gpuModels) {
    if (model != kAllGpuModels && std::none_of(terms->begin(), terms->end(), [&](const json& term) {
          return termAdmits(term, model);
        })) {
      excluded += (excluded.empty() ? "" : ", ") + model;
    }
  }
  if (!excluded.empty()) {
    fail(errors,
         "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
         "admits no node of GPU model " + excluded + " (spec.gpuModels) by the label " +
             std::string(kGpuProductLabel));
  }
}

void checkGpuModels(const Spec& spec, FieldErrors& errors) {
  checkGpuModelNames(spec, errors);
  // The template's own choice of model would leave the trials no node at all.
  const json* podSpec = findMember(spec.podTemplate, "spec");
  const json* selector = podSpec != nullptr ? findMember(*podSpec, "nodeSelector") : nullptr;
  const json* chosen = selector != nullptr ? findMember(*selector, kGpuProductLabel) : nullptr;
  if (chosen != nullptr && !spec.gpuModels.empty() &&
      (searchesPerModel(spec) || *chosen != spec.gpuModels.front())) {
    fail(errors, fieldPath("spec.template.spec.nodeSelector", kGpuProductLabel),
         "selects a GPU model itself: spec.gpuModels chooses the models the trials run on");
  }
  checkGpuModelAffinity(spec, errors);
  // Each model has its own best config: which one the Job would run is for the user to say.
  if (spec.afterTuning && searchesPerModel(spec)) {
    fail(errors, "spec.afterTuning",
         "cannot be set with several spec.gpuModels: run the training Job of each model with "
         "its ds_config.<model>.json from the output ConfigMap");
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
  checks::checkDeepSpeedConfig(spec.deepspeedConfig, errors);
  checkModel(spec.model, errors);
  checkResources(spec.resources, errors);
  checkSearch(spec.search, errors);
  checkRunLimits(spec, errors);
  checks::checkFixedTrainBatch(spec, errors);
  checks::checkArgMappings(spec, errors);
  checks::checkTemplate(spec, errors);
  checks::checkAfterTuning(spec, errors);
  checkNames(spec, errors);
  checkGpuModels(spec, errors);
  return errors;
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
