#pragma once
// Kubernetes API errors as values. The API server answers a failed request with a `kind: Status`
// body; we decode it into an Error whose kind callers branch on: NotFound during reconcile is
// normal, Conflict means re-read, Gone means relist, TooManyRequests means wait.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace autotune::k8s {

enum class ErrorKind {
  kNotFound,         // 404
  kAlreadyExists,    // 409, reason AlreadyExists: a create found the name taken
  kConflict,         // 409 otherwise: a stale resourceVersion on update
  kGone,             // 410: a watch or list continue token expired; relist
  kInvalid,          // 422: the object failed validation; see causes
  kBadRequest,       // 400
  kUnauthorized,     // 401: re-read the token
  kForbidden,        // 403
  kTooManyRequests,  // 429: wait retryAfter
  kTimeout,          // 504, or reason Timeout / ServerTimeout
  kServerError,      // any other 5xx
  kTransport,        // no HTTP answer at all: connection, TLS, or a broken stream
  kOther,            // anything else, including a bad kubeconfig
};

// "NotFound", "AlreadyExists", ..., "Transport", "Other".
std::string_view kindName(ErrorKind kind);

// One entry of a Status's details.causes, e.g. {"spec.parallelism", "FieldValueInvalid",
// "Invalid value: 0: ..."}.
struct FieldCause {
  std::string field;
  std::string reason;
  std::string message;
};

struct Error {
  ErrorKind kind = ErrorKind::kOther;
  int httpStatus = 0;   // 0 when there was no HTTP answer
  std::string reason;   // the Status's reason, e.g. "AlreadyExists"; empty without a Status body
  std::string message;  // the Status's message, or the start of a body that was not a Status
  std::vector<FieldCause> causes;
  std::optional<std::chrono::seconds> retryAfter;  // from Retry-After or details.retryAfterSeconds

  // Whether the same request may succeed later unchanged: throttling, timeouts, 500/502/503/504
  // and transport failures. Conflicts are not: they need a re-read first.
  bool retryable() const;
};

template <typename T>
using Result = tl::expected<T, Error>;

// The error for a failed HTTP answer. `body` is usually a `kind: Status` JSON object; anything
// else (HTML from a proxy, plain text, nothing) still gets its kind from the HTTP status, with the
// body's first 200 characters as the message. A watch delivers its ERROR event's Status inside a
// 200 answer: pass that Status as the body with httpStatus 0 (or 200), and its own code is used.
Error decodeError(int httpStatus, std::string_view body,
                  std::optional<std::string_view> retryAfterHeader = std::nullopt);

// A request that got no HTTP answer (connect, TLS, read failures).
Error transportError(std::string message);

// One line for logs and users, e.g.
// `Invalid (422): AutotuneJob.autotune.io "x" is invalid: spec.parallelism: Invalid value: 0: ...`;
// causes the message does not already spell out are appended as `field: message`.
std::string describe(const Error& error);

}  // namespace autotune::k8s
