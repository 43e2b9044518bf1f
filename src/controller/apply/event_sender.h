#pragma once
// Events sent off the reconcile path: a reconcile hands its Events over and goes on, and a thread
// of the sender's own posts them within a budget of their own, apart from the reconciles' --qps.
// The Normal Events of one job and reason go out at most once per window: those reported
// meanwhile go together, their messages joined into as few Events as hold them whole, so that a
// job whose trials start and end one by one costs an Event a window rather than one a trial.
// A Warning goes at once and on its own: each names a problem someone must read. A job's last
// Event (its search ended) takes all of the job's queued Events with it, so that an ended job's
// story is whole at once. Events of a job that is gone by the time they would go are not posted.
// Past a bound the oldest queued are dropped and counted: Events are best-effort, as Kubernetes'
// own recorders make them. Thread-safe.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "k8s/client.h"
#include "runtime/clock.h"
#include "runtime/rate_limiter.h"

namespace autotune::controller {

struct EventPacing {
  double qps = 5;
  int burst = 25;
  runtime::Duration window = std::chrono::seconds(10);
  std::size_t maxQueued = 10000;
};

// What became of Events, for metrics and logs, and whether the object an Event is about is still
// there (its involvedObject); each may be left empty.
struct EventSenderHooks {
  std::function<void(const std::string& reason, const k8s::Error& error)> failed;
  std::function<void(std::size_t count)> dropped;
  std::function<bool(const nlohmann::json& involvedObject)> exists;
};

class EventSender {
 public:
  EventSender(const k8s::Client& client, const runtime::Clock& clock, EventPacing pacing = {},
              EventSenderHooks hooks = {});

  // Queues an Event object (events.h, eventObject); never waits on the API server.
  void send(nlohmann::json event);
  // Posts the Events that are due as the budget allows; returns how many reports went out.
  std::size_t sendDue();
  // Posts what is due until `stop`, waiting for Events, their windows and the budget.
  void run(const std::stop_token& stop);
  std::size_t queued() const;

 private:
  struct Group {
    std::string job;  // namespace/name
    std::vector<nlohmann::json> events;
  };

  // The queued groups whose window has passed, taken out of the queue, as far as the budget goes.
  std::vector<Group> takeDue();
  void post(const nlohmann::json& event) const;
  runtime::Duration untilNextDue() const;

  const k8s::Client& client_;
  const runtime::Clock& clock_;
  EventPacing pacing_;
  EventSenderHooks hooks_;
  runtime::TokenBucket budget_;

  mutable std::mutex mutex_;
  std::condition_variable_any arrived_;
  std::map<std::string, Group> queued_;  // by namespace/job/reason
  std::deque<std::string> arrival_;      // the groups' keys, oldest first
  std::size_t queuedEvents_ = 0;
  std::map<std::string, runtime::TimePoint> lastSent_;  // within the last window only
  std::set<std::string> endingJobs_;  // whose last Event is queued: their groups go at once
};

// Normal Events of one job and reason reported within one window, as the fewest Events that tell
// them all, each message whole (kEventMessageBytes): consecutive ones joined, "a; b".
std::vector<nlohmann::json> mergedEvents(const std::vector<nlohmann::json>& events);

}  // namespace autotune::controller
