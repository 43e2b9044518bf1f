// Test equipment for tests/e2e/inspect.py: what the operator itself reads of measurement
// ConfigMaps, so that the e2e checks hold the kept measurements to the operator's own identity
// hash and seal rather than to a second implementation of them.
//
//   measurements_of KEY < LIST    LIST is a v1 List of ConfigMaps (kubectl get configmaps -o json),
//                                 KEY the seal key as the operator's Secret holds it (base64)
//
// Prints a JSON object mapping each ConfigMap's name to
//   sealed       it bears the operator's seal under KEY
//   hashed       every identity its data holds is under the name the operator gives it
//   environment  kEnvironmentLabel's value for those identities ("" where one is not JSON, or
//                where they differ)
//   readable     "" where the operator would read it as measurements, else why not
//   trials       the trial each of its measurements is of, by identity name, where readable

#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>

#include "controller/objects/measurements.h"

namespace {

using nlohmann::json;
namespace controller = autotune::controller;

constexpr int kExitInvalid = 2;

// The identities its data holds, each under the name its key gives it; nothing for one that is
// not JSON.
std::map<std::string, std::optional<controller::MeasurementIdentity>> identitiesIn(
    const json& configMap) {
  const auto data = configMap.value("data", json::object());
  const auto name = configMap["metadata"].value("name", std::string());
  std::map<std::string, std::optional<controller::MeasurementIdentity>> identities;
  for (const auto& [key, value] : data.items()) {
    const std::string_view suffix = "identity.json";
    if (!key.ends_with(suffix) || !value.is_string()) {
      continue;
    }
    const std::string named = key == suffix ? name : key.substr(0, key.size() - suffix.size() - 1);
    auto document = json::parse(value.get<std::string>(), nullptr, false);
    identities[named] = document.is_discarded()
                            ? std::nullopt
                            : std::optional(controller::MeasurementIdentity{std::move(document)});
  }
  return identities;
}

json factsOf(const json& configMap, const controller::MeasurementSeal& seal) {
  const auto identities = identitiesIn(configMap);
  bool hashed = !identities.empty();
  std::set<std::string> environments;
  for (const auto& [named, identity] : identities) {
    hashed = hashed && identity && identity->name() == named;
    environments.insert(identity ? identity->environment() : "");
  }
  const auto decoded = controller::decodeMeasurementObject(configMap, seal);
  json trials = json::object();
  if (decoded && decoded->measurements) {
    for (const auto& [identity, measurement] : *decoded->measurements) {
      trials[identity] = measurement.record.name;
    }
  }
  return {{"sealed", seal.holds(configMap)},
          {"hashed", hashed},
          {"environment", environments.size() == 1 ? *environments.begin() : ""},
          {"readable", decoded && !decoded->measurements ? decoded->measurements.error() : ""},
          {"trials", std::move(trials)}};
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
