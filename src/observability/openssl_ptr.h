#pragma once
// OpenSSL's objects owned by std::unique_ptr, each freed by its own function.

#include <memory>

namespace autotune::observability {

template <auto Free>
struct OpenSslFree {
  template <class T>
  void operator()(T* pointer) const {
    Free(pointer);
  }
};

template <class T, auto Free>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree<Free>>;

}  // namespace autotune::observability
