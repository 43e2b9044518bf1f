#pragma once
// Reading the fields of Kubernetes objects that may be missing or of an unexpected type, without
// throwing: what the API server sends is input, and a reconcile must survive any of it.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace autotune::controller {

// The null that every absent field reads as.
const nlohmann::json& missing();

// object[key], or null when `object` is not an object or has no such key.
const nlohmann::json& member(const nlohmann::json& object, std::string_view key);

// object[key] when it is a string, else "".
std::string text(const nlohmann::json& object, std::string_view key);

}  // namespace autotune::controller
