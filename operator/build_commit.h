#pragma once
// The commit the programs were built from, for --version: defined in a file the build writes
// (build_commit.cmake), so that a new commit needs no new CMake configuration.

namespace autotune::cli {

extern const char* const kBuildCommit;

}  // namespace autotune::cli
