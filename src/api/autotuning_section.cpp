#include "api/autotuning_section.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "api/deepspeed_keys.h"
#include "api/fields.h"

namespace autotune::api {
namespace {

using nlohmann::json;
using namespace fields;  // NOLINT(google-build-using-namespace): the reader is made of them

constexpr std::string_view kSectionPath = "spec.deepspeedConfig.autotuning";

std::string trimmed(std::string_view text) {
  const auto isSpace = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && isSpace(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && isSpace(text.back())) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

// The member at a dotted path of `document`, or nullptr when it is absent or null.
const json* memberAt(const json& document, std::string_view dottedPath) {
  const json* node = &document;
  while (node != nullptr && !node->is_null() && !dottedPath.empty()) {
    const std::size_t dot = dottedPath.find('.');
    node = findMember(*node, dottedPath.substr(0, dot));
    dottedPath = dot == std::string_view::npos ? std::string_view() : dottedPath.substr(dot + 1);
  }
  return node == nullptr || node->is_null() ? nullptr : node;
}

// DeepSpeed's tuner types are the strategies of the same names.
std::optional<Strategy> asTunerType(const json& value, const std::string& path,
                                    FieldErrors& errors) {
  const std::optional<std::string> text = asString(value, path, errors);
  if (!text) {
    return std::nullopt;
  }
  if (*text == "gridsearch") {
    return Strategy::kGrid;
  }
  if (*text == "random") {
    return Strategy::kRandom;
  }
  if (*text == "model_based") {
    return Strategy::kModelBased;
  }
  errors.push_back({path, "must be one of gridsearch, random, model_based"});
  return std::nullopt;
}

// DeepSpeed's documentation spells the metric FLOPS; its code compares lower case.
std::optional<Metric> asSectionMetric(const json& value, const std::string& path,
                                      FieldErrors& errors) {
  const std::optional<std::string> text = asString(value, path, errors);
  if (!text) {
    return std::nullopt;
  }
  std::string lower = *text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  std::optional<Metric> metric = parseMetric(lower);
  if (!metric) {
    errors.push_back({path, "must be one of throughput, latency, flops"});
  }
  return metric;
}

std::optional<int> asProfileStep(const json& value, const std::string& path, FieldErrors& errors) {
  std::optional<int> step = asInt(value, path, errors);
  if (step && *step < 1) {
    errors.push_back({path, "must be at least 1"});
    return std::nullopt;
  }
  return step;
}

// Reads one object of the section key by key; whatever no rule took is reported at the end.
class SectionReader {
 public:
  SectionReader(const json& section, std::string path, const json& specDocument,
                FieldErrors& errors, AutotuningDefaults& out)
      : section_(section),
        path_(std::move(path)),
        specDocument_(specDocument),
        errors_(errors),
        out_(out) {}

  // Fills `field`, the spec field at `specField` (relative to spec), from the section's `key`,
  // unless the spec sets that field itself.
  template <typename T, typename Convert>
  void supply(std::string_view key, std::string_view specField, T& field, Convert convert) {
    const json* value = take(key);
    if (value == nullptr) {
      return;
    }
    auto decoded = convert(*value, pathOf(key), errors_);
    if (!decoded) {
      return;
    }
    const std::string specPath = "spec." + std::string(specField);
    if (memberAt(specDocument_, specField) != nullptr) {
      if (!(field == *decoded)) {
        warn(key, "is overridden by " + specPath);
      }
      return;
    }
    field = std::move(*decoded);
    out_.supplied.push_back({specPath, pathOf(key)});
  }

  // A key DeepSpeed's tuner reads that means nothing here, and why.
  void ignore(std::string_view key, std::string_view why) {
    if (take(key) != nullptr) {
      warn(key, "has no effect here: " + std::string(why));
    }
  }

  // A key whose meaning the trial protocol keeps (it reads the value itself).
  const json* keep(std::string_view key) { return take(key); }

  void mergeArgMappings(std::map<std::string, std::string>& argMappings) {
    const json* value = take("arg_mappings");
    if (value == nullptr) {
      return;
    }
    const std::optional<std::map<std::string, std::string>> mappings =
        asStringMap(*value, pathOf("arg_mappings"), errors_);
    if (!mappings) {
      return;
    }
    const json* specMappings = memberAt(specDocument_, "argMappings");
    for (const auto& [written, flag] : *mappings) {
      // DeepSpeed's own tutorial has a key with a trailing space, which its scheduler strips.
      const std::string key = trimmed(written);
      const std::string path = pathOf("arg_mappings") + "." + written;
      if (specMappings != nullptr && specMappings->is_object() && specMappings->contains(key)) {
        if (argMappings[key] != trimmed(flag)) {
          out_.warnings.push_back({path, "is overridden by spec.argMappings." + key});
        }
        continue;
      }
      argMappings[key] = trimmed(flag);
      out_.supplied.push_back({"spec.argMappings." + key, path});
    }
  }

  template <typename ReadNested>
  void nested(std::string_view key, ReadNested readNested) {
    const json* value = take(key);
    if (value == nullptr) {
      return;
    }
    if (!value->is_object()) {
      errors_.push_back({pathOf(key), mustBe("an object", *value)});
      return;
    }
    SectionReader reader(*value, pathOf(key), specDocument_, errors_, out_);
    readNested(reader);
    reader.reportUnknown();
  }

  void reportUnknown() const {
    for (const auto& [key, value] : section_.items()) {
      if (!taken_.contains(key)) {
        out_.warnings.push_back(
            {fieldPath(path_, key), "is not a key of DeepSpeed's autotuning section; ignored"});
      }
    }
  }

  std::string pathOf(std::string_view key) const { return fieldPath(path_, key); }

 private:
  const json* take(std::string_view key) {
    taken_.emplace(key);
    const auto found = section_.find(key);
    return found == section_.end() || found->is_null() ? nullptr : &*found;
  }

  void warn(std::string_view key, std::string reason) {
    out_.warnings.push_back({pathOf(key), std::move(reason)});
  }

  const json& section_;
  std::string path_;
  const json& specDocument_;
  FieldErrors& errors_;
  AutotuningDefaults& out_;
  std::set<std::string, std::less<>> taken_;
};

void readModelInfo(SectionReader& reader, ModelInfo& model) {
  reader.supply("num_params", "model.numParameters", model.numParameters, asInt64);
  reader.supply("hidden_size", "model.hiddenSize", model.hiddenSize, asInt64);
  reader.supply("num_layers", "model.numLayers", model.numLayers, asInt64);
  reader.ignore("profile", "a profiling trial runs when spec.model.numParameters is unknown");
}

void readSection(SectionReader& reader, Spec& spec, FieldErrors& errors) {
  Search& search = spec.search;
  reader.supply("fast", "search.fast", search.fast, asBool);
  reader.supply("metric", "search.metric", search.metric, asSectionMetric);
  reader.supply("tuner_type", "search.strategy", search.strategy, asTunerType);
  reader.supply("tuner_num_trials", "search.maxTrials", search.maxTrials, asInt);
  reader.supply("tuner_early_stopping", "search.earlyStopping", search.earlyStopping, asInt);
  reader.supply("min_train_micro_batch_size_per_gpu", "search.minMicroBatchSize",
                search.minMicroBatchSize, asInt);
  reader.supply("max_train_micro_batch_size_per_gpu", "search.maxMicroBatchSize",
                search.maxMicroBatchSize, asInt);
  reader.supply("max_train_batch_size", "search.maxTrainBatchSize", search.maxTrainBatchSize,
                asInt);
  reader.supply("num_tuning_micro_batch_sizes", "search.numTuningMicroBatchSizes",
                search.numTuningMicroBatchSizes, asInt);
  reader.supply("mp_size", "resources.modelParallelSize", spec.resources.modelParallelSize, asInt);
  reader.mergeArgMappings(spec.argMappings);
  reader.nested(kModelInfoKey, [&](SectionReader& nested) { readModelInfo(nested, spec.model); });

  reader.keep(kEnabledKey);  // every trial runs with autotuning enabled
  std::optional<int> start;
  std::optional<int> end;
  if (const json* value = reader.keep(kStartProfileStepKey)) {
    start = asProfileStep(*value, reader.pathOf(kStartProfileStepKey), errors);
  }
  if (const json* value = reader.keep(kEndProfileStepKey)) {
    end = asProfileStep(*value, reader.pathOf(kEndProfileStepKey), errors);
  }
  if (end && *end < start.value_or(kDefaultStartProfileStep)) {
    errors.push_back({reader.pathOf(kEndProfileStepKey),
                      "must be at least start_profile_step (" +
                          std::to_string(start.value_or(kDefaultStartProfileStep)) + ")"});
  }

  reader.ignore(kMetricPathKey, "each trial's metrics path is set by the trial protocol");
  reader.ignore(kModelInfoPathKey, "the profiling trial's path is set by the trial protocol");
  reader.ignore("results_dir",
                "results go to the job's status and output ConfigMap (autotune run: --results)");
  reader.ignore("exps_dir", "trial configs go to the trial Pods (autotune run: --results)");
  reader.ignore("overwrite", "a finished trial is never run again; autotune run resumes");
  reader.ignore("min_train_batch_size", "DeepSpeed reads it but never uses it");
  reader.ignore("num_gpus", "GPUs per trial are spec.resources.gpusPerTrial");
  reader.ignore("num_nodes", "nodes per trial are spec.resources.nodesPerTrial");
}

}  // namespace

AutotuningDefaults applyAutotuningSection(const json& specDocument, Spec& spec,
                                          FieldErrors& errors) {
  AutotuningDefaults defaults;
  if (!spec.deepspeedConfig.is_object()) {
    return defaults;
  }
  const auto found = spec.deepspeedConfig.find(kAutotuningKey);
  if (found == spec.deepspeedConfig.end() || found->is_null()) {
    return defaults;
  }
  if (!found->is_object()) {
    errors.push_back({std::string(kSectionPath), mustBe("an object", *found)});
    return defaults;
  }
  // The spec is changed below: read from a copy.
  const json section = *found;  // NOLINT(performance-unnecessary-copy-initialization)
  SectionReader reader(section, std::string(kSectionPath), specDocument, errors, defaults);
  readSection(reader, spec, errors);
  reader.reportUnknown();
  return defaults;
}

std::string sourcePath(const std::string& path, const std::vector<SuppliedField>& supplied) {
  for (const SuppliedField& field : supplied) {
    if (path == field.specPath) {
      return field.sectionPath;
    }
    if (path.starts_with(field.specPath) &&
        (path[field.specPath.size()] == '.' || path[field.specPath.size()] == '[')) {
      return field.sectionPath + path.substr(field.specPath.size());
    }
  }
  return path;
}

}  // namespace autotune::api
