#include "runtime/work_queue.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace autotune::runtime {

namespace {

// The longest a blocked get() sleeps before looking at the clock again. A fake clock moves without
// waking anyone, so a worker waiting for a delayed key would otherwise wait on real time that a
// test never spends; with the real clock this only adds a few wakeups while keys are delayed.
constexpr auto kLongestWait = std::chrono::milliseconds(20);

}  // namespace

WorkQueue::WorkQueue(const Clock& clock, WorkQueueLimits limits)
    : clock_(clock),
      backoff_(limits.baseDelay, limits.maxDelay),
      bucket_(clock, limits.qps, limits.burst) {}

void WorkQueue::add(const std::string& key) {
  const std::lock_guard lock(mutex_);
  addLocked(key);
}

void WorkQueue::addLocked(const std::string& key) {
  if (shuttingDown_ || dirty_.contains(key)) {
    return;
  }
  dirty_.insert(key);
  if (processing_.contains(key)) {
    return;  // done(key) puts it back
  }
  queue_.push_back(key);
  ready_.notify_one();
}

void WorkQueue::addAfter(const std::string& key, Duration delay) {
  if (delay <= Duration::zero()) {
    add(key);
    return;
  }
  const std::lock_guard lock(mutex_);
  if (shuttingDown_) {
    return;
  }
  const TimePoint due = clock_.now() + delay;
  const auto waiting = waiting_.find(key);
  if (waiting != waiting_.end() && waiting->second <= due) {
    return;
  }
  waiting_[key] = due;
  delayed_.push(Delayed{.due = due, .order = nextOrder_++, .key = key});
  // A blocked worker may be sleeping towards a later due time.
  ready_.notify_one();
}

void WorkQueue::addRateLimited(const std::string& key) {
  addAfter(key, std::max(backoff_.when(key), bucket_.reserve()));
}

void WorkQueue::forget(const std::string& key) { backoff_.forget(key); }

int WorkQueue::numRequeues(const std::string& key) const { return backoff_.failures(key); }

void WorkQueue::releaseDueLocked(TimePoint now) {
  while (!delayed_.empty() && delayed_.top().due <= now) {
    const Delayed item = delayed_.top();
    delayed_.pop();
    const auto waiting = waiting_.find(item.key);
    // An entry superseded by a sooner addAfter of the same key has no live due time.
    if (waiting == waiting_.end() || waiting->second != item.due) {
      continue;
    }
    waiting_.erase(waiting);
    addLocked(item.key);
  }
}

std::optional<std::string> WorkQueue::popLocked() {
  if (shuttingDown_ || queue_.empty()) {
    return std::nullopt;
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  dirty_.erase(key);
  processing_.insert(key);
  return key;
}

std::optional<std::string> WorkQueue::get() {
  std::unique_lock lock(mutex_);
  while (true) {
    releaseDueLocked(clock_.now());
    if (shuttingDown_) {
      return std::nullopt;
    }
    if (auto key = popLocked()) {
      return key;
    }
    if (delayed_.empty()) {
      ready_.wait(lock);
    } else {
      const Duration untilDue = delayed_.top().due - clock_.now();
      ready_.wait_for(lock, std::min<Duration>(untilDue, kLongestWait));
    }
  }
}

std::optional<std::string> WorkQueue::tryGet() {
  const std::lock_guard lock(mutex_);
  releaseDueLocked(clock_.now());
  return popLocked();
}

void WorkQueue::done(const std::string& key) {
  const std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.contains(key) && !shuttingDown_) {
    queue_.push_back(key);
    ready_.notify_one();
  }
}

void WorkQueue::shutDown() {
  const std::lock_guard lock(mutex_);
  shuttingDown_ = true;
  ready_.notify_all();
}

bool WorkQueue::shuttingDown() const {
  const std::lock_guard lock(mutex_);
  return shuttingDown_;
}

std::size_t WorkQueue::len() const {
  const std::lock_guard lock(mutex_);
  return queue_.size();
}

}  // namespace autotune::runtime
