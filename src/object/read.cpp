#include "object/read.h"

#include <algorithm>

namespace autotune::object {

const nlohmann::json& member(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kMissing;
  if (!object.is_object()) {
    return kMissing;
  }
  const auto found = object.find(key);
  return found != object.end() ? *found : kMissing;
}

std::string text(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json& value = member(object, key);
  return value.is_string() ? value.get<std::string>() : "";
}

const nlohmann::json& metadataOf(const nlohmann::json& object) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const nlohmann::json& metadata = member(object, "metadata");
  return metadata.is_object() ? metadata : kEmpty;
}

std::string keyOf(const nlohmann::json& object) {
  const auto& metadata = metadataOf(object);
  const std::string ns = text(metadata, "namespace");
  const std::string name = text(metadata, "name");
  return ns.empty() ? name : ns + "/" + name;
}

std::string versionOf(const nlohmann::json& object) {
  return text(metadataOf(object), "resourceVersion");
}

const nlohmann::json* controllerOf(const nlohmann::json& object) {
  const nlohmann::json& owners = member(metadataOf(object), "ownerReferences");
  if (!owners.is_array()) {
    return nullptr;
  }
  const auto controller =
      std::find_if(owners.begin(), owners.end(),
                   [](const nlohmann::json& owner) { return member(owner, "controller") == true; });
  return controller == owners.end() ? nullptr : &*controller;
}

bool controlledBy(const nlohmann::json& object, const std::string& uid) {
  const nlohmann::json* controller = controllerOf(object);
  return !uid.empty() && controller != nullptr && text(*controller, "uid") == uid;
}

std::optional<std::string> exceededQuota(std::string_view message) {
  constexpr std::string_view kExceeded = "exceeded quota: ";
  const auto start = message.find(kExceeded);
  if (start == std::string_view::npos) {
    return std::nullopt;
  }
  const auto from = start + kExceeded.size();
  return std::string(message.substr(from, message.find(',', from) - from));
}

}  // namespace autotune::object
