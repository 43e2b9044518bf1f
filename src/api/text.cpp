#include "api/text.h"

#include <fstream>
#include <sstream>

namespace autotune::api {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool isContinuation(unsigned char byte) { return (byte & 0xC0U) == 0x80U; }

// The length of the well-formed character at text[at], or 0 when the bytes there are not one
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t characterLength(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[at + i]); };
  const unsigned char lead = byte(0);
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead < 0x80) {
    return 1;
  }
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    low = lead == 0xE0 ? 0xA0 : 0x80;
    high = lead == 0xED ? 0x9F : 0xBF;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    low = lead == 0xF0 ? 0x90 : 0x80;
    high = lead == 0xF4 ? 0x8F : 0xBF;
  } else {
    return 0;
  }
  if (at + length > text.size() || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t i = 2; i < length; ++i) {
    if (!isContinuation(byte(i))) {
      return 0;
    }
  }
  return length;
}

}  // namespace

std::string validUtf8(std::string_view text) {
  std::string valid;
  valid.reserve(text.size());
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = characterLength(text, at);
    if (length == 0) {
      valid += kReplacement;
      ++at;
    } else {
      valid.append(text.substr(at, length));
      at += length;
    }
  }
  return valid;
}

std::size_t validUtf8Prefix(std::string_view text) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t length = characterLength(text, at);
    if (length == 0) {
      return at;
    }
    at += length;
  }
  return at;
}

std::string headOf(std::string_view text, std::size_t maxBytes) {
  std::string valid = validUtf8(text);
  if (valid.size() <= maxBytes) {
    return valid;
  }
  std::size_t cut = maxBytes;
  while (cut > 0 && isContinuation(static_cast<unsigned char>(valid[cut]))) {
    --cut;
  }
  valid.resize(cut);
  return valid;
}

std::string tailOf(std::string_view text, std::size_t maxBytes) {
  std::string valid = validUtf8(text);
  if (valid.size() <= maxBytes) {
    return valid;
  }
  std::size_t cut = valid.size() - maxBytes;
  while (cut < valid.size() && isContinuation(static_cast<unsigned char>(valid[cut]))) {
    ++cut;
  }
  return valid.substr(cut);
}

std::string oneLine(std::string_view text) {
  constexpr unsigned char kFirstPrintable = 0x20;
  constexpr unsigned char kDelete = 0x7F;
  std::string line = validUtf8(text);
  for (char& c : line) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < kFirstPrintable || byte == kDelete) {
      c = ' ';
    }
  }
  return line;
}

std::optional<std::string> readText(const std::filesystem::path& path) {
  const std::ifstream file(path);
  if (!file) {
    return std::nullopt;
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace autotune::api
