#pragma once
// ${key} placeholders in the primary container's command, args and env values, found
// by one scanner: validation checks their keys, the trial protocol fills them in.
//
// What a placeholder is not: "$${" stands for a literal "${", for the container's shell to expand
// (`$${HOME}`, `$${NPROC:-8}`), and ${AUTOTUNE_...} names one of the variables every trial gets
// (AUTOTUNE_DS_CONFIG, ...), left for the container to expand, unless it is a multi-node trial's
// rendezvous variable (api::kRendezvousVariables), which is a placeholder. Kubernetes reads only
// $(VAR) in a command, so neither is touched again on the way.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace autotune::api {

// Keys every trial fills in beside the config's own (and, for a multi-node trial, the rendezvous
// variables of api::kRendezvousVariables).
inline constexpr std::string_view kTrialPlaceholder = "trial";
inline constexpr std::string_view kJobPlaceholder = "job";

// The prefix of the variables every trial's container gets, which are the container's to expand.
inline constexpr std::string_view kContainerVariablePrefix = "AUTOTUNE_";

struct Placeholder {
  std::size_t position = 0;  // of its "${", or of an escape's "$${"
  std::size_t length = 0;    // from "${" to "}", both included; 3 for an escape
  std::string_view key;      // within the scanned text; empty for an escape
  bool escape = false;       // "$${": a literal "${"
};

struct PlaceholderScan {
  // In the order of the text, escapes among them; ${AUTOTUNE_...} is not one.
  std::vector<Placeholder> placeholders;
  // Where a "${" that no '}' closes starts; the text from there holds no placeholder.
  std::optional<std::size_t> unterminatedAt;
};

PlaceholderScan scanPlaceholders(std::string_view text);

}  // namespace autotune::api
