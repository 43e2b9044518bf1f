#include "k8s/kubeconfig_yaml.h"

#include <utility>
#include <vector>

namespace autotune::k8s::kubeconfig {
namespace {

namespace fs = std::filesystem;

Parsed<std::vector<std::string>> strings(const YAML::Node& entry, const char* key,
                                         const std::string& owner) {
  std::vector<std::string> values;
  const auto list = child(entry, key);
  if (!list) {
    return values;
  }
  const std::string wrong = owner + ": " + key + " must be a list of strings";
  if (!list->IsSequence()) {
    return tl::unexpected(wrong);
  }
  for (const auto& value : *list) {
    if (!value.IsScalar()) {
      return tl::unexpected(wrong);
    }
    values.push_back(value.Scalar());
  }
  return values;
}

Parsed<std::vector<std::pair<std::string, std::string>>> environmentOf(const YAML::Node& exec,
                                                                       const std::string& owner) {
  std::vector<std::pair<std::string, std::string>> variables;
  const auto list = child(exec, "env");
  if (!list) {
    return variables;
  }
  if (!list->IsSequence()) {
    return tl::unexpected(owner + ": env must be a list of {name, value}");
  }
  for (const auto& variable : *list) {
    const auto name = scalarAt(variable, "name");
    if (!name || name->empty()) {
      return tl::unexpected(owner + ": env: every entry needs a name");
    }
    variables.emplace_back(*name, scalarAt(variable, "value").value_or(""));
  }
  return variables;
}

// v1 asks for interactiveMode; v1beta1 takes IfAvailable when it is unset, as kubectl does.
Parsed<ExecPlugin::Interactive> interactiveMode(const YAML::Node& exec,
                                                const std::string& apiVersion,
                                                const std::string& owner) {
  const auto mode = scalarAt(exec, "interactiveMode");
  if (!mode) {
    if (apiVersion == kExecCredentialV1) {
      return tl::unexpected(owner +
                            ": interactiveMode must be set (Never, IfAvailable or Always) " +
                            "with apiVersion " + std::string(kExecCredentialV1));
    }
    return ExecPlugin::Interactive::kIfAvailable;
  }
  if (*mode == "Never") {
    return ExecPlugin::Interactive::kNever;
  }
  if (*mode == "IfAvailable") {
    return ExecPlugin::Interactive::kIfAvailable;
  }
  if (*mode == "Always") {
    return ExecPlugin::Interactive::kAlways;
  }
  return tl::unexpected(owner + ": interactiveMode must be Never, IfAvailable or Always, not " +
                        inQuotes(*mode));
}

}  // namespace

std::string inQuotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

std::optional<YAML::Node> child(const YAML::Node& node, const char* key) {
  if (!node.IsDefined() || !node.IsMap()) {
    return std::nullopt;
  }
  YAML::Node value = node[key];
  if (!value.IsDefined() || value.IsNull()) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> scalarAt(const YAML::Node& node, const char* key) {
  const auto value = child(node, key);
  if (!value || !value->IsScalar()) {
    return std::nullopt;
  }
  return value->Scalar();
}

fs::path resolved(const fs::path& directory, const std::string& file) {
  const fs::path path(file);
  return path.is_relative() ? directory / path : path;
}

Parsed<bool> flag(const YAML::Node& entry, const std::string& owner, const char* key) {
  const auto value = child(entry, key);
  if (!value) {
    return false;
  }
  bool set = false;
  if (!value->IsScalar() || !YAML::convert<bool>::decode(*value, set)) {
    return tl::unexpected(owner + ": " + key + " must be true or false");
  }
  return set;
}

Parsed<ExecPlugin> execPlugin(const YAML::Node& exec, const fs::path& directory,
                              const std::string& owner) {
  ExecPlugin plugin;
  plugin.apiVersion = scalarAt(exec, "apiVersion").value_or("");
  if (plugin.apiVersion != kExecCredentialV1 && plugin.apiVersion != kExecCredentialV1Beta1) {
    return tl::unexpected(owner + ": apiVersion must be " + std::string(kExecCredentialV1) +
                          " or " + std::string(kExecCredentialV1Beta1) + ", not " +
                          inQuotes(plugin.apiVersion));
  }
  plugin.command = scalarAt(exec, "command").value_or("");
  if (plugin.command.empty()) {
    return tl::unexpected(owner + " names no command");
  }
  // A bare name is looked up on the PATH; a path names a file, relative to the kubeconfig.
  if (plugin.command.find('/') != std::string::npos) {
    plugin.command = resolved(directory, plugin.command).string();
  }
  auto args = strings(exec, "args", owner);
  if (!args) {
    return tl::unexpected(args.error());
  }
  plugin.args = std::move(*args);
  auto env = environmentOf(exec, owner);
  if (!env) {
    return tl::unexpected(env.error());
  }
  plugin.env = std::move(*env);
  auto clusterInfo = flag(exec, owner, "provideClusterInfo");
  if (!clusterInfo) {
    return tl::unexpected(clusterInfo.error());
  }
  plugin.provideClusterInfo = *clusterInfo;
  auto interactive = interactiveMode(exec, plugin.apiVersion, owner);
  if (!interactive) {
    return tl::unexpected(interactive.error());
  }
  plugin.interactiveMode = *interactive;
  plugin.installHint = scalarAt(exec, "installHint").value_or("");
  return plugin;
}

}  // namespace autotune::k8s::kubeconfig
