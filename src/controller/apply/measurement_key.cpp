#include "controller/apply/measurement_key.h"

#include <openssl/rand.h>

#include <array>

#include "k8s/resources.h"
#include "object/read.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

constexpr std::string_view kKeyField = "key";
// 256 bits, as HMAC-SHA256's own output.
constexpr std::size_t kKeyBytes = 32;

k8s::Error failure(std::string message) {
  k8s::Error error;
  error.message = std::move(message);
  return error;
}

// The key as the Secret holds it: its base64 text is key enough, and never leaves the process.
k8s::Result<MeasurementSeal> sealIn(const json& secret, const std::string& secretName) {
  const json& key = object::member(object::member(secret, "data"), kKeyField);
  if (!key.is_string() || key.get_ref<const std::string&>().size() < kKeyBytes) {
    return tl::make_unexpected(failure("Secret " + secretName + " holds no data." +
                                       std::string(kKeyField) + " of " + std::to_string(kKeyBytes) +
                                       " bytes or more"));
  }
  return MeasurementSeal(key.get<std::string>());
}

k8s::Result<json> created(const k8s::Client& client, const std::string& ns,
                          const std::string& secretName) {
  std::array<unsigned char, kKeyBytes> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    return tl::make_unexpected(failure("no random bytes for the measurement key"));
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string key;
  for (const unsigned char byte : bytes) {
    key += kHex[byte >> 4U];
    key += kHex[byte & 0xFU];
  }
  const json secret = {{"apiVersion", "v1"},
                       {"kind", "Secret"},
                       {"metadata",
                        {{"name", secretName},
                         {"namespace", ns},
                         {"labels", {{"app.kubernetes.io/managed-by", "autotune-operator"}}}}},
                       {"type", "Opaque"},
                       {"stringData", {{std::string(kKeyField), key}}}};
  return client.create(k8s::kSecrets, ns, secret);
}

}  // namespace

k8s::Result<MeasurementSeal> loadMeasurementSeal(const k8s::Client& client, const std::string& ns,
                                                 const std::string& secretName) {
  auto secret = client.get(k8s::kSecrets, ns, secretName);
  if (!secret && secret.error().kind == k8s::ErrorKind::kNotFound) {
    secret = created(client, ns, secretName);
    // Another replica made it first.
    if (!secret && secret.error().kind == k8s::ErrorKind::kAlreadyExists) {
      secret = client.get(k8s::kSecrets, ns, secretName);
    }
  }
  if (!secret) {
    return tl::make_unexpected(secret.error());
  }
  return sealIn(*secret, secretName);
}

}  // namespace autotune::controller
