#pragma once
// ${key} placeholders in the primary container's command, args and env values, found
// by one scanner: validation checks their keys, the trial protocol fills them in.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace autotune::api {

// Keys every trial fills in beside the config's own (and, for a multi-node trial, the rendezvous
// variables of api::kRendezvousVariables).
inline constexpr std::string_view kTrialPlaceholder = "trial";
inline constexpr std::string_view kJobPlaceholder = "job";

struct Placeholder {
  std::size_t position = 0;  // of its "${"
  std::size_t length = 0;    // from "${" to "}", both included
  std::string_view key;      // within the scanned text
};

struct PlaceholderScan {
  std::vector<Placeholder> placeholders;  // in the order of the text
  // Where a "${" that no '}' closes starts; the text from there holds no placeholder.
  std::optional<std::size_t> unterminatedAt;
};

PlaceholderScan scanPlaceholders(std::string_view text);

}  // namespace autotune::api
