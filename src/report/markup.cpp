#include "report/markup.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace autotune::report::markup {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

// The length of the well-formed UTF-8 sequence at `at` that XML allows, or 0.
std::size_t sequenceLength(std::string_view text, std::size_t at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  std::uint32_t point = 0;
  if ((lead & 0xE0U) == 0xC0U) {
    length = 2;
    point = lead & 0x1FU;
  } else if ((lead & 0xF0U) == 0xE0U) {
    length = 3;
    point = lead & 0x0FU;
  } else if ((lead & 0xF8U) == 0xF0U) {
    length = 4;
    point = lead & 0x07U;
  } else {
    return 0;
  }
  if (at + length > text.size()) {
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    const auto next = static_cast<unsigned char>(text[at + i]);
    if ((next & 0xC0U) != 0x80U) {
      return 0;
    }
    point = (point << 6U) | (next & 0x3FU);
  }
  constexpr std::array<std::uint32_t, 5> kSmallest = {0, 0, 0x80, 0x800, 0x10000};
  const bool overlong = point < kSmallest.at(length);
  const bool surrogate = point >= 0xD800 && point <= 0xDFFF;
  const bool noCharacter = point > 0x10FFFF || point == 0xFFFE || point == 0xFFFF;
  return overlong || surrogate || noCharacter ? 0 : length;
}

std::string_view reference(char c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    case '\'':
      return "&#39;";
    default:
      return {};
  }
}

bool allowedControl(char c) { return c == '\n' || c == '\t'; }

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = sequenceLength(text, at);
    const char c = text[at];
    if (length == 0) {
      out += kReplacement;
      ++at;
      continue;
    }
    if (length == 1 && static_cast<unsigned char>(c) < 0x20 && !allowedControl(c)) {
      out += c == '\r' ? std::string_view() : kReplacement;
    } else if (length == 1 && c == '\x7F') {
      out += kReplacement;
    } else if (const auto ref = reference(c); length == 1 && !ref.empty()) {
      out += ref;
    } else {
      out.append(text.substr(at, length));
    }
    at += length;
  }
  return out;
}

namespace {

std::string startTag(std::string_view name, const Attributes& attributes) {
  std::string tag = "<" + std::string(name);
  for (const auto& attribute : attributes) {
    tag += " ";
    tag += attribute.name;
    tag += "=\"" + escape(attribute.value) + "\"";
  }
  return tag;
}

}  // namespace

std::string element(std::string_view name, const Attributes& attributes, std::string_view content) {
  return startTag(name, attributes) + ">" + std::string(content) + "</" + std::string(name) + ">";
}

std::string textElement(std::string_view name, const Attributes& attributes,
                        std::string_view text) {
  return element(name, attributes, escape(text));
}

std::string emptyElement(std::string_view name, const Attributes& attributes) {
  return startTag(name, attributes) + "/>";
}

std::string svgText(double x, double y, std::string_view content, std::string_view classes,
                    std::string_view anchor) {
  Attributes attributes = {{"x", number(x)}, {"y", number(y)}};
  if (!classes.empty()) {
    attributes.push_back({"class", std::string(classes)});
  }
  if (anchor != "start") {
    attributes.push_back({"text-anchor", std::string(anchor)});
  }
  return textElement("text", attributes, content);
}

std::string figure(std::string_view className, double height, const std::string& label,
                   std::string_view content) {
  return element("svg",
                 {{"xmlns", "http://www.w3.org/2000/svg"},
                  {"class", std::string(className)},
                  {"viewBox", "0 0 " + number(kFigureWidth) + " " + number(height)},
                  {"width", number(kFigureWidth)},
                  {"height", number(height)},
                  {"role", "img"},
                  {"aria-label", label}},
                 content);
}

std::string shortened(std::string_view text, std::size_t limit) {
  std::size_t at = 0;
  std::size_t characters = 0;
  std::size_t cut = text.size();  // where the kept part ends when the text is too long
  while (at < text.size()) {
    if (characters + 1 == limit) {
      cut = at;
    }
    at += std::max<std::size_t>(1, sequenceLength(text, at));
    ++characters;
  }
  if (characters <= limit) {
    return std::string(text);
  }
  return std::string(text.substr(0, cut)) + std::string(kEllipsis);
}

std::string lastLine(std::string_view text) {
  const auto end = text.find_last_not_of("\n\r \t");
  if (end == std::string_view::npos) {
    return "";
  }
  text = text.substr(0, end + 1);
  const auto newline = text.rfind('\n');
  return std::string(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

std::string duration(double seconds) {
  constexpr double kMinute = 60;
  constexpr double kHour = 3600;
  std::array<char, 32> text{};
  if (seconds < 2 * kMinute) {
    std::snprintf(text.data(), text.size(), "%.3g s", seconds);
  } else if (seconds < 2 * kHour) {
    std::snprintf(text.data(), text.size(), "%.3g min", seconds / kMinute);
  } else {
    std::snprintf(text.data(), text.size(), "%.3g h", seconds / kHour);
  }
  return text.data();
}

std::string number(double value) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.2f", value);
  std::string out = text.data();
  while (out.back() == '0') {
    out.pop_back();
  }
  if (out.back() == '.') {
    out.pop_back();
  }
  return out == "-0" ? "0" : out;
}

std::string tickLabel(double value) {
  std::array<char, 32> text{};
  if (std::abs(value - std::round(value)) < 1e-9 && std::abs(value) < 1e9) {
    std::snprintf(text.data(), text.size(), "%.0f", value);
  } else {
    std::snprintf(text.data(), text.size(), "%.3g", value);
  }
  return text.data();
}

double niceStep(double rough) {
  if (!(rough > 0) || !std::isfinite(rough)) {
    return 1;
  }
  const double power = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double factor : {1.0, 2.0, 5.0, 10.0}) {
    if (factor * power >= rough * (1 - 1e-9)) {
      return factor * power;
    }
  }
  return 10 * power;
}

Scale::Scale(double low, double high, double from, double to, bool logarithmic)
    : low_(low),
      high_(high > low ? high : low + 1),
      from_(from),
      to_(to),
      logarithmic_(logarithmic && low > 0) {}

double Scale::at(double value) const {
  const auto position = [&](double v) { return logarithmic_ ? std::log2(v) : v; };
  const double clamped = std::clamp(value, low_, high_);
  const double share = (position(clamped) - position(low_)) / (position(high_) - position(low_));
  return from_ + share * (to_ - from_);
}

std::vector<double> Scale::ticks(int count, bool wholeNumbers) const {
  std::vector<double> values;
  if (logarithmic_) {
    const auto first = static_cast<int>(std::ceil(std::log2(low_)));
    const auto last = static_cast<int>(std::floor(std::log2(high_)));
    for (int exponent = first; exponent <= last; ++exponent) {
      values.push_back(std::exp2(exponent));
    }
    return values;
  }
  double step = niceStep((high_ - low_) / std::max(1, count));
  if (wholeNumbers) {
    step = std::max(1.0, std::round(step));
  }
  const auto first = static_cast<long long>(std::ceil(low_ / step - 1e-9));
  const auto last = static_cast<long long>(std::floor(high_ / step + 1e-9));
  for (long long multiple = first; multiple <= last; ++multiple) {
    values.push_back(static_cast<double>(multiple) * step);
  }
  return values;
}

}  // namespace autotune::report::markup
