#pragma once
// Kubernetes-style quantities ("32Gi") and Go-style durations ("1h30m"), kept with the text the
// user wrote so that they print back unchanged.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace autotune::api {

class Quantity {
 public:
  // Accepts a decimal number with an optional binary (Ki Mi Gi Ti Pi Ei) or decimal
  // (k M G T P E) suffix, or an exponent (e.g. 34e9). The error says what was expected.
  static tl::expected<Quantity, std::string> parse(std::string_view text);
  static Quantity fromValue(std::int64_t value);

  std::int64_t value() const { return value_; }
  const std::string& text() const { return text_; }

 private:
  Quantity(std::int64_t value, std::string text) : value_(value), text_(std::move(text)) {}
  std::int64_t value_;
  std::string text_;
};

class Duration {
 public:
  // Accepts a sequence of decimal numbers each with a unit (ms, s, m, h), e.g. 90s, 1h30m, 1.5h.
  static tl::expected<Duration, std::string> parse(std::string_view text);
  static Duration fromSeconds(double seconds);

  std::chrono::milliseconds value() const { return value_; }
  double seconds() const { return std::chrono::duration<double>(value_).count(); }
  const std::string& text() const { return text_; }

 private:
  Duration(std::chrono::milliseconds value, std::string text)
      : value_(value), text_(std::move(text)) {}
  std::chrono::milliseconds value_;
  std::string text_;
};

}  // namespace autotune::api
