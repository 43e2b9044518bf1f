#pragma once
// A token bucket: `burst` requests at once, then `qps` a second. The caller waits, not the bucket.

#include <mutex>

#include "runtime/clock.h"

namespace autotune::runtime {

// client-go's client and work queue limits (golang.org/x/time/rate): the bucket starts full and
// refills continuously. Thread-safe.
class TokenBucket {
 public:
  TokenBucket(const Clock& clock, double qps, int burst);

  // Takes a token if one is there now.
  bool tryAcquire();

  // Takes the next token, even one not yet there, and says how long until it is: zero when one
  // was there. Reservations queue up, so n callers at once are spread 1/qps apart.
  Duration reserve();

 private:
  void refill(TimePoint now);

  const Clock& clock_;
  double qps_;
  double burst_;
  std::mutex mutex_;
  double tokens_;  // negative while reservations wait for tokens
  TimePoint last_;
};

}  // namespace autotune::runtime
