#include "api/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace autotune::api {
namespace {

constexpr std::string_view kQuantityReason = "must be a quantity such as 32Gi or 34359738368";
constexpr std::string_view kDurationReason = "must be a duration such as 30m or 1h30m";

// Exact arithmetic: 128 bits hold any int64 times any suffix multiplier without rounding, so
// "1.5Gi" is exactly 1610612736 and overflow is detected rather than wrapped.
using Wide = unsigned __int128;
constexpr Wide kWideMax = ~Wide{0};
constexpr auto kInt64Max = static_cast<Wide>(std::numeric_limits<std::int64_t>::max());
// Past this, further fraction digits cannot change the integer result in any case we accept.
constexpr Wide kMantissaLimit = kWideMax / 100;
constexpr int kMaxPowerOfTen = 38;  // 10^38 still fits in 128 bits

bool isDigit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

Wide powerOfTen(int exponent) {
  Wide result = 1;
  for (int i = 0; i < exponent; ++i) {
    result *= 10;
  }
  return result;
}

// A non-negative decimal number as digits / 10^scale, read from the front of `text`.
struct Decimal {
  Wide digits = 0;
  int scale = 0;
};

// Reads "12", "1.5", ".5" or "5." from the front of text; nullopt without a digit or when the
// integer part alone overflows.
std::optional<Decimal> readDecimal(std::string_view& text) {
  Decimal number;
  bool sawDigit = false;
  bool inFraction = false;
  std::size_t i = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !inFraction) {
      inFraction = true;
      continue;
    }
    if (!isDigit(c)) {
      break;
    }
    sawDigit = true;
    if (number.digits > kMantissaLimit) {
      if (!inFraction) {
        return std::nullopt;
      }
      continue;  // an insignificant trailing fraction digit
    }
    number.digits = number.digits * 10 + static_cast<Wide>(c - '0');
    if (inFraction) {
      ++number.scale;
    }
  }
  if (!sawDigit) {
    return std::nullopt;
  }
  text.remove_prefix(i);
  return number;
}

// floor(number * multiplier / 10^extraScale) as an int64, or nullopt on overflow.
std::optional<std::int64_t> scale(const Decimal& number, Wide multiplier, int extraScale) {
  if (number.digits == 0) {
    return 0;
  }
  if (multiplier != 0 && number.digits > kWideMax / multiplier) {
    return std::nullopt;
  }
  const Wide product = number.digits * multiplier;
  const int divisorExponent = number.scale + extraScale;
  const Wide result = divisorExponent > kMaxPowerOfTen ? 0 : product / powerOfTen(divisorExponent);
  if (result > kInt64Max) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(result);
}

struct Suffix {
  std::string_view text;
  Wide multiplier;
};

constexpr Wide kKi = Wide{1} << 10U;
constexpr Wide kKilo = 1000;

constexpr std::array<Suffix, 12> kSuffixes{{
    {"Ki", kKi},
    {"Mi", kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"Ti", kKi* kKi* kKi* kKi},
    {"Pi", kKi* kKi* kKi* kKi* kKi},
    {"Ei", kKi* kKi* kKi* kKi* kKi* kKi},
    {"k", kKilo},
    {"M", kKilo* kKilo},
    {"G", kKilo* kKilo* kKilo},
    {"T", kKilo* kKilo* kKilo* kKilo},
    {"P", kKilo* kKilo* kKilo* kKilo* kKilo},
    {"E", kKilo* kKilo* kKilo* kKilo* kKilo* kKilo},
}};

// An exponent such as "e9", "E+3" or "e-2"; nullopt when text is not one.
std::optional<int> readExponent(std::string_view text) {
  if (text.size() < 2 || (text[0] != 'e' && text[0] != 'E')) {
    return std::nullopt;
  }
  text.remove_prefix(1);
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) {
    return std::nullopt;
  }
  int exponent = 0;
  for (const char c : text) {
    if (!isDigit(c)) {
      return std::nullopt;
    }
    // Anything past 10^99 over- or underflows anyway; clamping keeps the int from overflowing.
    exponent = std::min(exponent * 10 + (c - '0'), 99);
  }
  return negative ? -exponent : exponent;
}

std::optional<std::int64_t> quantityValue(std::string_view text) {
  const std::optional<Decimal> number = readDecimal(text);
  if (!number) {
    return std::nullopt;
  }
  if (text.empty()) {
    return scale(*number, 1, 0);
  }
  for (const Suffix& suffix : kSuffixes) {
    if (text == suffix.text) {
      return scale(*number, suffix.multiplier, 0);
    }
  }
  const std::optional<int> exponent = readExponent(text);
  if (!exponent) {
    return std::nullopt;
  }
  if (*exponent >= 0) {
    if (*exponent > kMaxPowerOfTen) {
      return number->digits == 0 ? std::optional<std::int64_t>(0) : std::nullopt;
    }
    return scale(*number, powerOfTen(*exponent), 0);
  }
  return scale(*number, 1, -*exponent);
}

std::optional<std::int64_t> unitMilliseconds(std::string_view unit) {
  if (unit == "ms") {
    return 1;
  }
  if (unit == "s") {
    return 1000;
  }
  if (unit == "m") {
    return 60 * 1000;
  }
  if (unit == "h") {
    return 60 * 60 * 1000;
  }
  return std::nullopt;
}

std::optional<std::int64_t> durationMilliseconds(std::string_view text) {
  if (text.empty()) {
    return std::nullopt;
  }
  std::int64_t total = 0;
  while (!text.empty()) {
    const std::optional<Decimal> number = readDecimal(text);
    if (!number) {
      return std::nullopt;
    }
    std::size_t unitLength = 0;
    while (unitLength < text.size() &&
           std::isalpha(static_cast<unsigned char>(text[unitLength])) != 0) {
      ++unitLength;
    }
    const std::optional<std::int64_t> unit = unitMilliseconds(text.substr(0, unitLength));
    if (!unit) {
      return std::nullopt;
    }
    text.remove_prefix(unitLength);
    const std::optional<std::int64_t> part = scale(*number, static_cast<Wide>(*unit), 0);
    if (!part || *part > std::numeric_limits<std::int64_t>::max() - total) {
      return std::nullopt;
    }
    total += *part;
  }
  return total;
}

// "1h30m", "1m30s", "1s500ms", "0s": the largest units first, zero parts left out.
std::string formatMilliseconds(std::int64_t milliseconds) {
  if (milliseconds == 0) {
    return "0s";
  }
  constexpr std::array<std::pair<std::string_view, std::int64_t>, 4> kUnits{{
      {"h", 60LL * 60 * 1000},
      {"m", 60LL * 1000},
      {"s", 1000},
      {"ms", 1},
  }};
  std::string text;
  for (const auto& [unit, size] : kUnits) {
    if (milliseconds >= size) {
      text += std::to_string(milliseconds / size);
      text += unit;
      milliseconds %= size;
    }
  }
  return text;
}

}  // namespace

tl::expected<Quantity, std::string> Quantity::parse(std::string_view text) {
  const std::optional<std::int64_t> value = quantityValue(text);
  if (!value) {
    return tl::unexpected(std::string(kQuantityReason));
  }
  return Quantity(*value, std::string(text));
}

Quantity Quantity::fromValue(std::int64_t value) { return {value, std::to_string(value)}; }

tl::expected<Duration, std::string> Duration::parse(std::string_view text) {
  const std::optional<std::int64_t> milliseconds = durationMilliseconds(text);
  if (!milliseconds) {
    return tl::unexpected(std::string(kDurationReason));
  }
  return Duration(std::chrono::milliseconds(*milliseconds), std::string(text));
}

Duration Duration::fromSeconds(double seconds) {
  // Negative or non-finite spans have no text the parser would accept; they mean "no time".
  const double milliseconds = std::isfinite(seconds) ? std::round(seconds * 1000) : 0;
  constexpr double kLimit = 1e18;  // milliseconds: beyond any real timeout, inside 64 bits
  const auto whole = static_cast<std::int64_t>(std::clamp(milliseconds, 0.0, kLimit));
  return {std::chrono::milliseconds(whole), formatMilliseconds(whole)};
}

}  // namespace autotune::api
