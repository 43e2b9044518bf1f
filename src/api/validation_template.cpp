// validate()'s checks of the trial template: its containers and volumes, and the primary
// container's command, args, env, volume mounts and termination message path, which every trial
// rewrites or adds to, with only known placeholders.

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/codec.h"
#include "api/fields.h"
#include "api/job.h"
#include "api/placeholders.h"
#include "api/validation.h"
#include "api/validation_checks.h"

namespace autotune::api {
namespace {

using checks::fail;
using fields::fieldPath;
using fields::findMember;
using fields::itemPath;
using nlohmann::json;

constexpr std::string_view kContainersPath = "spec.template.spec.containers";

// A list the trial Pod merges its own entries into, matching them by these fields (env and
// volumes by name, volume mounts also by mountPath): each entry an object with them as strings.
// Returns whether the list is usable.
bool checkKeyedList(const json* list, const std::string& listPath,
                    std::initializer_list<std::string_view> keys, FieldErrors& errors) {
  if (list == nullptr || list->is_null()) {
    return false;
  }
  if (!list->is_array()) {
    fail(errors, listPath, "must be a list");
    return false;
  }
  for (std::size_t i = 0; i < list->size(); ++i) {
    const json& entry = (*list)[i];
    const std::string entryPath = itemPath(listPath, i);
    if (!entry.is_object()) {
      fail(errors, entryPath, "must be an object");
      continue;
    }
    for (const std::string_view key : keys) {
      const json* field = findMember(entry, key);
      if (field == nullptr || !field->is_string()) {
        fail(errors, fieldPath(entryPath, key), "must be a string");
      }
    }
  }
  return true;
}

// The template's containers, or nullptr after reporting why there are none to use.
const json* checkContainers(const json& podTemplate, FieldErrors& errors) {
  if (podTemplate.is_null() || (podTemplate.is_object() && podTemplate.empty())) {
    fail(errors, "spec.template", "is required");
    return nullptr;
  }
  if (!podTemplate.is_object()) {
    fail(errors, "spec.template", "must be an object");
    return nullptr;
  }
  const json* podSpec = findMember(podTemplate, "spec");
  if (podSpec != nullptr && !podSpec->is_object()) {
    fail(errors, "spec.template.spec", "must be an object");
    return nullptr;
  }
  const json* containers = podSpec == nullptr ? nullptr : findMember(*podSpec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    fail(errors, std::string(kContainersPath), "must list at least one container");
    return nullptr;
  }
  checkKeyedList(findMember(*podSpec, "volumes"), "spec.template.spec.volumes", {"name"}, errors);
  for (std::size_t i = 0; i < containers->size(); ++i) {
    const json& container = (*containers)[i];
    const std::string path = itemPath(kContainersPath, i);
    const json* name = findMember(container, "name");
    if (!container.is_object()) {
      fail(errors, path, "must be an object");
    } else if (name == nullptr || name->is_null() ||
               (name->is_string() && name->get_ref<const std::string&>().empty())) {
      fail(errors, path + ".name", "is required");
    } else if (!name->is_string()) {
      fail(errors, path + ".name", "must be a string");
    }
  }
  return containers;
}

std::string unknownPlaceholder(const std::string& key) {
  if (std::ranges::find(kRendezvousVariables, key) != kRendezvousVariables.end()) {
    return "${" + key +
           "} is set only for multi-node trials (spec.resources.nodesPerTrial above 1)";
  }
  return "unknown placeholder ${" + key + "}";
}

// `known` is nullptr when the config is unusable: every placeholder would look unknown, and the
// config's own error says enough.
void checkPlaceholdersIn(std::string_view text, const std::string& path,
                         const std::set<std::string>* known, FieldErrors& errors) {
  if (known == nullptr) {
    return;
  }
  const PlaceholderScan scan = scanPlaceholders(text);
  for (const Placeholder& placeholder : scan.placeholders) {
    const std::string key(placeholder.key);
    if (!known->contains(key)) {
      fail(errors, path, unknownPlaceholder(key));
    }
  }
  if (scan.unterminatedAt) {
    fail(errors, path,
         "unterminated placeholder " + std::string(text.substr(*scan.unterminatedAt)));
  }
}

void checkEnv(const json* env, const std::string& envPath, const std::set<std::string>* known,
              FieldErrors& errors) {
  if (!checkKeyedList(env, envPath, {"name"}, errors)) {
    return;
  }
  for (std::size_t i = 0; i < env->size(); ++i) {
    const std::string entryPath = itemPath(envPath, i);
    const json* value = findMember((*env)[i], "value");
    if (value != nullptr && !value->is_null() && !value->is_string()) {
      fail(errors, entryPath + ".value", "must be a string");
    } else if (value != nullptr && value->is_string()) {
      checkPlaceholdersIn(value->get_ref<const std::string&>(), entryPath + ".value", known,
                          errors);
    }
  }
}

// The primary container's command, args and env, which every trial rewrites: lists of strings,
// and env entries with a string name and value, with only known placeholders.
void checkPrimaryContainer(const json& container, const std::string& path,
                           const std::set<std::string>* known, FieldErrors& errors) {
  for (const std::string_view field : {"command", "args"}) {
    const json* list = findMember(container, field);
    if (list == nullptr || list->is_null()) {
      continue;
    }
    const std::string listPath = fieldPath(path, field);
    if (!list->is_array()) {
      fail(errors, listPath, "must be a list of strings");
      continue;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) {
        fail(errors, itemPath(listPath, i), "must be a string");
      } else {
        checkPlaceholdersIn((*list)[i].get_ref<const std::string&>(), itemPath(listPath, i), known,
                            errors);
      }
    }
  }
  checkEnv(findMember(container, "env"), fieldPath(path, "env"), known, errors);
  checkKeyedList(findMember(container, "volumeMounts"), fieldPath(path, "volumeMounts"),
                 {"name", "mountPath"}, errors);
  // Where the trial writes its metrics: the trial Pod keeps the template's path.
  const json* messagePath = findMember(container, "terminationMessagePath");
  if (messagePath != nullptr && !messagePath->is_null() && !messagePath->is_string()) {
    fail(errors, fieldPath(path, "terminationMessagePath"), "must be a string");
  }
}

}  // namespace

void checks::checkTemplate(const Spec& spec, FieldErrors& errors) {
  const json* containers = checkContainers(spec.podTemplate, errors);
  // An unnamed first container leaves the default empty; its own error covers that.
  if (containers == nullptr || spec.primaryContainer.empty()) {
    return;
  }
  const auto primary = std::find_if(containers->begin(), containers->end(), [&](const json& c) {
    const json* name = findMember(c, "name");
    return name != nullptr && name->is_string() && *name == spec.primaryContainer;
  });
  if (primary == containers->end()) {
    fail(errors, "spec.primaryContainer",
         "no container named \"" + spec.primaryContainer + "\" in spec.template");
    return;
  }
  const std::vector<std::string> keyPaths = configKeyPaths(spec.deepspeedConfig);
  std::set<std::string> known(keyPaths.begin(), keyPaths.end());
  known.emplace(kTrialPlaceholder);
  known.emplace(kJobPlaceholder);
  if (spec.resources.nodesPerTrial > 1) {
    known.insert(kRendezvousVariables.begin(), kRendezvousVariables.end());
  }
  const auto index = static_cast<std::size_t>(std::distance(containers->begin(), primary));
  checkPrimaryContainer(*primary, itemPath(kContainersPath, index),
                        spec.deepspeedConfig.is_object() ? &known : nullptr, errors);
}

}  // namespace autotune::api
