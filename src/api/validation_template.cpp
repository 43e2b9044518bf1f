// validate()'s checks of the trial template and of the afterTuning Job's: their containers and
// volumes, and the primary container's command, args, env, volume mounts and termination message
// path, which every trial (and the afterTuning Job) rewrites or adds to, with only known
// placeholders.

#include <algorithm>
#include <cctype>
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
#include "api/shell_command.h"
#include "api/validation.h"
#include "api/validation_checks.h"

namespace autotune::api {
namespace {

using checks::fail;
using fields::fieldPath;
using fields::findMember;
using fields::itemPath;
using nlohmann::json;

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

// The containers of the Pod template at `path`, or nullptr after reporting why there are none to
// use.
const json* checkContainers(const json& podTemplate, const std::string& path, FieldErrors& errors) {
  if (podTemplate.is_null() || (podTemplate.is_object() && podTemplate.empty())) {
    fail(errors, path, "is required");
    return nullptr;
  }
  if (!podTemplate.is_object()) {
    fail(errors, path, "must be an object");
    return nullptr;
  }
  const json* podSpec = findMember(podTemplate, "spec");
  if (podSpec != nullptr && !podSpec->is_object()) {
    fail(errors, path + ".spec", "must be an object");
    return nullptr;
  }
  const std::string containersPath = path + ".spec.containers";
  const json* containers = podSpec == nullptr ? nullptr : findMember(*podSpec, "containers");
  if (containers == nullptr || !containers->is_array() || containers->empty()) {
    fail(errors, containersPath, "must list at least one container");
    return nullptr;
  }
  checkKeyedList(findMember(*podSpec, "volumes"), path + ".spec.volumes", {"name"}, errors);
  for (std::size_t i = 0; i < containers->size(); ++i) {
    const json& container = (*containers)[i];
    const std::string containerPath = itemPath(containersPath, i);
    const json* name = findMember(container, "name");
    if (!container.is_object()) {
      fail(errors, containerPath, "must be an object");
    } else if (name == nullptr || name->is_null() ||
               (name->is_string() && name->get_ref<const std::string&>().empty())) {
      fail(errors, containerPath + ".name", "is required");
    } else if (!name->is_string()) {
      fail(errors, containerPath + ".name", "must be a string");
    }
  }
  return containers;
}

// Trials run side by side and one after another: a claim of the template's own (a
// resourceClaimName) would be every trial's at once, so each names a ResourceClaimTemplate, from
// which each trial's Pod gets a claim of its own, deleted with it.
void checkResourceClaims(const json& podTemplate, const std::string& path, FieldErrors& errors) {
  const json* podSpec = findMember(podTemplate, "spec");
  const json* claims = podSpec != nullptr ? findMember(*podSpec, "resourceClaims") : nullptr;
  if (claims == nullptr || !claims->is_array()) {
    return;
  }
  const std::string claimsPath = path + ".spec.resourceClaims";
  for (std::size_t i = 0; i < claims->size(); ++i) {
    const json& claim = (*claims)[i];
    if (claim.is_object() && findMember(claim, "resourceClaimName") != nullptr) {
      fail(errors, itemPath(claimsPath, i) + ".resourceClaimName",
           "one claim would be every trial's: name a ResourceClaimTemplate "
           "(resourceClaimTemplateName), which gives each trial's Pod a claim of its own");
    }
  }
}

// A trial takes whole GPUs, nvidia.com/gpu, which the operator asks for and counts. The MIG devices
// a node of MIG's mixed strategy advertises (nvidia.com/mig-3g.20gb) it neither counts nor gives;
// on a node of the single strategy, nvidia.com/gpu is itself a MIG device, labelled with its
// memory.
void checkWholeGpus(const json& containers, const std::string& path, FieldErrors& errors) {
  for (std::size_t i = 0; i < containers.size(); ++i) {
    const json* resources = findMember(containers[i], "resources");
    for (const auto* kind : {"limits", "requests"}) {
      const json* amounts = resources != nullptr ? findMember(*resources, kind) : nullptr;
      if (amounts == nullptr || !amounts->is_object()) {
        continue;
      }
      for (const auto& [name, amount] : amounts->items()) {
        if (name.starts_with("nvidia.com/mig-")) {
          fail(errors,
               fieldPath(itemPath(path + ".spec.containers", i) + ".resources." + kind, name),
               "a trial takes whole GPUs, nvidia.com/gpu (spec.resources.gpusPerTrial), which the "
               "operator asks for itself: MIG devices of the mixed strategy are neither counted "
               "nor given; on nodes of MIG's single strategy nvidia.com/gpu is a MIG device");
        }
      }
    }
  }
}

std::string unknownPlaceholder(const std::string& key) {
  if (std::ranges::find(kRendezvousVariables, key) != kRendezvousVariables.end()) {
    return "${" + key +
           "} is set only for multi-node trials (spec.resources.nodesPerTrial above 1)";
  }
  std::string message = "unknown placeholder ${" + key + "}";
  // A shell's variable (HOME, NPROC:-8), not a key of the config mistyped.
  const bool shellVariable = std::ranges::none_of(
      key, [](char c) { return std::islower(static_cast<unsigned char>(c)) != 0 || c == '.'; });
  if (shellVariable) {
    message += ": a variable for the container's shell is written $${" + key + "}";
  }
  return message;
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
    if (!placeholder.escape && !known->contains(key)) {
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

// The placeholders a command may use: the config's keys, the trial's and job's names, and with
// `rendezvous` the variables of a multi-node trial.
std::set<std::string> knownPlaceholders(const Spec& spec, bool rendezvous) {
  const std::vector<std::string> keyPaths = configKeyPaths(spec.deepspeedConfig);
  std::set<std::string> known(keyPaths.begin(), keyPaths.end());
  known.emplace(kTrialPlaceholder);
  known.emplace(kJobPlaceholder);
  if (rendezvous) {
    known.insert(kRendezvousVariables.begin(), kRendezvousVariables.end());
  }
  return known;
}

const json* containerNamed(const json& containers, const std::string& name) {
  const auto found = std::find_if(containers.begin(), containers.end(), [&](const json& c) {
    const json* given = findMember(c, "name");
    return given != nullptr && given->is_string() && *given == name;
  });
  return found == containers.end() ? nullptr : &*found;
}

// The index of `container` among `containers`, as a path.
std::string containerPath(const std::string& templatePath, const json& containers,
                          const json& container) {
  const auto index = static_cast<std::size_t>(&container - &containers.front());
  return itemPath(templatePath + ".spec.containers", index);
}

// A map of string values, as labels are, at `path`, if given.
void checkStringMap(const json* map, const std::string& path, FieldErrors& errors) {
  if (map == nullptr || map->is_null()) {
    return;
  }
  if (!map->is_object()) {
    fail(errors, path, "must be an object");
    return;
  }
  for (const auto& [key, value] : map->items()) {
    if (!value.is_string()) {
      fail(errors, fieldPath(path, key), "must be a string");
    }
  }
}

// A shell run with -c gets spec.argMappings' flags after its script, as the script's positional
// parameters (shell_command.h): the trial measures the values asked for only if the script passes
// them on, and does not set them itself.
void checkScriptForwardsFlags(const json& container, const std::string& path, const Spec& spec,
                              FieldErrors& errors) {
  if (spec.argMappings.empty()) {
    return;
  }
  std::vector<std::string> argv;
  std::vector<std::string> paths;
  for (const std::string_view field : {"command", "args"}) {
    const json* list = findMember(container, field);
    if (list == nullptr || !list->is_array()) {
      continue;
    }
    for (std::size_t i = 0; i < list->size(); ++i) {
      if (!(*list)[i].is_string()) {
        return;  // its own error says so
      }
      argv.push_back((*list)[i].get<std::string>());
      paths.push_back(itemPath(fieldPath(path, field), i));
    }
  }
  const auto script = shellScriptIndex(argv);
  if (!script) {
    return;
  }
  const std::string& text = argv[*script];
  if (!forwardsArguments(text)) {
    fail(errors, paths[*script],
         "a shell script gets the flags of spec.argMappings as its arguments, and passes them on "
         "only with \"$@\" (python train.py \"$@\"): add it, or map no flags");
  }
  for (const auto& [key, flag] : spec.argMappings) {
    if (setsFlag(text, flag)) {
      std::string message = "sets " + flag;
      message += " itself, which spec.argMappings passes through \"$@\" with each trial's ";
      message += key;
      message += ": remove it from the script";
      fail(errors, paths[*script], message);
    }
  }
}

}  // namespace

void checks::checkTemplate(const Spec& spec, FieldErrors& errors) {
  const json* containers = checkContainers(spec.podTemplate, "spec.template", errors);
  checkResourceClaims(spec.podTemplate, "spec.template", errors);
  if (containers != nullptr) {
    checkWholeGpus(*containers, "spec.template", errors);
  }
  // An unnamed first container leaves the default empty; its own error covers that.
  if (containers == nullptr || spec.primaryContainer.empty()) {
    return;
  }
  const json* primary = containerNamed(*containers, spec.primaryContainer);
  if (primary == nullptr) {
    fail(errors, "spec.primaryContainer",
         "no container named \"" + spec.primaryContainer + "\" in spec.template");
    return;
  }
  const std::set<std::string> known = knownPlaceholders(spec, spec.resources.nodesPerTrial > 1);
  const std::string path = containerPath("spec.template", *containers, *primary);
  checkPrimaryContainer(*primary, path, spec.deepspeedConfig.is_object() ? &known : nullptr,
                        errors);
  checkScriptForwardsFlags(*primary, path, spec, errors);
}

// The afterTuning Job runs once, from its template's container named spec.primaryContainer (its
// first without one), with the best trial's values: what the API server would refuse when the
// search is over is refused now, and what the operator fills in is checked as a trial's is.
void checks::checkAfterTuning(const Spec& spec, FieldErrors& errors) {
  if (!spec.afterTuning) {
    return;
  }
  constexpr std::string_view kPath = "spec.afterTuning";
  const json* metadata = findMember(*spec.afterTuning, "metadata");
  if (metadata != nullptr && !metadata->is_null() && !metadata->is_object()) {
    fail(errors, std::string(kPath) + ".metadata", "must be an object");
  } else if (metadata != nullptr && metadata->is_object()) {
    checkStringMap(findMember(*metadata, "labels"), std::string(kPath) + ".metadata.labels",
                   errors);
  }
  const json* jobSpec = findMember(*spec.afterTuning, "spec");
  if (jobSpec == nullptr || !jobSpec->is_object()) {
    fail(errors, std::string(kPath) + ".spec", "must be an object holding the Job's template");
    return;
  }
  const std::string templatePath = std::string(kPath) + ".spec.template";
  const json* podTemplate = findMember(*jobSpec, "template");
  if (podTemplate == nullptr) {
    fail(errors, templatePath, "is required");
    return;
  }
  const json* containers = checkContainers(*podTemplate, templatePath, errors);
  if (containers == nullptr) {
    return;
  }
  const json* restartPolicy = findMember(*findMember(*podTemplate, "spec"), "restartPolicy");
  if (restartPolicy != nullptr && !restartPolicy->is_null() && *restartPolicy != "Never" &&
      *restartPolicy != "OnFailure") {
    fail(errors, templatePath + ".spec.restartPolicy",
         "must be Never or OnFailure: a Job's Pods may not restart Always (Never when unset)");
  }
  const json* primary = containerNamed(*containers, spec.primaryContainer);
  if (primary == nullptr && containers->front().is_object()) {
    primary = &containers->front();
  }
  if (primary == nullptr) {
    return;
  }
  const std::set<std::string> known = knownPlaceholders(spec, false);
  const std::string path = containerPath(templatePath, *containers, *primary);
  checkPrimaryContainer(*primary, path, spec.deepspeedConfig.is_object() ? &known : nullptr,
                        errors);
  checkScriptForwardsFlags(*primary, path, spec, errors);
}

}  // namespace autotune::api
