#pragma once
// A property a fuzz target asserts: when it does not hold, the input is a finding. libFuzzer
// treats the abort as a crash and saves the input.

#include <cstdio>
#include <cstdlib>

namespace autotune::fuzz {

inline void check(bool holds, const char* property) {
  if (!holds) {
    std::fprintf(stderr, "property violated: %s\n", property);
    std::abort();
  }
}

}  // namespace autotune::fuzz
