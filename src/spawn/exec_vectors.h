#pragma once
// The argument and environment vectors of a child process, as exec and posix_spawn take them.

#include <string>
#include <utility>
#include <vector>

namespace autotune::spawn {

// This process's environment with `added` set over it, NAME=value each, every name once.
std::vector<std::string> environmentWith(
    const std::vector<std::pair<std::string, std::string>>& added);

// `strings` as an argv or envp: a pointer into each, then a null pointer. Valid while `strings`
// is neither changed nor destroyed.
std::vector<char*> execVector(std::vector<std::string>& strings);

}  // namespace autotune::spawn
