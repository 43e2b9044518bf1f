#pragma once
// Times in RFC 3339, as the API server stamps objects and the logs stamp lines.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace autotune::object {

using TimePoint = std::chrono::system_clock::time_point;

// 2026-01-02T03:04:05Z as the API server writes it, also with fractional seconds or a numeric
// offset. Nothing for other text, or for a time before 1970 or from 2200 on.
std::optional<TimePoint> parseTime(std::string_view text);

enum class Fraction {
  kWholeSeconds,             // metav1.Time
  kMilliseconds,             // log lines
  kMicroseconds,             // metav1.MicroTime
  kMillisecondsUnlessWhole,  // metav1.Time's whole seconds, milliseconds when there are some
};

// In UTC, with the fraction of the second asked for.
std::string formatTime(TimePoint time, Fraction fraction);

}  // namespace autotune::object
