#include "runtime/manager.h"

#include <thread>
#include <utility>

namespace autotune::runtime {
namespace {

constexpr auto kSyncPoll = std::chrono::milliseconds(20);

void waitUntilStopped(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    sleepFor(std::chrono::hours(1), stop);
  }
}

}  // namespace

Manager::Manager(const k8s::Client& client, const Clock& clock, ManagerOptions options)
    : client_(client), clock_(clock), options_(std::move(options)), queue_(clock, options_.queue) {}

void Manager::addWatcher(const WatchTarget& target, Store& store) {
  auto watcher = std::make_unique<Watcher>(client_, target, store, clock_, options_.watcher);
  watcher->onRestart([this, target](RestartReason reason) {
    if (hooks_.watchRestarted) {
      hooks_.watchRestarted(target, reason);
    }
  });
  watchers_.push_back(std::move(watcher));
}

void Manager::enqueue(const std::vector<std::string>& keys, Duration batch) {
  for (const auto& key : keys) {
    if (batch > Duration::zero()) {
      queue_.addAfter(key, batch);
    } else {
      queue_.add(key);
    }
  }
}

bool Manager::synced() const {
  for (const auto& watcher : watchers_) {
    if (!watcher->hasSynced()) {
      return false;
    }
  }
  return true;
}

RunEnd Manager::run(const std::stop_token& stop) {
  std::vector<std::jthread> watchers;
  watchers.reserve(watchers_.size());
  for (auto& watcher : watchers_) {
    watchers.emplace_back(
        [watcher = watcher.get()](const std::stop_token& token) { watcher->run(token); });
  }
  while (!stop.stop_requested() && !synced()) {
    sleepFor(kSyncPoll, stop);
  }

  RunEnd end = RunEnd::kStopped;
  if (!stop.stop_requested()) {
    if (options_.leaderElection) {
      const k8s::Client& leaseClient = options_.leaseClient ? *options_.leaseClient : client_;
      LeaderElector elector(leaseClient, *options_.leaderElection, clock_);
      const bool lost =
          elector.run(stop, [this](const std::stop_token& leadership) { work(leadership); });
      end = lost ? RunEnd::kLostLeadership : RunEnd::kStopped;
    } else {
      work(stop);
    }
  }
  queue_.shutDown();
  return end;  // the watchers' destructors stop and join them
}

void Manager::work(const std::stop_token& leadership) {
  leadership_ = leadership;
  setLeading(true);
  {
    std::vector<std::jthread> workers;
    workers.reserve(static_cast<std::size_t>(options_.workers));
    for (int i = 0; i < options_.workers; ++i) {
      workers.emplace_back([this] { processNext(); });
    }
    waitUntilStopped(leadership);
    // Workers finish the reconcile they are in, and take no other key.
    queue_.shutDown();
  }
  setLeading(false);
}

void Manager::processNext() {
  while (const auto key = queue_.get()) {
    const TimePoint started = clock_.now();
    const ReconcileResult result = reconcileGuarded(*key);
    if (result.failed) {
      queue_.addRateLimited(*key);
    } else {
      queue_.forget(*key);
      if (result.requeueAfter) {
        queue_.addAfter(*key, *result.requeueAfter);
      }
    }
    queue_.done(*key);
    if (hooks_.reconciled) {
      hooks_.reconciled(*key, result, clock_.now() - started);
    }
  }
}

// The barrier around every reconcile: whatever one key's reconcile throws stays that key's
// failure, so one object can never stop the reconciles of all the others.
ReconcileResult Manager::reconcileGuarded(const std::string& key) {
  try {
    return reconcile_(key);
  } catch (const std::exception& error) {
    return ReconcileResult::threw(error.what());
  } catch (...) {
    return ReconcileResult::threw("an exception that is not a std::exception");
  }
}

void Manager::setLeading(bool leading) {
  leading_ = leading;
  if (hooks_.leadership) {
    hooks_.leadership(leading);
  }
}

}  // namespace autotune::runtime
