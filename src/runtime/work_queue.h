#pragma once
// The queue between event handlers and reconcile workers: client-go's rate-limited delaying work
// queue of "namespace/name" keys.
//
// Fair: keys come out in the order they became ready. Stingy: a key waiting twice is handed out
// once, and a key being processed is never handed to a second worker; adding it meanwhile marks it
// dirty, and done() puts it back so the latest state is reconciled once more.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "runtime/backoff.h"
#include "runtime/clock.h"
#include "runtime/rate_limiter.h"

namespace autotune::runtime {

// client-go's DefaultControllerRateLimiter: the larger of a per-key exponential backoff and an
// overall token bucket.
struct WorkQueueLimits {
  Duration baseDelay = std::chrono::milliseconds(5);
  Duration maxDelay = std::chrono::seconds(1000);
  double qps = 10.0;
  int burst = 100;
};

class WorkQueue {
 public:
  explicit WorkQueue(const Clock& clock, WorkQueueLimits limits = {});

  void add(const std::string& key);
  // Adds `key` once `delay` has passed; of two delays for a waiting key, the sooner wins.
  void addAfter(const std::string& key, Duration delay);
  // Adds `key` after its backoff, which grows with every call until forget(key).
  void addRateLimited(const std::string& key);
  void forget(const std::string& key);
  int numRequeues(const std::string& key) const;

  // Blocks until a key is ready, and hands it out until done(key). Nothing once shut down.
  std::optional<std::string> get();
  // The same without blocking: a ready key, or nothing.
  std::optional<std::string> tryGet();
  void done(const std::string& key);

  // Wakes every blocked worker; later adds are dropped and get() returns nothing.
  void shutDown();
  bool shuttingDown() const;

  // Keys ready to hand out (the workqueue_depth metric).
  std::size_t len() const;

 private:
  struct Delayed {
    TimePoint due;
    std::uint64_t order;  // keeps equal due times first in, first out
    std::string key;
    bool operator>(const Delayed& other) const {
      return due != other.due ? due > other.due : order > other.order;
    }
  };

  void addLocked(const std::string& key);
  void releaseDueLocked(TimePoint now);
  std::optional<std::string> popLocked();

  const Clock& clock_;
  ExponentialBackoff backoff_;
  TokenBucket bucket_;

  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::string> queue_;               // ready, in order
  std::unordered_set<std::string> dirty_;       // need processing: ready, or re-add pending
  std::unordered_set<std::string> processing_;  // handed out, not yet done
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<>> delayed_;
  std::unordered_map<std::string, TimePoint> waiting_;  // the live due time of each delayed key
  std::uint64_t nextOrder_ = 0;
  bool shuttingDown_ = false;
};

}  // namespace autotune::runtime
