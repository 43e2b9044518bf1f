#include "api/placeholders.h"

#include <algorithm>

#include "api/job.h"

namespace autotune::api {

PlaceholderScan scanPlaceholders(std::string_view text) {
  constexpr std::string_view kOpening = "${";
  constexpr std::string_view kEscape = "$${";
  PlaceholderScan scan;
  for (std::size_t start = text.find('$'); start != std::string_view::npos;) {
    if (text.substr(start).starts_with(kEscape)) {
      scan.placeholders.push_back({start, kEscape.size(), {}, true});
      start = text.find('$', start + kEscape.size());
      continue;
    }
    if (!text.substr(start).starts_with(kOpening)) {
      start = text.find('$', start + 1);
      continue;
    }
    const std::size_t keyStart = start + kOpening.size();
    const std::size_t end = text.find('}', keyStart);
    if (end == std::string_view::npos) {
      scan.unterminatedAt = start;
      break;
    }
    const std::string_view key = text.substr(keyStart, end - keyStart);
    const bool rendezvous =
        std::ranges::find(kRendezvousVariables, key) != kRendezvousVariables.end();
    if (rendezvous || !key.starts_with(kContainerVariablePrefix)) {
      scan.placeholders.push_back({start, end + 1 - start, key});
    }
    start = text.find('$', end + 1);
  }
  return scan;
}

}  // namespace autotune::api
