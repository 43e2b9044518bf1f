#include "api/names.h"

#include <algorithm>
#include <cctype>

namespace autotune::api {
namespace {

constexpr std::size_t kMaxDnsSubdomainLength = 253;

bool isAlphanumeric(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool isLowerAlphanumeric(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

}  // namespace

bool isDnsSubdomain(std::string_view name) {
  if (name.empty() || name.size() > kMaxDnsSubdomainLength) {
    return false;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = name.find('.', start);
    const std::string_view label =
        name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (label.empty() || !isLowerAlphanumeric(label.front()) ||
        !isLowerAlphanumeric(label.back()) || !std::all_of(label.begin(), label.end(), [](char c) {
          return isLowerAlphanumeric(c) || c == '-';
        })) {
      return false;
    }
    if (dot == std::string_view::npos) {
      return true;
    }
    start = dot + 1;
  }
}

bool isLabelValue(std::string_view value) {
  if (value.empty()) {
    return true;
  }
  return value.size() <= kMaxLabelValueLength && isAlphanumeric(value.front()) &&
         isAlphanumeric(value.back()) && std::all_of(value.begin(), value.end(), [](char c) {
           return isAlphanumeric(c) || c == '-' || c == '_' || c == '.';
         });
}

}  // namespace autotune::api
