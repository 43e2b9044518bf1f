#pragma once
// Reading the fields of Kubernetes objects, which may be missing or of an unexpected
// type, without throwing: what the server sends is input, and no reader may fail on any of it.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace autotune::object {

// object[key], or null when `object` is not an object or has no such key.
const nlohmann::json& member(const nlohmann::json& object, std::string_view key);

// object[key] when it is a string, else "".
std::string text(const nlohmann::json& object, std::string_view key);

// An object's metadata, or an empty object when it has none.
const nlohmann::json& metadataOf(const nlohmann::json& object);

// "namespace/name" for namespaced objects, "name" for cluster-scoped ones.
std::string keyOf(const nlohmann::json& object);

// metadata.resourceVersion, or "".
std::string versionOf(const nlohmann::json& object);

// The owner reference with controller: true, or nullptr when nothing controls `object`.
const nlohmann::json* controllerOf(const nlohmann::json& object);

// Whether the object with `uid` (not empty) controls `object`.
bool controlledBy(const nlohmann::json& object, const std::string& uid);

// The ResourceQuota a refusal's message (a Status's) names, as the API server's quota admission
// words it ("exceeded quota: NAME, requested: ..."); nothing when it is no quota's refusal.
std::optional<std::string> exceededQuota(std::string_view message);

}  // namespace autotune::object
