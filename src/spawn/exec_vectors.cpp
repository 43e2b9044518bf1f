#include "spawn/exec_vectors.h"

#include <map>

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX names it so

namespace autotune::spawn {

std::vector<std::string> environmentWith(
    const std::vector<std::pair<std::string, std::string>>& added) {
  std::map<std::string, std::string> variables;
  for (char* const* entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto equals = text.find('=');
    if (equals != std::string::npos) {
      variables[text.substr(0, equals)] = text.substr(equals + 1);
    }
  }
  for (const auto& [name, value] : added) {
    variables[name] = value;
  }
  std::vector<std::string> result;
  result.reserve(variables.size());
  for (const auto& [name, value] : variables) {
    result.push_back(name);
    result.back().append("=").append(value);
  }
  return result;
}

std::vector<char*> execVector(std::vector<std::string>& strings) {
  std::vector<char*> result;
  result.reserve(strings.size() + 1);
  for (auto& text : strings) {
    result.push_back(text.data());
  }
  result.push_back(nullptr);
  return result;
}

}  // namespace autotune::spawn
