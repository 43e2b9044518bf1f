#pragma once
// A local, always-current copy of one kind of object: a Watcher lists it, then watches it from
// the list's resourceVersion, and keeps a Store (runtime/store.h) up to date, whose listeners
// hear of each change (kube-rs' watcher + reflector).

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <shared_mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "k8s/client.h"
#include "runtime/backoff.h"
#include "runtime/clock.h"
#include "runtime/store.h"

namespace autotune::runtime {

struct WatchTarget {
  k8s::Resource resource;
  std::string ns;  // empty: every namespace
  std::string labelSelector;
  // What the store never reads, left out as each list page and event is parsed.
  k8s::OmittedKeys omittedKeys = {"managedFields"};
};

// What the watcher does next. kList and kWatch are requests to the API server; kBackoff waits
// after a failure and then goes back to the step that failed.
enum class WatchPhase { kList, kWatch, kBackoff };

// Why a watch ended and was started again (the watch_restarts_total metric's reason).
enum class RestartReason { kExpired, kGone, kDropped, kListFailed, kWatchFailed };
std::string_view toString(RestartReason reason);

struct WatcherOptions {
  // A page is held as JSON while it is decoded: 100 Nodes of ~16 KB are ~6 MB of it, the peak
  // of a restart on a cluster of thousands (BENCHMARKS.md, "A big cluster").
  int listPageSize = 100;
  int minWatchSeconds = 300;  // each watch asks the server to end it after 5 to 10 minutes
  JitteredBackoffOptions backoff;
  std::function<double()> random = JitteredBackoff::uniformRandom;
};

using RestartHandler = std::function<void(RestartReason reason)>;

// The watch state machine:
//   kList    --ok--> kWatch (from the list's version); --error--> kBackoff, then kList
//   kWatch   --server ended it--> kWatch from the last version seen
//            --410 Gone--> kList at once; --dropped connection--> kBackoff, then kWatch from the
//            last version seen; --other error--> kBackoff, then kList
// The backoff grows from 0.8 s to 30 s with jitter and starts over after a healthy period.
class Watcher {
 public:
  Watcher(const k8s::Client& client, WatchTarget target, Store& store, const Clock& clock,
          WatcherOptions options = {});

  // Carries out the current phase once and returns the next one.
  WatchPhase step(const std::stop_token& stop);
  // Steps until `stop`, sleeping out each backoff (a stop cuts the sleep short).
  void run(const std::stop_token& stop);

  WatchPhase phase() const { return phase_; }
  // How long the kBackoff phase will wait.
  Duration backoff() const { return backoffDelay_; }
  std::string resourceVersion() const { return resourceVersion_; }
  // Whether the store has held a complete list at least once.
  bool hasSynced() const { return synced_.load(); }
  void onRestart(RestartHandler handler) { onRestart_ = std::move(handler); }

 private:
  WatchPhase list();
  WatchPhase watch(const std::stop_token& stop);
  WatchPhase backOff(WatchPhase then, RestartReason reason);
  void apply(const k8s::WatchEvent& event);

  const k8s::Client& client_;
  WatchTarget target_;
  Store& store_;
  RestartHandler onRestart_;
  WatcherOptions options_;
  JitteredBackoff backoffs_;

  WatchPhase phase_ = WatchPhase::kList;
  WatchPhase afterBackoff_ = WatchPhase::kList;
  Duration backoffDelay_{};
  std::string resourceVersion_;
  std::atomic<bool> synced_ = false;
};

}  // namespace autotune::runtime
