#pragma once
// One line per action on stderr, with the time: the simulator's whole user interface.

#include <chrono>
#include <cstdio>
#include <string>

#include "container.h"

namespace autotune::nodesim {

inline void logLine(const std::string& line) {
  // One fprintf per line: stdio locks the stream for the call, so threads never interleave.
  std::fprintf(stderr, "%s node-sim: %s\n",
               microTimestamp(std::chrono::system_clock::now()).c_str(), line.c_str());
}

}  // namespace autotune::nodesim
