#pragma once
// A text as its lines, without their line breaks, for tests that compare files line by line.

#include <sstream>
#include <string>
#include <vector>

namespace autotune::testing {

inline std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    lines.push_back(line);
  }
  return lines;
}

}  // namespace autotune::testing
