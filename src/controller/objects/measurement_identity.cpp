// What names and proves a kept measurement (measurements.h): the identity of what a trial
// measures, its hashes, and the operator's seal over what it wrote.
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <array>
#include <set>
#include <utility>

#include "api/labels.h"
#include "controller/objects/measurements.h"
#include "object/read.h"
#include "tuning/protocol.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using object::member;
using object::text;

constexpr std::string_view kReservedEnvPrefix = "AUTOTUNE_";
constexpr std::size_t kHashDigits = 40;

std::string hexOf(const unsigned char* bytes, std::size_t length) {
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string hex;
  for (std::size_t i = 0; i < length; ++i) {
    hex += kHex[bytes[i] >> 4U];
    hex += kHex[bytes[i] & 0xFU];
  }
  return hex;
}

}  // namespace

std::string sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return hexOf(digest.data(), length);
}

std::string measurementHash(std::string_view text) {
  return sha256Hex(text).substr(0, kHashDigits);
}

namespace {

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

// The text a seal is made over: all the operator wrote that another job would trust (the trial's
// name is an annotation of v2 ConfigMaps alone, empty in v3). Other annotations (kubectl's, say)
// may come and go.
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

std::string MeasurementIdentity::name() const {
  return std::string(kMeasurementPrefix) + measurementHash(document.dump());
}

std::string MeasurementIdentity::environment() const {
  json environment = document;
  environment.erase("deepspeedConfig");
  return measurementHash(environment.dump());
}

std::string imageDigest(std::string_view image) {
  const auto at = image.rfind("@sha256:");
  return at == std::string_view::npos ? "" : std::string(image.substr(at + 1));
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
  return measurementHash(environmentDocument(ns, spec, ranOn).dump());
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

}  // namespace autotune::controller
