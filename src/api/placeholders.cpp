#include "api/placeholders.h"

namespace autotune::api {

PlaceholderScan scanPlaceholders(std::string_view text) {
  constexpr std::string_view kOpening = "${";
  PlaceholderScan scan;
  for (std::size_t start = text.find(kOpening); start != std::string_view::npos;) {
    const std::size_t keyStart = start + kOpening.size();
    const std::size_t end = text.find('}', keyStart);
    if (end == std::string_view::npos) {
      scan.unterminatedAt = start;
      break;
    }
    scan.placeholders.push_back({start, end + 1 - start, text.substr(keyStart, end - keyStart)});
    start = text.find(kOpening, end + 1);
  }
  return scan;
}

}  // namespace autotune::api
