#pragma once
// How long to wait before trying again: per key for reconcile failures, and for watch reconnects.

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/clock.h"

namespace autotune::runtime {

// client-go's item exponential failure rate limiter: the n-th failure of a key waits base × 2^n,
// capped, until the key is forgotten. Thread-safe.
class ExponentialBackoff {
 public:
  explicit ExponentialBackoff(Duration base = std::chrono::milliseconds(5),
                              Duration cap = std::chrono::seconds(1000));

  // The delay before the next try of `key`; counts one more failure.
  Duration when(const std::string& key);
  void forget(const std::string& key);
  int failures(const std::string& key) const;

 private:
  Duration base_;
  Duration cap_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, int> failures_;
};

struct JitteredBackoffOptions {
  Duration initial = std::chrono::milliseconds(800);
  double factor = 2.0;
  Duration cap = std::chrono::seconds(30);
  double jitter = 1.0;  // a delay d becomes d × (1 + jitter × r), r in [0, 1)
  Duration resetAfter = std::chrono::seconds(120);
};

// client-go's reflector backoff for watch reconnects: grows while the watch keeps failing, and
// starts over once it has stayed up for `resetAfter`. Jitter spreads the reconnects of many
// operators after an API server restart. Owned by one watch thread; not thread-safe.
class JitteredBackoff {
 public:
  // `random` returns r in [0, 1); tests pass a constant.
  explicit JitteredBackoff(const Clock& clock, JitteredBackoffOptions options = {},
                           std::function<double()> random = uniformRandom);

  // The delay before the next reconnect; counts one more failure.
  Duration next();

  static double uniformRandom();

 private:
  const Clock& clock_;
  JitteredBackoffOptions options_;
  std::function<double()> random_;
  Duration current_;
  std::optional<TimePoint> lastFailure_;
};

}  // namespace autotune::runtime
