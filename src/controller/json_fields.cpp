#include "controller/json_fields.h"

namespace autotune::controller {

const nlohmann::json& missing() {
  static const nlohmann::json kNull;
  return kNull;
}

const nlohmann::json& member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) {
    return missing();
  }
  const auto found = object.find(key);
  return found != object.end() ? *found : missing();
}

std::string text(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& value = member(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

}  // namespace autotune::controller
