#pragma once
// Where the runtime reads the time, so that backoff, rate limits and delayed requeues are tested
// by moving a fake clock instead of sleeping.

#include <chrono>
#include <mutex>
#include <stop_token>

namespace autotune::runtime {

using TimePoint = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

class Clock {
 public:
  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  Clock(Clock&&) = delete;
  Clock& operator=(Clock&&) = delete;
  virtual ~Clock();

  virtual TimePoint now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
};

// Time that moves only when a test moves it. Safe to read from workers while a test advances it.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : now_(start) {}

  TimePoint now() const override;
  void advance(Duration by);
  void set(TimePoint to);

 private:
  mutable std::mutex mutex_;
  TimePoint now_;
};

// Waits `delay` of real time, or less when `stop` is requested meanwhile.
void sleepFor(Duration delay, const std::stop_token& stop);

}  // namespace autotune::runtime
