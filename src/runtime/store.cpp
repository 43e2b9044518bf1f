#include "runtime/store.h"

namespace autotune::runtime {
namespace {

std::optional<std::uint64_t> number(const std::string& text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

bool notOlder(const std::string& incoming, const std::string& held) {
  const auto incomingNumber = number(incoming);
  const auto heldNumber = number(held);
  return !incomingNumber || !heldNumber || *incomingNumber >= *heldNumber;
}

std::unique_ptr<Indexed<nlohmann::json>> rawStore() {
  return std::make_unique<Indexed<nlohmann::json>>(
      [](const nlohmann::json& object) -> std::optional<nlohmann::json> {
        nlohmann::json kept = object;
        if (const auto metadata = kept.find("metadata");
            metadata != kept.end() && metadata->is_object()) {
          metadata->erase("managedFields");
        }
        return kept;
      },
      keyOf, versionOf);
}

}  // namespace autotune::runtime
