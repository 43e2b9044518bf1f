#include "controller/objects/conditions.h"

#include <algorithm>

#include "api/text.h"

namespace autotune::controller {

void setCondition(api::Status& status, std::string_view type, bool value, std::string_view reason,
                  const std::string& message, Timestamp now, std::int64_t generation) {
  const std::string state = value ? "True" : "False";
  std::string bounded = api::headOf(message, kConditionMessageBytes);
  auto& conditions = status.conditions;
  auto found = std::ranges::find(conditions, type, &api::Condition::type);
  if (found == conditions.end()) {
    conditions.push_back({std::string(type), state, std::string(reason), std::move(bounded),
                          formatTime(now), generation});
    return;
  }
  if (found->status != state) {
    found->lastTransitionTime = formatTime(now);
  }
  found->status = state;
  found->reason = reason;
  found->message = std::move(bounded);
  found->observedGeneration = generation;
}

const api::Condition* findCondition(const api::Status& status, std::string_view type) {
  const auto found = std::ranges::find(status.conditions, type, &api::Condition::type);
  return found == status.conditions.end() ? nullptr : &*found;
}

std::string listed(const api::FieldErrors& errors, std::size_t maxBytes) {
  constexpr std::size_t kRoomForTheCount = 32;
  std::string message;
  std::size_t shown = 0;
  for (const auto& error : errors) {
    const std::string item = api::format(error);
    if (message.size() + item.size() + 2 > maxBytes - kRoomForTheCount) {
      break;
    }
    message += (message.empty() ? "" : "; ") + item;
    ++shown;
  }
  if (shown < errors.size()) {
    message += (message.empty() ? "" : "; ") + std::string("and ") +
               std::to_string(errors.size() - shown) + " more";
  }
  return api::headOf(message, maxBytes);
}

}  // namespace autotune::controller
