#include "runtime/backoff.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <utility>

namespace autotune::runtime {

namespace {

Duration scaled(Duration d, double by) {
  return std::chrono::duration_cast<Duration>(
      std::chrono::duration<double, Duration::period>(static_cast<double>(d.count()) * by));
}

}  // namespace

ExponentialBackoff::ExponentialBackoff(Duration base, Duration cap) : base_(base), cap_(cap) {}

Duration ExponentialBackoff::when(const std::string& key) {
  int failures = 0;
  {
    const std::lock_guard lock(mutex_);
    failures = failures_[key]++;
  }
  // In floating point, so that a key that failed a thousand times cannot overflow the shift.
  const double delay = static_cast<double>(base_.count()) * std::exp2(failures);
  if (delay >= static_cast<double>(cap_.count())) {
    return cap_;
  }
  return Duration(static_cast<Duration::rep>(delay));
}

void ExponentialBackoff::forget(const std::string& key) {
  const std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int ExponentialBackoff::failures(const std::string& key) const {
  const std::lock_guard lock(mutex_);
  const auto found = failures_.find(key);
  return found == failures_.end() ? 0 : found->second;
}

JitteredBackoff::JitteredBackoff(const Clock& clock, JitteredBackoffOptions options,
                                 std::function<double()> random)
    : clock_(clock), options_(options), random_(std::move(random)), current_(options.initial) {}

Duration JitteredBackoff::next() {
  const TimePoint now = clock_.now();
  if (lastFailure_ && now - *lastFailure_ >= options_.resetAfter) {
    current_ = options_.initial;
  }
  lastFailure_ = now;
  const Duration delay = current_;
  current_ = std::min(scaled(current_, options_.factor), options_.cap);
  return scaled(delay, 1.0 + (options_.jitter * random_()));
}

double JitteredBackoff::uniformRandom() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine);
}

}  // namespace autotune::runtime
