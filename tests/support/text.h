#pragma once
// Texts in tests: whether one holds a part (what std::string::contains does from C++23 on), and a
// file's whole content.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace autotune::testing {

inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// Empty when the file cannot be read.
inline std::string readFile(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace autotune::testing
