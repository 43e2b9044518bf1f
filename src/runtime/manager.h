#pragma once
// Runs a controller: its watchers, a work queue of keys and the workers that reconcile them, and,
// when asked, leader election so that only one replica reconciles (controller-runtime's manager).
//
// Watchers run on every replica, so a standby's caches are warm when it takes over; workers run
// only on the leader. Losing the lease stops the workers and ends run(): the process should exit
// and be restarted, rather than go on with state it can no longer trust.

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "k8s/client.h"
#include "runtime/clock.h"
#include "runtime/informer.h"
#include "runtime/leader_election.h"
#include "runtime/work_queue.h"

namespace autotune::runtime {

// What a reconcile asks for next: nothing, an error (retried with per-key backoff), or another
// look after a delay (a deadline such as a trial's timeout).
struct ReconcileResult {
  bool failed = false;
  std::optional<Duration> requeueAfter;
  // What the reconcile threw, when it ended in an exception: a failure of that key alone,
  // retried with backoff like any other, never the process's end.
  std::optional<std::string> exception;

  static ReconcileResult retry() {
    ReconcileResult result;
    result.failed = true;
    return result;
  }
  // Another look after `delay`, when there is one.
  static ReconcileResult after(std::optional<Duration> delay) {
    ReconcileResult result;
    result.requeueAfter = delay;
    return result;
  }
  static ReconcileResult threw(std::string what) {
    ReconcileResult result = retry();
    result.exception = std::move(what);
    return result;
  }
};

using Reconciler = std::function<ReconcileResult(const std::string& key)>;
// The keys of the objects to reconcile when an object changes from `before` to `after` (either
// null when it was added or deleted); e.g. a Pod maps to its owner.
template <class T>
using KeyMapper = std::function<std::vector<std::string>(const T* before, const T* after)>;

struct ManagerOptions {
  int workers = 2;
  std::optional<LeaseOptions> leaderElection;
  // The lease's requests; the manager's client when empty. One of its own, with a timeout well
  // under the renew deadline, no retries and no share of the reconciles' rate limit, keeps a busy
  // or stuck client from costing the lease.
  std::optional<k8s::Client> leaseClient;
  WatcherOptions watcher;
  WorkQueueLimits queue;
};

enum class RunEnd { kStopped, kLostLeadership };

// Called as things happen, for metrics and logs; each may be left empty.
struct ManagerHooks {
  std::function<void(const std::string& key, const ReconcileResult& result, Duration took)>
      reconciled;
  std::function<void(const WatchTarget& target, RestartReason reason)> watchRestarted;
  std::function<void(bool leading)> leadership;
};

class Manager {
 public:
  Manager(const k8s::Client& client, const Clock& clock, ManagerOptions options);

  // A kind to watch into `store`, whose changes enqueue the keys `keysOf` gives. With a `batch`
  // period, a key is reconciled that long after the first change, once for all the changes
  // meanwhile (as Kubernetes' Job controller batches its Pods' updates); the keys `urgentKeysOf`
  // gives, if any, at once. Call before run(); the store must outlive the manager.
  template <class T>
  void watch(const WatchTarget& target, Indexed<T>& store, KeyMapper<T> keysOf,
             Duration batch = Duration::zero(), KeyMapper<T> urgentKeysOf = nullptr) {
    store.listen([this, keysOf = std::move(keysOf), batch, urgentKeysOf = std::move(urgentKeysOf)](
                     const T* before, const T* after) {
      enqueue(keysOf(before, after), batch);
      if (urgentKeysOf) {
        enqueue(urgentKeysOf(before, after), Duration::zero());
      }
    });
    addWatcher(target, store);
  }
  void setReconciler(Reconciler reconcile) { reconcile_ = std::move(reconcile); }
  void setHooks(ManagerHooks hooks) { hooks_ = std::move(hooks); }

  // Starts the watchers, waits for their caches, then reconciles (as the leader, if elected)
  // until `stop` or the lease is lost. Returns once every thread it started has ended.
  RunEnd run(const std::stop_token& stop);

  // Every watcher has listed once (the /readyz probe).
  bool synced() const;
  bool leading() const { return leading_.load(); }
  // Stopped once this replica may no longer write: its lease is in doubt or lost, or run() is
  // ending. A reconcile looks at it before each write that the next leader must not see twice.
  std::stop_token leadership() const { return leadership_; }
  const WorkQueue& queue() const { return queue_; }

 private:
  void addWatcher(const WatchTarget& target, Store& store);
  void enqueue(const std::vector<std::string>& keys, Duration batch);
  void work(const std::stop_token& leadership);
  void processNext();
  ReconcileResult reconcileGuarded(const std::string& key);
  void setLeading(bool leading);

  const k8s::Client& client_;
  const Clock& clock_;
  ManagerOptions options_;
  ManagerHooks hooks_;
  WorkQueue queue_;
  Reconciler reconcile_;
  std::vector<std::unique_ptr<Watcher>> watchers_;
  std::atomic<bool> leading_ = false;
  std::stop_token leadership_;  // set before the workers start
};

}  // namespace autotune::runtime
