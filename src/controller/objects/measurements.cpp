#include "controller/objects/measurements.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
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

constexpr std::string_view kIdentityKey = "identity.json";
constexpr std::string_view kResultKey = "result.json";
constexpr std::string_view kReservedEnvPrefix = "AUTOTUNE_";
// Of a SHA-256's 64 hex digits, the name and the label keep 40: 160 bits, as git's object names.
constexpr std::size_t kHashDigits = 40;
// What the operator writes, and so all a measurement may hold: two data keys, the result small.
constexpr std::size_t kResultBytes = std::size_t{8} * 1024;
// The operator's identities nest a DeepSpeed config and a container: a few levels, far below this.
constexpr int kIdentityDepth = 64;
// A trial's startTime comes from the operator's clock; a little skew is not a forgery.
constexpr auto kClockSkew = std::chrono::minutes(10);

std::string hexOf(const unsigned char* bytes, std::size_t length) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < length; ++i) {
    hex += kHex[bytes[i] >> 4U];
    hex += kHex[bytes[i] & 0xFU];
  }
  return hex;
}

std::string sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return hexOf(digest.data(), length);
}

std::string hashName(std::string_view text) { return sha256Hex(text).substr(0, kHashDigits); }

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

// The identity's text, checked to be of the shape identityOf writes, and the image it names.
tl::expected<std::string, std::string> identityImage(std::string_view written,
                                                     const std::string& ns) {
  if (nestingDepth(written) > kIdentityDepth) {
    return tl::make_unexpected("data.identity.json nests deeper than " +
                               std::to_string(kIdentityDepth) + " levels");
  }
  auto identity = parsedObject(written, kIdentityKey);
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
    return tl::make_unexpected(
        "data.identity.json: must hold exactly namespace, deepspeedConfig, gpusPerTrial, "
        "nodesPerTrial, gpu and container");
  }
  if (text(*identity, "namespace") != ns) {
    return tl::make_unexpected("data.identity.json: namespace is not the ConfigMap's own");
  }
  const json& image = member(member(*identity, "container"), "image");
  if (!image.is_string()) {
    return tl::make_unexpected("data.identity.json: container.image must be a string");
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

// result.json read as a status holding the one record and the model: the API's own decoding and
// checks, and then what only a measurement must be.
tl::expected<Measurement, std::string> readResult(std::string_view written) {
  auto result = parsedObject(written, kResultKey);
  if (!result) {
    return tl::make_unexpected(result.error());
  }
  if (!result->contains("outcome")) {
    return tl::make_unexpected("data.result.json: outcome is missing");
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
    return tl::make_unexpected("data.result.json: " + api::format(error));
  }
  Measurement measurement;
  measurement.record = std::move(status->results.front());
  measurement.model = status->model;
  if (auto why = implausible(measurement.record, measurement.model)) {
    return tl::make_unexpected("data.result.json: " + std::move(*why));
  }
  const auto measuredAt = object::parseTime(measurement.record.startTime);
  if (!measuredAt) {
    return tl::make_unexpected("data.result.json: startTime: must be an RFC 3339 time");
  }
  measurement.measuredAt = *measuredAt;
  measurement.record.reason = tuning::boundedReason(measurement.record.reason);
  return measurement;
}

tl::expected<Measurement, std::string> readMeasurement(const json& object) {
  const json& data = member(object, "data");
  if (!data.is_object() || data.size() != 2 || object.contains("binaryData")) {
    return tl::make_unexpected("data must hold identity.json and result.json, and nothing else");
  }
  const auto identity = keyText(data, kIdentityKey, kMeasurementBytes);
  if (!identity) {
    return tl::make_unexpected(identity.error());
  }
  const auto result = keyText(data, kResultKey, kResultBytes);
  if (!result) {
    return tl::make_unexpected(result.error());
  }
  auto image = identityImage(*identity, text(object::metadataOf(object), "namespace"));
  if (!image) {
    return tl::make_unexpected(image.error());
  }
  auto measurement = readResult(*result);
  if (measurement) {
    measurement->identityDigest = sha256Hex(*identity);
    measurement->imageDigest = image->starts_with("sha256:") ? std::move(*image) : "";
    measurement->measuredBy =
        text(member(object::metadataOf(object), "annotations"), api::kMeasuredByAnnotation);
  }
  return measurement;
}

// The text a seal is made over: all the operator wrote that another job would trust. Other
// annotations (kubectl's, say) may come and go.
std::string sealedText(const json& configMap) {
  const json& metadata = object::metadataOf(configMap);
  const json& annotations = member(metadata, "annotations");
  return json::array({text(metadata, "namespace"), text(metadata, "name"),
                      text(annotations, api::kMeasuredByAnnotation),
                      text(annotations, api::kMeasuredByUidAnnotation),
                      text(annotations, api::kTrialNameAnnotation), member(configMap, "data")})
      .dump();
}

}  // namespace

std::string MeasurementSeal::of(const json& configMap) const {
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  std::size_t length = 0;
  const std::string message = sealedText(configMap);
  if (EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, key_.data(), key_.size(),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac.data(),
                mac.size(), &length) == nullptr) {
    return "";
  }
  return hexOf(mac.data(), length);
}

json MeasurementSeal::sealed(json configMap) const {
  configMap["metadata"]["annotations"][std::string(api::kSealAnnotation)] = of(configMap);
  return configMap;
}

bool MeasurementSeal::holds(const json& configMap) const {
  const std::string claimed =
      text(member(object::metadataOf(configMap), "annotations"), api::kSealAnnotation);
  const std::string expected = of(configMap);
  return !expected.empty() && claimed.size() == expected.size() &&
         CRYPTO_memcmp(claimed.data(), expected.data(), expected.size()) == 0;
}

bool isVerdict(api::Outcome outcome) {
  return outcome == api::Outcome::kSucceeded || outcome == api::Outcome::kOOM;
}

std::string MeasurementIdentity::name() const {
  return std::string(kMeasurementPrefix) + hashName(document.dump());
}

std::string MeasurementIdentity::environment() const {
  json environment = document;
  environment.erase("deepspeedConfig");
  return hashName(environment.dump());
}

std::string imageDigest(std::string_view image) {
  const auto at = image.rfind("@sha256:");
  return at == std::string_view::npos ? "" : std::string(image.substr(at + 1));
}

std::string imageDigestOf(const MeasurementObject& kept) {
  return kept.measurement ? kept.measurement->imageDigest : "";
}

namespace {

// All of an identity but the DeepSpeed config: what every trial of a job shares.
json environmentDocument(const std::string& ns, const api::Spec& spec, const RanOn& ranOn) {
  const std::string written = templateImage(spec);
  const std::string image = !ranOn.imageDigest.empty()     ? ranOn.imageDigest
                            : imageDigest(written).empty() ? written
                                                           : imageDigest(written);
  GpuModel gpu = ranOn.gpu;
  if (!gpu.memoryBytes && spec.resources.gpuMemory) {
    gpu.memoryBytes = spec.resources.gpuMemory->value();
  }
  return {{"namespace", ns},
          {"gpusPerTrial", spec.resources.gpusPerTrial},
          {"nodesPerTrial", spec.resources.nodesPerTrial},
          {"gpu", gpuDocument(gpu)},
          {"container", containerOf(spec, image)}};
}

}  // namespace

MeasurementIdentity identityOf(const std::string& ns, const api::Spec& spec,
                               const tuning::Trial& trial, const RanOn& ranOn) {
  json document = environmentDocument(ns, spec, ranOn);
  // Where the trial's files lie is no part of what it measures; its profiled steps are.
  document["deepspeedConfig"] = tuning::launchConfig(spec, trial, tuning::TrialFiles{});
  return {std::move(document)};
}

std::string environmentOf(const std::string& ns, const api::Spec& spec, const RanOn& ranOn) {
  return hashName(environmentDocument(ns, spec, ranOn).dump());
}

std::optional<RanOn> expectedRanOn(const api::Spec& spec, const GpuCapacity& capacity) {
  std::set<std::string> products;
  std::set<std::optional<std::int64_t>> memories;
  for (const auto& node : capacity.nodes) {
    if (holdsARank(node, spec.resources)) {
      products.insert(node.product);
      memories.insert(node.memoryBytes);
    }
  }
  if (products.size() != 1 || memories.size() != 1) {
    return std::nullopt;
  }
  return RanOn{{*products.begin(), *memories.begin()}, imageDigest(templateImage(spec))};
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
  decoded.sealed = seal.holds(object);
  if (!decoded.sealed) {
    decoded.measurement = tl::make_unexpected(
        "it bears no seal of this operator (" + std::string(api::kSealAnnotation) +
        "): written by someone else, edited, or sealed under a key since replaced");
  } else if (version != kMeasurementVersion) {
    decoded.measurement =
        tl::make_unexpected("label " + std::string(api::kMeasurementLabel) + " is \"" + version +
                            "\", not " + std::string(kMeasurementVersion));
  } else {
    decoded.measurement = readMeasurement(object);
  }
  return decoded;
}

std::vector<KeptMeasurement> beyondBound(std::vector<KeptMeasurement> inNamespace,
                                         const MeasurementLimits& limits,
                                         const std::set<std::string>& justKept) {
  std::erase_if(inNamespace, [&](const KeptMeasurement& kept) {
    return !kept->sealed || justKept.contains(kept->name);
  });
  const std::size_t room =
      limits.perNamespace > justKept.size() ? limits.perNamespace - justKept.size() : 0;
  if (inNamespace.size() <= room) {
    return {};
  }
  const auto measuredAt = [](const KeptMeasurement& kept) {
    return kept->measurement ? kept->measurement->measuredAt
                             : std::chrono::system_clock::time_point::min();
  };
  std::ranges::sort(inNamespace, std::less<>(), measuredAt);
  inNamespace.resize(inNamespace.size() - room);
  return inNamespace;
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
          {std::string(api::kMeasurementLabel), std::string(kMeasurementVersion)},
          {std::string(api::kEnvironmentLabel), identity.environment()}}},
        {"annotations",
         {{std::string(api::kMeasuredByAnnotation), job.namespaceName() + "/" + job.name()},
          {std::string(api::kMeasuredByUidAnnotation), job.uid()},
          {std::string(api::kTrialNameAnnotation), record.name}}}}},
      {"data",
       {{std::string(kIdentityKey), identity.document.dump()},
        {std::string(kResultKey), result.dump()}}}};
  if (configMap.dump().size() > kMeasurementBytes ||
      configMap["data"][std::string(kResultKey)].get_ref<const std::string&>().size() >
          kResultBytes) {
    return std::nullopt;
  }
  return configMap;
}

tl::expected<tuning::RecordedExit, std::string> reusedRecord(const MeasurementObject& object,
                                                             const MeasurementIdentity& identity,
                                                             const Lookup& lookup) {
  if (!object.measurement) {
    return tl::make_unexpected(object.measurement.error());
  }
  const Measurement& kept = *object.measurement;
  if (kept.identityDigest != sha256Hex(identity.document.dump())) {
    return tl::make_unexpected("data." + std::string(kIdentityKey) +
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
