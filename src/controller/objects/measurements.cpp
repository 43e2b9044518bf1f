#include "controller/objects/measurements.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "api/codec.h"
#include "api/labels.h"
#include "object/read.h"
#include "object/time.h"
#include "tuning/protocol.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using object::member;
using object::text;

// A measurement's two data keys: these in a v2 ConfigMap, its identity's name and these in v3.
constexpr std::string_view kIdentityKey = "identity.json";
constexpr std::string_view kResultKey = "result.json";
// What the operator writes, and so all a measurement may hold: two data keys, the result small.
constexpr std::size_t kResultBytes = std::size_t{8} * 1024;
// A measurement ConfigMap's size beyond its data: its metadata and the JSON around its keys.
constexpr std::size_t kMetadataBytes = std::size_t{2} * 1024;
// The operator's identities nest a DeepSpeed config and a container: a few levels, far below this.
constexpr int kIdentityDepth = 64;
// A trial's startTime comes from the operator's clock; a little skew is not a forgery.
constexpr auto kClockSkew = std::chrono::minutes(10);

// The deepest nesting of arrays and objects in a JSON text, read without parsing it.
int nestingDepth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool inString = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        inString = false;
      }
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// The text of a data key of at most `bytes`; the error names the key.
tl::expected<std::string_view, std::string> keyText(const json& data, std::string_view key,
                                                    std::size_t bytes) {
  const json& value = member(data, key);
  if (!value.is_string()) {
    return tl::make_unexpected("data." + std::string(key) + " is missing");
  }
  const auto& text = value.get_ref<const std::string&>();
  if (text.size() > bytes) {
    return tl::make_unexpected("data." + std::string(key) + " holds " +
                               std::to_string(text.size()) + " bytes, more than the " +
                               std::to_string(bytes) + " a measurement writes");
  }
  return text;
}

tl::expected<json, std::string> parsedObject(std::string_view text, std::string_view key) {
  json parsed = json::parse(text, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return tl::make_unexpected("data." + std::string(key) + " is not a JSON object");
  }
  return parsed;
}

// The identity's text at data key `key`, checked to be of the shape identityOf writes, and the
// image it names.
tl::expected<std::string, std::string> identityImage(std::string_view written,
                                                     const std::string& key,
                                                     const std::string& ns) {
  const std::string at = "data." + key;
  if (nestingDepth(written) > kIdentityDepth) {
    return tl::make_unexpected(at + " nests deeper than " + std::to_string(kIdentityDepth) +
                               " levels");
  }
  auto identity = parsedObject(written, key);
  if (!identity) {
    return tl::make_unexpected(identity.error());
  }
  static const std::set<std::string> kKeys = {
      "namespace", "deepspeedConfig", "gpusPerTrial", "nodesPerTrial", "gpu", "container"};
  std::set<std::string> keys;
  for (const auto& [key, value] : identity->items()) {
    keys.insert(key);
  }
  if (keys != kKeys) {
    return tl::make_unexpected(at +
                               ": must hold exactly namespace, deepspeedConfig, gpusPerTrial, "
                               "nodesPerTrial, gpu and container");
  }
  if (text(*identity, "namespace") != ns) {
    return tl::make_unexpected(at + ": namespace is not the ConfigMap's own");
  }
  const json& image = member(member(*identity, "container"), "image");
  if (!image.is_string()) {
    return tl::make_unexpected(at + ": container.image must be a string");
  }
  return image.get<std::string>();
}

// What a trial's own record could hold: a duration of 0 or more, metrics of the three names and
// positive; anything else was written by hand, and is not taken as measured.
std::optional<std::string> implausible(const api::TrialRecord& record,
                                       const std::optional<api::MeasuredModel>& model) {
  if (!isVerdict(record.outcome)) {
    return "outcome: " + std::string(api::toString(record.outcome)) +
           " is no verdict on the config for another job (only Succeeded and OOM are kept)";
  }
  // No trial runs longer than the longest spec.trialTimeout, 720h.
  constexpr double kLongestTrialSeconds = 720.0 * 3600;
  if (!(record.durationSeconds >= 0 && record.durationSeconds <= kLongestTrialSeconds)) {
    return "durationSeconds: must be 0 to 2592000 seconds (720h)";
  }
  const auto positive = [](double value) { return std::isfinite(value) && value > 0; };
  if (record.value && !positive(*record.value)) {
    return "value: must be a positive number";
  }
  for (const auto& [name, value] : record.metrics) {
    if (!api::parseMetric(name) || !positive(value)) {
      return "metrics." + name + ": must be throughput, latency or flops, and positive";
    }
  }
  if (model && (model->numParameters <= 0 || model->activationMemoryPerSample < 0)) {
    return "model: numParameters must be positive and activationMemoryPerSample 0 or more";
  }
  return std::nullopt;
}

// A result at data key `key` read as a status holding the one record and the model: the API's
// own decoding and checks, and then what only a measurement must be.
tl::expected<Measurement, std::string> readResult(std::string_view written,
                                                  const std::string& key) {
  const std::string at = "data." + key + ": ";
  auto result = parsedObject(written, key);
  if (!result) {
    return tl::make_unexpected(result.error());
  }
  if (!result->contains("outcome")) {
    return tl::make_unexpected(at + "outcome is missing");
  }
  json asStatus = {{"results", json::array({*result})}};
  if (result->contains("model")) {
    asStatus["model"] = result->at("model");
    asStatus["results"][0].erase("model");
  }
  auto status = api::decodeStatus(asStatus);
  if (!status) {
    api::FieldError error = status.error().front();
    for (const std::string_view holder : {"status.results[0].", "status."}) {
      if (error.path.starts_with(holder)) {
        error.path.erase(0, holder.size());
        break;
      }
    }
    return tl::make_unexpected(at + api::format(error));
  }
  Measurement measurement;
  measurement.record = std::move(status->results.front());
  measurement.model = status->model;
  if (auto why = implausible(measurement.record, measurement.model)) {
    return tl::make_unexpected(at + std::move(*why));
  }
  const auto measuredAt = object::parseTime(measurement.record.startTime);
  if (!measuredAt) {
    return tl::make_unexpected(at + "startTime: must be an RFC 3339 time");
  }
  measurement.measuredAt = *measuredAt;
  measurement.record.reason = tuning::boundedReason(measurement.record.reason);
  return measurement;
}

// The identities a measurement ConfigMap's data keys name, whether or not it holds them whole: a
// v2 one's, its own name; a v3 one's, what comes before each kIdentityKey and kResultKey.
std::vector<std::string> identitiesNamed(const json& data, std::string_view version,
                                         const std::string& name) {
  if (version == kSingleMeasurementVersion) {
    return {name};
  }
  if (!data.is_object()) {
    return {};
  }
  std::set<std::string> names;
  for (const auto& [key, value] : data.items()) {
    for (const std::string_view suffix : {kIdentityKey, kResultKey}) {
      if (key.size() > suffix.size() + 1 && key.ends_with(suffix) &&
          key[key.size() - suffix.size() - 1] == '.') {
        names.insert(key.substr(0, key.size() - suffix.size() - 1));
      }
    }
  }
  return {names.begin(), names.end()};
}

// The data keys of the measurement of `identity` in a ConfigMap of `version`.
std::pair<std::string, std::string> keysOf(std::string_view version, const std::string& identity) {
  if (version == kSingleMeasurementVersion) {
    return {std::string(kIdentityKey), std::string(kResultKey)};
  }
  return {identity + "." + std::string(kIdentityKey), identity + "." + std::string(kResultKey)};
}

tl::expected<Measurement, std::string> readMeasurement(const json& object, std::string_view version,
                                                       const std::string& identity) {
  const json& data = member(object, "data");
  const auto [identityKey, resultKey] = keysOf(version, identity);
  const auto identityText = keyText(data, identityKey, kMeasurementBytes);
  if (!identityText) {
    return tl::make_unexpected(identityText.error());
  }
  const auto resultText = keyText(data, resultKey, kResultBytes);
  if (!resultText) {
    return tl::make_unexpected(resultText.error());
  }
  auto image =
      identityImage(*identityText, identityKey, text(object::metadataOf(object), "namespace"));
  if (!image) {
    return tl::make_unexpected(image.error());
  }
  auto measurement = readResult(*resultText, resultKey);
  if (measurement) {
    measurement->identityKey = identityKey;
    measurement->identityDigest = sha256Hex(*identityText);
    measurement->imageDigest = image->starts_with("sha256:") ? std::move(*image) : "";
    measurement->measuredBy =
        text(member(object::metadataOf(object), "annotations"), api::kMeasuredByAnnotation);
  }
  return measurement;
}

// Every measurement `identities` names, read whole; the first that cannot be is why none is used.
tl::expected<std::map<std::string, Measurement>, std::string> readMeasurements(
    const json& object, std::string_view version, const std::vector<std::string>& identities) {
  const json& data = member(object, "data");
  if (!data.is_object() || identities.empty() || data.size() != 2 * identities.size() ||
      object.contains("binaryData")) {
    return tl::make_unexpected(
        version == kSingleMeasurementVersion
            ? "data must hold identity.json and result.json, and nothing else"
            : "data must hold <identity>.identity.json and <identity>.result.json for each "
              "measurement, and nothing else");
  }
  std::map<std::string, Measurement> measurements;
  for (const auto& identity : identities) {
    auto measurement = readMeasurement(object, version, identity);
    if (!measurement) {
      return tl::make_unexpected(measurement.error());
    }
    measurements.emplace(identity, std::move(*measurement));
  }
  return measurements;
}

// A trial's result as a measurement keeps it: where it was reused from is no part of it.
json resultOf(const ToKeep& kept) {
  api::Status holder;
  holder.results = {kept.record};
  holder.results.front().reusedFrom.clear();
  holder.model = kept.model;
  const json encoded = api::encode(holder);
  json result = encoded.at("results").at(0);
  if (kept.model) {
    result["model"] = encoded.at("model");
  }
  return result;
}

// The ConfigMap of `job`'s measurements in `data`, all of one environment, named after the job
// and the identities it holds.
json measurementObject(const api::AutotuneJob& job, const std::string& environment, json data) {
  std::string named = job.uid();
  for (const auto& [key, value] : data.items()) {
    named += "\n" + key;
  }
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata",
           {{"name", std::string(kMeasurementPrefix) + measurementHash(named)},
            {"namespace", job.namespaceName()},
            {"labels",
             {{"app.kubernetes.io/managed-by", "autotune-operator"},
              {std::string(api::kMeasurementLabel), std::string(kMeasurementVersion)},
              {std::string(api::kEnvironmentLabel), environment}}},
            {"annotations",
             {{std::string(api::kMeasuredByAnnotation), job.namespaceName() + "/" + job.name()},
              {std::string(api::kMeasuredByUidAnnotation), job.uid()}}}}},
          {"data", std::move(data)}};
}

}  // namespace

bool isVerdict(api::Outcome outcome) {
  return outcome == api::Outcome::kSucceeded || outcome == api::Outcome::kOOM;
}

std::string imageDigestOf(const MeasurementObject& kept) {
  if (kept.measurements) {
    for (const auto& [identity, measurement] : *kept.measurements) {
      if (!measurement.imageDigest.empty()) {
        return measurement.imageDigest;
      }
    }
  }
  return "";
}

std::chrono::system_clock::time_point MeasurementObject::measuredAt(
    const std::string& identity) const {
  if (measurements) {
    if (const auto found = measurements->find(identity); found != measurements->end()) {
      return found->second.measuredAt;
    }
  }
  return std::chrono::system_clock::time_point::min();
}

std::chrono::system_clock::time_point MeasurementObject::newest() const {
  auto newest = std::chrono::system_clock::time_point::min();
  if (measurements) {
    for (const auto& [identity, measurement] : *measurements) {
      newest = std::max(newest, measurement.measuredAt);
    }
  }
  return newest;
}

std::size_t MeasurementObject::count() const {
  return measurements && !measurements->empty() ? measurements->size() : 1;
}

std::optional<MeasurementObject> decodeMeasurementObject(const json& object,
                                                         const MeasurementSeal& seal) {
  const json& metadata = object::metadataOf(object);
  MeasurementObject decoded;
  decoded.ns = text(metadata, "namespace");
  decoded.name = text(metadata, "name");
  if (decoded.name.empty()) {
    return std::nullopt;
  }
  decoded.key = object::keyOf(object);
  decoded.resourceVersion = text(metadata, "resourceVersion");
  decoded.uid = text(metadata, "uid");
  decoded.measuredByUid = text(member(metadata, "annotations"), api::kMeasuredByUidAnnotation);
  decoded.environment = text(member(metadata, "labels"), api::kEnvironmentLabel);
  const std::string version = text(member(metadata, "labels"), api::kMeasurementLabel);
  decoded.identities = identitiesNamed(member(object, "data"), version, decoded.name);
  decoded.sealed = seal.holds(object);
  if (!decoded.sealed) {
    decoded.measurements = tl::make_unexpected(
        "it bears no seal of this operator (" + std::string(api::kSealAnnotation) +
        "): written by someone else, edited, or sealed under a key since replaced");
  } else if (version != kMeasurementVersion && version != kSingleMeasurementVersion) {
    decoded.measurements = tl::make_unexpected(
        "label " + std::string(api::kMeasurementLabel) + " is \"" + version + "\", not " +
        std::string(kMeasurementVersion) + " or " + std::string(kSingleMeasurementVersion));
  } else {
    decoded.measurements = readMeasurements(object, version, decoded.identities);
  }
  return decoded;
}

std::vector<KeptMeasurement> beyondBound(std::vector<KeptMeasurement> inNamespace,
                                         const MeasurementLimits& limits,
                                         const JustKept& justKept) {
  std::erase_if(inNamespace, [&](const KeptMeasurement& kept) {
    return !kept->sealed || justKept.contains(kept->name);
  });
  std::size_t newest = 0;
  for (const auto& [name, count] : justKept) {
    newest += count;
  }
  const std::size_t room = limits.perNamespace > newest ? limits.perNamespace - newest : 0;
  std::size_t held = 0;
  for (const auto& kept : inNamespace) {
    held += kept->count();
  }
  std::ranges::sort(inNamespace, std::less<>(), &MeasurementObject::newest);
  std::vector<KeptMeasurement> beyond;
  for (auto& kept : inNamespace) {
    if (held <= room) {
      break;
    }
    held -= kept->count();
    beyond.push_back(std::move(kept));
  }
  return beyond;
}

MeasurementWrites measurementConfigMaps(const std::vector<ToKeep>& measurements,
                                        const api::AutotuneJob& job) {
  MeasurementWrites writes;
  std::map<std::string, std::vector<const ToKeep*>> byEnvironment;
  for (const auto& kept : measurements) {
    byEnvironment[kept.identity.environment()].push_back(&kept);
  }
  for (const auto& [environment, group] : byEnvironment) {
    json data = json::object();
    std::size_t bytes = kMetadataBytes;
    for (const ToKeep* kept : group) {
      const std::string name = kept->identity.name();
      const std::string result = resultOf(*kept).dump();
      const std::string identity = kept->identity.document.dump();
      // As the ConfigMap's JSON holds them: keys and texts quoted and escaped.
      const std::size_t size = json(identity).dump().size() + json(result).dump().size() +
                               2 * (name.size() + kIdentityKey.size() + 4);
      if (result.size() > kResultBytes || kMetadataBytes + size > kMeasurementBytes) {
        writes.tooLarge.push_back(kept->record.name);
        continue;
      }
      if (bytes + size > kMeasurementBytes) {
        writes.configMaps.push_back(measurementObject(job, environment, std::move(data)));
        data = json::object();
        bytes = kMetadataBytes;
      }
      data[name + "." + std::string(kIdentityKey)] = identity;
      data[name + "." + std::string(kResultKey)] = result;
      bytes += size;
    }
    if (!data.empty()) {
      writes.configMaps.push_back(measurementObject(job, environment, std::move(data)));
    }
  }
  return writes;
}

std::vector<std::string> trialsIn(const json& configMap) {
  std::vector<std::string> trials;
  for (const auto& [key, value] : member(configMap, "data").items()) {
    if (key.ends_with(kResultKey) && value.is_string()) {
      trials.push_back(text(json::parse(value.get<std::string>(), nullptr, false), "name"));
    }
  }
  return trials;
}

tl::expected<tuning::RecordedExit, std::string> reusedRecord(const MeasurementObject& object,
                                                             const MeasurementIdentity& identity,
                                                             const Lookup& lookup) {
  if (!object.measurements) {
    return tl::make_unexpected(object.measurements.error());
  }
  const auto found = object.measurements->find(identity.name());
  if (found == object.measurements->end()) {
    return tl::make_unexpected("it holds no measurement of " + identity.name());
  }
  const Measurement& kept = found->second;
  if (kept.identityDigest != sha256Hex(identity.document.dump())) {
    return tl::make_unexpected("data." + kept.identityKey +
                               " is not the identity its name stands for");
  }
  if (kept.measuredAt > lookup.now + kClockSkew) {
    return tl::make_unexpected("it was measured at " + kept.record.startTime +
                               ", a time still to come");
  }
  if (lookup.now - kept.measuredAt > lookup.maxAge) {
    return tl::make_unexpected("it was measured at " + kept.record.startTime +
                               ", longer ago than the " +
                               std::to_string(lookup.maxAge.count() / 3600) +
                               "h a measurement is trusted; its trial runs again");
  }
  const api::Metric metric = lookup.metric;
  api::TrialRecord record = kept.record;
  record.name = lookup.trial;
  record.space = lookup.space;
  record.reusedFrom = object.name;
  // A success measured for another metric has it among its metrics; the profiling trial's has
  // none, and its model instead.
  if (record.outcome == api::Outcome::kSucceeded && record.value) {
    const auto value = record.metrics.find(std::string(api::toString(metric)));
    if (value == record.metrics.end()) {
      return tl::make_unexpected("it holds no " + std::string(api::toString(metric)) + " value");
    }
    record.value = value->second;
  }
  return tuning::RecordedExit{std::move(record), kept.model};
}

}  // namespace autotune::controller
