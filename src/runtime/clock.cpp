#include "runtime/clock.h"

#include <condition_variable>
#include <mutex>

namespace autotune::runtime {

// Out of line, so that the vtable has one home.
Clock::~Clock() = default;

TimePoint FakeClock::now() const {
  const std::lock_guard lock(mutex_);
  return now_;
}

void FakeClock::advance(Duration by) {
  const std::lock_guard lock(mutex_);
  now_ += by;
}

void FakeClock::set(TimePoint to) {
  const std::lock_guard lock(mutex_);
  now_ = to;
}

void sleepFor(Duration delay, const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any never;
  std::unique_lock lock(mutex);
  never.wait_for(lock, stop, delay, [] { return false; });
}

}  // namespace autotune::runtime
