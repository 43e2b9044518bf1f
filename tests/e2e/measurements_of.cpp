// Test equipment for tests/e2e/inspect.py: what the operator itself reads of measurement
// ConfigMaps, so that the e2e checks hold the kept measurements to the operator's own identity
// hash and seal rather than to a second implementation of them.
//
//   measurements_of KEY < LIST    LIST is a v1 List of ConfigMaps (kubectl get configmaps -o json),
//                                 KEY the seal key as the operator's Secret holds it (base64)
//
// Prints a JSON object mapping each ConfigMap's name to
//   sealed       it bears the operator's seal under KEY
//   hashed       its name is the one the operator gives its data.identity.json
//   environment  kEnvironmentLabel's value for that identity ("" where identity.json is not JSON)
//   readable     "" where the operator would read it as a measurement, else why not

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "controller/objects/measurements.h"

namespace {

using nlohmann::json;
namespace controller = autotune::controller;

constexpr int kExitInvalid = 2;

// The identity its data.identity.json holds, if that is JSON.
std::optional<controller::MeasurementIdentity> identityIn(const json& configMap) {
  const auto data = configMap.value("data", json::object());
  const auto text = data.value("identity.json", std::string());
  auto document = json::parse(text, nullptr, false);
  if (document.is_discarded()) {
    return std::nullopt;
  }
  return controller::MeasurementIdentity{std::move(document)};
}

json factsOf(const json& configMap, const controller::MeasurementSeal& seal) {
  const auto identity = identityIn(configMap);
  const auto name = configMap["metadata"].value("name", std::string());
  const auto decoded = controller::decodeMeasurementObject(configMap, seal);
  return {{"sealed", seal.holds(configMap)},
          {"hashed", identity && identity->name() == name},
          {"environment", identity ? identity->environment() : ""},
          {"readable", decoded && !decoded->measurement ? decoded->measurement.error() : ""}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: measurements_of KEY < LIST\n";
    return kExitInvalid;
  }
  const json list = json::parse(std::cin, nullptr, false);
  if (list.is_discarded() || !list.contains("items") || !list["items"].is_array()) {
    std::cerr << "standard input: not a List of ConfigMaps\n";
    return kExitInvalid;
  }
  const controller::MeasurementSeal seal(argv[1]);
  json facts = json::object();
  for (const auto& configMap : list["items"]) {
    facts[configMap["metadata"].value("name", std::string())] = factsOf(configMap, seal);
  }
  std::cout << facts.dump(1) << '\n';
  return 0;
}
