// YAML to the JSON document model, reading scalars as Kubernetes does.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "api/codec.h"
#include "api/text.h"

namespace autotune::api {
namespace {

using nlohmann::json;

FieldError errorAt(const YAML::Mark& mark, std::string reason) {
  if (mark.is_null()) {
    return {"", std::move(reason)};
  }
  return {"line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1),
          std::move(reason)};
}

// An error at a byte offset of the text, as "line L, column C" (both counted from 1, the column
// in bytes).
FieldError errorAtOffset(std::string_view text, std::size_t offset, std::string reason) {
  const std::string_view before = text.substr(0, offset);
  const std::size_t lastNewline = before.rfind('\n');
  YAML::Mark mark;
  mark.line = static_cast<int>(std::ranges::count(before, '\n'));
  mark.column =
      static_cast<int>(lastNewline == std::string_view::npos ? offset : offset - lastNewline - 1);
  return errorAt(mark, std::move(reason));
}

// YAML's own reader lets stray bytes and control characters into strings, mangled, which then
// cannot be written as JSON. YAML allows neither (its c-printable set): the first such byte.
std::optional<FieldError> firstDisallowedByte(std::string_view text) {
  const std::size_t valid = validUtf8Prefix(text);
  for (std::size_t at = 0; at < valid; ++at) {
    const auto byte = static_cast<unsigned char>(text[at]);
    if ((byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r') || byte == 0x7F) {
      std::array<char, 8> hex{};
      std::snprintf(hex.data(), hex.size(), "0x%02X", byte);
      return errorAtOffset(
          text, at,
          "holds the control character " + std::string(hex.data()) + ", which YAML does not allow");
    }
  }
  if (valid < text.size()) {
    return errorAtOffset(text, valid, "is not valid UTF-8");
  }
  return std::nullopt;
}

// yaml-cpp can still produce a lone byte from valid text (a NEL line break, 0x85, folded into a
// scalar): such a scalar is refused rather than written as invalid JSON.
constexpr std::string_view kMangled = "reads as text that is not valid UTF-8";

bool readWhole(const YAML::Node& scalar) {
  return validUtf8Prefix(scalar.Scalar()) == scalar.Scalar().size();
}

bool isOneOf(std::string_view text, std::initializer_list<std::string_view> options) {
  return std::find(options.begin(), options.end(), text) != options.end();
}

// YAML 1.2 core schema integers: [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+.
std::optional<json> integerScalar(std::string_view text) {
  int base = 10;
  bool negative = false;
  if (text.starts_with("0o") || text.starts_with("0x")) {
    base = text[1] == 'o' ? 8 : 16;
    text.remove_prefix(2);
  } else if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty()) {
    return std::nullopt;
  }
  std::uint64_t magnitude = 0;
  const char* end = text.data() + text.size();
  const auto [stop, status] = std::from_chars(text.data(), end, magnitude, base);
  if (stop != end || status != std::errc()) {
    return std::nullopt;  // not all digits, or too large for an integer: maybe a float
  }
  constexpr auto kMaxMagnitude =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (!negative) {
    return magnitude <= kMaxMagnitude ? json(static_cast<std::int64_t>(magnitude))
                                      : json(magnitude);
  }
  if (magnitude > kMaxMagnitude + 1) {
    return std::nullopt;
  }
  // Negating in unsigned arithmetic reaches INT64_MIN without signed overflow.
  return json(static_cast<std::int64_t>(~magnitude + 1));
}

std::size_t countDigits(std::string_view text, std::size_t from) {
  std::size_t count = 0;
  while (from + count < text.size() && text[from + count] >= '0' && text[from + count] <= '9') {
    ++count;
  }
  return count;
}

// YAML 1.2 core schema floats: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?. The
// special values .inf and .nan have no JSON form, so they stay strings.
bool hasFloatSyntax(std::string_view text) {
  std::size_t i = (!text.empty() && (text[0] == '+' || text[0] == '-')) ? 1 : 0;
  const std::size_t wholeDigits = countDigits(text, i);
  i += wholeDigits;
  std::size_t fractionDigits = 0;
  if (i < text.size() && text[i] == '.') {
    fractionDigits = countDigits(text, i + 1);
    i += 1 + fractionDigits;
  }
  if (wholeDigits == 0 && fractionDigits == 0) {
    return false;
  }
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
      ++i;
    }
    const std::size_t exponentDigits = countDigits(text, i);
    if (exponentDigits == 0) {
      return false;
    }
    i += exponentDigits;
  }
  return i == text.size();
}

std::optional<json> floatScalar(std::string_view text) {
  if (!hasFloatSyntax(text)) {
    return std::nullopt;
  }
  if (text[0] == '+') {
    text.remove_prefix(1);  // from_chars takes no plus sign
  }
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, status] = std::from_chars(text.data(), end, value);
  if (stop != end || status != std::errc()) {
    return std::nullopt;
  }
  return json(value);
}

json scalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  // yaml-cpp tags quoted and block scalars "!": the user asked for a string.
  if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") {
    return text;
  }
  if (isOneOf(text, {"", "~", "null", "Null", "NULL"})) {
    return nullptr;
  }
  // Kubernetes reads YAML with YAML 1.1's booleans, so `kubectl apply` turns `enabled: yes` into
  // true; reading them the same way keeps `autotune plan` and the operator in agreement.
  if (isOneOf(text, {"true", "True", "TRUE", "yes", "Yes", "YES", "y", "Y", "on", "On", "ON"})) {
    return true;
  }
  if (isOneOf(text, {"false", "False", "FALSE", "no", "No", "NO", "n", "N", "off", "Off", "OFF"})) {
    return false;
  }
  if (std::optional<json> integer = integerScalar(text)) {
    return *integer;
  }
  if (std::optional<json> number = floatScalar(text)) {
    return *number;
  }
  return text;
}

// Converts a parsed YAML tree. Aliases make it a graph: a self-referencing alias would recurse
// forever and nested aliases expand exponentially, so depth and size are bounded.
class YamlConverter {
 public:
  tl::expected<json, FieldError> convert(const YAML::Node& node) { return convert(node, 0); }

 private:
  static constexpr int kMaxDepth = 100;
  static constexpr int kMaxNodes = 1'000'000;

  tl::expected<json, FieldError> convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) {
      return tl::unexpected(errorAt(node.Mark(), "nesting is too deep"));
    }
    if (++nodes_ > kMaxNodes) {
      return tl::unexpected(errorAt(node.Mark(), "the document is too large"));
    }
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        if (!readWhole(node)) {
          return tl::unexpected(errorAt(node.Mark(), std::string(kMangled)));
        }
        return scalarToJson(node);
      case YAML::NodeType::Sequence:
        return convertSequence(node, depth);
      case YAML::NodeType::Map:
        return convertMap(node, depth);
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        break;
    }
    return json(nullptr);
  }

  tl::expected<json, FieldError> convertSequence(const YAML::Node& node, int depth) {
    json array = json::array();
    for (const auto& item : node) {
      tl::expected<json, FieldError> value = convert(item, depth + 1);
      if (!value) {
        return value;
      }
      array.push_back(std::move(*value));
    }
    return array;
  }

  tl::expected<json, FieldError> convertMap(const YAML::Node& node, int depth) {
    json object = json::object();
    for (const auto& entry : node) {
      if (!entry.first.IsScalar() && !entry.first.IsNull()) {
        return tl::unexpected(errorAt(entry.first.Mark(), "mapping keys must be strings"));
      }
      const std::string& key = entry.first.Scalar();
      if (!readWhole(entry.first)) {
        return tl::unexpected(errorAt(entry.first.Mark(), std::string(kMangled)));
      }
      if (object.contains(key)) {
        return tl::unexpected(errorAt(entry.first.Mark(), "duplicate key \"" + key + "\""));
      }
      tl::expected<json, FieldError> value = convert(entry.second, depth + 1);
      if (!value) {
        return value;
      }
      object[key] = std::move(*value);
    }
    return object;
  }

  int nodes_ = 0;
};

}  // namespace

tl::expected<json, FieldError> yamlToJson(std::string_view text) {
  if (auto disallowed = firstDisallowedByte(text)) {
    return tl::unexpected(std::move(*disallowed));
  }
  try {
    // The first document of a stream. YAML::Load reads only that one; yaml-cpp 0.7's LoadAll can
    // loop for ever on some malformed streams, adding empty documents.
    const YAML::Node document = YAML::Load(std::string(text));
    if (document.IsNull()) {
      return tl::unexpected(FieldError{"", "the document is empty"});
    }
    return YamlConverter().convert(document);
  } catch (const YAML::Exception& error) {
    return tl::unexpected(errorAt(error.mark, error.msg));
  } catch (const std::exception& error) {
    return tl::unexpected(FieldError{"", error.what()});
  }
}

}  // namespace autotune::api
