#pragma once
// Reading a kubeconfig's YAML (config.h): the lookups every entry uses, and an exec credential
// plugin's entry. Internal to the k8s library.

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "k8s/config.h"

namespace autotune::k8s::kubeconfig {

// Internal steps report a bare reason; the public functions prefix it with where it came from.
template <typename T>
using Parsed = tl::expected<T, std::string>;

std::string inQuotes(std::string_view text);

// The value under `key` of a mapping; nothing when `node` is not a mapping or the value is absent
// or null.
std::optional<YAML::Node> child(const YAML::Node& node, const char* key);
std::optional<std::string> scalarAt(const YAML::Node& node, const char* key);

// A path the kubeconfig names, relative to its own folder unless absolute.
std::filesystem::path resolved(const std::filesystem::path& directory, const std::string& file);

// False unless the kubeconfig says true: skipping verification is never a default.
Parsed<bool> flag(const YAML::Node& entry, const std::string& owner, const char* key);

// A user's `exec:` entry; `owner` names the user in errors.
Parsed<ExecPlugin> execPlugin(const YAML::Node& exec, const std::filesystem::path& directory,
                              const std::string& owner);

}  // namespace autotune::k8s::kubeconfig
