#pragma once
// Test support: GoogleTest prints a FieldError as "path: reason" in failure messages.

#include <ostream>

#include "api/codec.h"

namespace autotune::api {

[[maybe_unused]] inline void PrintTo(const FieldError& error, std::ostream* out) {
  *out << '"' << format(error) << '"';
}

}  // namespace autotune::api
