#include "runtime/clock.h"

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

}  // namespace autotune::runtime
