#include "runtime/rate_limiter.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace autotune::runtime {

TokenBucket::TokenBucket(const Clock& clock, double qps, int burst)
    : clock_(clock), qps_(qps), burst_(burst), tokens_(burst), last_(clock.now()) {}

void TokenBucket::refill(TimePoint now) {
  const std::chrono::duration<double> elapsed = now - last_;
  if (elapsed.count() > 0) {
    tokens_ = std::min(burst_, tokens_ + (elapsed.count() * qps_));
    last_ = now;
  }
}

bool TokenBucket::tryAcquire() {
  const std::lock_guard lock(mutex_);
  refill(clock_.now());
  if (tokens_ < 1.0) {
    return false;
  }
  tokens_ -= 1.0;
  return true;
}

Duration TokenBucket::reserve() {
  const std::lock_guard lock(mutex_);
  refill(clock_.now());
  tokens_ -= 1.0;
  if (tokens_ >= 0.0) {
    return Duration::zero();
  }
  return std::chrono::round<Duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

}  // namespace autotune::runtime
