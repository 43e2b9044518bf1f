#include "controller/measurements.h"

#include <openssl/evp.h>

#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "api/codec.h"
#include "k8s/object.h"
#include "tuning/protocol.h"

namespace autotune::controller {
namespace {

using k8s::member;
using k8s::text;
using nlohmann::json;

constexpr std::string_view kIdentityKey = "identity.json";
constexpr std::string_view kResultKey = "result.json";
constexpr std::string_view kReservedEnvPrefix = "AUTOTUNE_";
// Of a SHA-256's 64 hex digits, the name and the label keep 40: 160 bits, as git's object names.
constexpr std::size_t kHashDigits = 40;

std::string sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4U];
    hex += kHex[digest[i] & 0xFU];
  }
  return hex.substr(0, kHashDigits);
}

// The template's container as it runs, less what differs per trial: AUTOTUNE_* variables.
json containerOf(const api::Spec& spec, const std::string& image) {
  const auto primary = tuning::primaryContainer(spec);
  const json& container = primary ? primary->container : json::object();
  json env = json::array();
  for (const auto& variable : member(container, "env")) {
    if (!text(variable, "name").starts_with(kReservedEnvPrefix)) {
      env.push_back(variable);
    }
  }
  return {{"image", image},
          {"command", member(container, "command")},
          {"args", member(container, "args")},
          {"env", std::move(env)},
          {"argMappings", spec.argMappings}};
}

std::string templateImage(const api::Spec& spec) {
  const auto primary = tuning::primaryContainer(spec);
  return primary ? text(primary->container, "image") : "";
}

json gpuDocument(const GpuModel& gpu) {
  return {{"product", gpu.product},
          {"memoryBytes", gpu.memoryBytes ? json(*gpu.memoryBytes) : json(nullptr)}};
}

// The text of a data key, parsed; the error names the key.
tl::expected<json, std::string> parsedKey(const json& data, std::string_view key) {
  const json& value = member(data, key);
  if (!value.is_string()) {
    return tl::make_unexpected("data." + std::string(key) + " is missing");
  }
  json parsed = json::parse(value.get_ref<const std::string&>(), nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    return tl::make_unexpected("data." + std::string(key) + " is not a JSON object");
  }
  return parsed;
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

// The size of the ConfigMap's data: past the bound it was not written by the operator.
std::size_t dataBytes(const json& data) {
  std::size_t bytes = 0;
  if (data.is_object()) {
    for (const auto& [key, value] : data.items()) {
      bytes += key.size() + (value.is_string() ? value.get_ref<const std::string&>().size() : 0);
    }
  }
  return bytes;
}

tl::expected<Measurement, std::string> readMeasurement(const json& object) {
  const json& data = member(object, "data");
  if (const std::size_t bytes = dataBytes(data); bytes > kMeasurementBytes) {
    return tl::make_unexpected("data holds " + std::to_string(bytes) +
                               " bytes, more than a measurement's " +
                               std::to_string(kMeasurementBytes / 1024) + " KiB");
  }
  auto identity = parsedKey(data, kIdentityKey);
  if (!identity) {
    return tl::make_unexpected(identity.error());
  }
  auto result = parsedKey(data, kResultKey);
  if (!result) {
    return tl::make_unexpected(result.error());
  }
  if (!result->contains("outcome")) {
    return tl::make_unexpected("data.result.json: outcome is missing");
  }
  // Read as a status holding the one record and the model: the API's own decoding and checks.
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
    return tl::make_unexpected("data.result.json: " + api::format(error));
  }
  Measurement measurement;
  measurement.identity = std::move(*identity);
  measurement.record = std::move(status->results.front());
  measurement.model = status->model;
  if (auto why = implausible(measurement.record, measurement.model)) {
    return tl::make_unexpected("data.result.json: " + std::move(*why));
  }
  measurement.record.reason = tuning::boundedReason(measurement.record.reason);
  measurement.measuredBy =
      text(member(k8s::metadataOf(object), "annotations"), kMeasuredByAnnotation);
  return measurement;
}

}  // namespace

bool isVerdict(api::Outcome outcome) {
  return outcome == api::Outcome::kSucceeded || outcome == api::Outcome::kOOM;
}

std::string MeasurementIdentity::name() const {
  return std::string(kMeasurementPrefix) + sha256Hex(document.dump());
}

std::string MeasurementIdentity::environment() const {
  json environment = document;
  environment.erase("deepspeedConfig");
  return sha256Hex(environment.dump());
}

std::string imageDigest(std::string_view image) {
  const auto at = image.rfind("@sha256:");
  return at == std::string_view::npos ? "" : std::string(image.substr(at + 1));
}

std::string imageDigestOf(const MeasurementObject& kept) {
  if (!kept.measurement) {
    return "";
  }
  const std::string image = text(member(kept.measurement->identity, "container"), "image");
  return image.starts_with("sha256:") ? image : "";
}

MeasurementIdentity identityOf(const std::string& ns, const api::Spec& spec, const json& config,
                               const RanOn& ranOn) {
  const std::string written = templateImage(spec);
  const std::string image = !ranOn.imageDigest.empty()     ? ranOn.imageDigest
                            : imageDigest(written).empty() ? written
                                                           : imageDigest(written);
  GpuModel gpu = ranOn.gpu;
  if (!gpu.memoryBytes && spec.resources.gpuMemory) {
    gpu.memoryBytes = spec.resources.gpuMemory->value();
  }
  return {{{"namespace", ns},
           {"deepspeedConfig", config},
           {"gpusPerTrial", spec.resources.gpusPerTrial},
           {"nodesPerTrial", spec.resources.nodesPerTrial},
           {"gpu", gpuDocument(gpu)},
           {"container", containerOf(spec, image)}}};
}

std::optional<RanOn> expectedRanOn(const api::Spec& spec, const GpuCapacity& capacity) {
  std::set<std::string> products;
  std::set<std::optional<std::int64_t>> memories;
  for (const auto& node : capacity.nodes) {
    if (node.allocatable >= spec.resources.gpusPerNode()) {
      products.insert(node.product);
      memories.insert(node.memoryBytes);
    }
  }
  if (products.size() != 1 || memories.size() != 1) {
    return std::nullopt;
  }
  return RanOn{{*products.begin(), *memories.begin()}, imageDigest(templateImage(spec))};
}

std::optional<MeasurementObject> decodeMeasurementObject(const json& object) {
  const json& metadata = k8s::metadataOf(object);
  MeasurementObject decoded;
  decoded.ns = text(metadata, "namespace");
  decoded.name = text(metadata, "name");
  if (decoded.name.empty()) {
    return std::nullopt;
  }
  decoded.key = k8s::keyOf(object);
  decoded.resourceVersion = text(metadata, "resourceVersion");
  decoded.uid = text(metadata, "uid");
  decoded.measuredByUid = text(member(metadata, "annotations"), kMeasuredByUidAnnotation);
  const std::string version = text(member(metadata, "labels"), kMeasurementLabel);
  decoded.measurement =
      version == kMeasurementVersion
          ? readMeasurement(object)
          : tl::make_unexpected("label " + std::string(kMeasurementLabel) + " is \"" + version +
                                "\", not " + std::string(kMeasurementVersion));
  return decoded;
}

std::optional<json> measurementConfigMap(const MeasurementIdentity& identity,
                                         const api::TrialRecord& record,
                                         const std::optional<api::MeasuredModel>& model,
                                         const api::AutotuneJob& job) {
  api::Status holder;
  holder.results = {record};
  holder.results.front().reusedFrom.clear();
  holder.model = model;
  const json encoded = api::encode(holder);
  json result = encoded.at("results").at(0);
  if (model) {
    result["model"] = encoded.at("model");
  }
  json configMap = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", identity.name()},
        {"namespace", job.namespaceName()},
        {"labels",
         {{"app.kubernetes.io/managed-by", "autotune-operator"},
          {std::string(kMeasurementLabel), std::string(kMeasurementVersion)},
          {std::string(kEnvironmentLabel), identity.environment()}}},
        {"annotations",
         {{std::string(kMeasuredByAnnotation), job.namespaceName() + "/" + job.name()},
          {std::string(kMeasuredByUidAnnotation), job.uid()},
          {std::string(kMeasuredTrialAnnotation), record.name}}}}},
      {"data",
       {{std::string(kIdentityKey), identity.document.dump()},
        {std::string(kResultKey), result.dump()}}}};
  if (configMap.dump().size() > kMeasurementBytes) {
    return std::nullopt;
  }
  return configMap;
}

tl::expected<tuning::RecordedExit, std::string> reusedRecord(const MeasurementObject& object,
                                                             const MeasurementIdentity& identity,
                                                             const std::string& trial,
                                                             const std::string& space,
                                                             api::Metric metric) {
  if (!object.measurement) {
    return tl::make_unexpected(object.measurement.error());
  }
  const Measurement& kept = *object.measurement;
  if (kept.identity != identity.document) {
    return tl::make_unexpected("data." + std::string(kIdentityKey) +
                               " is not the identity its name stands for");
  }
  api::TrialRecord record = kept.record;
  record.name = trial;
  record.space = space;
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
