#include "object/time.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>

namespace autotune::object {
namespace {

std::optional<int> digits(std::string_view text, std::size_t position, std::size_t count) {
  if (position + count > text.size()) {
    return std::nullopt;
  }
  int value = 0;
  const char* first = text.data() + position;
  const auto [end, error] = std::from_chars(first, first + count, value);
  if (error != std::errc() || end != first + count || *first == '-' || *first == '+') {
    return std::nullopt;
  }
  return value;
}

// The fraction of a second after `position` ('.' and at least one digit), moving `position` past
// it; zero when there is none, nothing when the dot has no digit.
std::optional<std::chrono::nanoseconds> fractionAt(std::string_view text, std::size_t& position) {
  std::chrono::nanoseconds fraction{0};
  if (position >= text.size() || text[position] != '.') {
    return fraction;
  }
  ++position;
  const std::size_t start = position;
  std::int64_t scale = 1'000'000'000;
  while (position < text.size() && text[position] >= '0' && text[position] <= '9') {
    scale /= 10;
    fraction += std::chrono::nanoseconds((text[position] - '0') * scale);
    ++position;
  }
  if (position == start) {
    return std::nullopt;
  }
  return fraction;
}

// How far ahead of UTC the zone is: "Z", or "+HH:MM" / "-HH:MM".
std::optional<std::chrono::minutes> zoneOffset(std::string_view zone) {
  if (zone == "Z" || zone == "z") {
    return std::chrono::minutes(0);
  }
  if (zone.size() != 6 || (zone[0] != '+' && zone[0] != '-') || zone[3] != ':') {
    return std::nullopt;
  }
  const auto hours = digits(zone, 1, 2);
  const auto minutes = digits(zone, 4, 2);
  if (!hours || !minutes || *hours > 23 || *minutes > 59) {
    return std::nullopt;
  }
  const std::chrono::minutes offset = std::chrono::hours(*hours) + std::chrono::minutes(*minutes);
  return zone[0] == '-' ? -offset : offset;
}

}  // namespace

std::optional<TimePoint> parseTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS
  constexpr std::size_t kSecondsEnd = 19;
  if (text.size() < kSecondsEnd + 1 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  const auto year = digits(text, 0, 4);
  const auto month = digits(text, 5, 2);
  const auto day = digits(text, 8, 2);
  const auto hour = digits(text, 11, 2);
  const auto minute = digits(text, 14, 2);
  const auto second = digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 ||
      *second > 59) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(*year),
                                         std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  std::size_t position = kSecondsEnd;
  const auto fraction = fractionAt(text, position);
  const auto offset = zoneOffset(text.substr(position));
  if (!date.ok() || !fraction || !offset) {
    return std::nullopt;
  }
  const auto local = std::chrono::sys_days(date) + std::chrono::hours(*hour) +
                     std::chrono::minutes(*minute) + std::chrono::seconds(*second) - *offset;
  // Nothing the API server stamps is older than the epoch, and two times after it yet before
  // kLatest are closer than a nanosecond clock's 292 years: every span between them, and every
  // deadline a timeout after them, can be counted without overflow.
  constexpr std::chrono::sys_days kLatest = std::chrono::year(2200) / 1 / 1;
  if (local.time_since_epoch().count() < 0 || local >= kLatest) {
    return std::nullopt;
  }
  return std::chrono::time_point_cast<TimePoint::duration>(local) +
         std::chrono::duration_cast<TimePoint::duration>(*fraction);
}

std::string formatTime(TimePoint time, Fraction fraction) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(time);
  const auto days = std::chrono::floor<std::chrono::days>(seconds);
  const std::chrono::year_month_day date(days);
  const std::chrono::hh_mm_ss clock(seconds - days);
  std::array<char, 40> buffer{};
  const int length = std::snprintf(
      buffer.data(), buffer.size(), "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(date.year()),
      static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
      static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
      static_cast<int>(clock.seconds().count()));
  std::string result(buffer.data(), static_cast<std::size_t>(length));
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(time - seconds).count();
  if (fraction == Fraction::kMicroseconds) {
    std::snprintf(buffer.data(), buffer.size(), ".%06d", static_cast<int>(micros));
    result += buffer.data();
  } else if (fraction == Fraction::kMilliseconds ||
             (fraction == Fraction::kMillisecondsUnlessWhole && micros / 1000 != 0)) {
    std::snprintf(buffer.data(), buffer.size(), ".%03d", static_cast<int>(micros / 1000));
    result += buffer.data();
  }
  return result + "Z";
}

}  // namespace autotune::object
