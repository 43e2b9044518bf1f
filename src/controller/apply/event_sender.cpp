#include "controller/apply/event_sender.h"

#include <algorithm>
#include <utility>

#include "controller/decision/events.h"
#include "k8s/resources.h"
#include "object/read.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

// How long the sender waits when the budget is spent: about one token's worth at the default pace.
constexpr auto kBudgetWait = std::chrono::milliseconds(200);

constexpr std::string_view kJoin = "; ";

std::string jobOf(const json& event) {
  const json& involved = object::member(event, "involvedObject");
  return object::text(involved, "namespace") + "/" + object::text(involved, "name");
}

bool endsItsJob(const json& event) {
  const std::string reason = object::text(event, "reason");
  return reason == kCompletedReason || reason == kSearchFailedReason;
}

// The queue a report joins: a Normal Event that of its job and reason, a Warning one of its own
// (its name: job, reason and subject).
std::string groupOf(const json& event) {
  std::string key = jobOf(event) + "/" + object::text(event, "reason");
  if (object::text(event, "type") == "Warning") {
    key += "/" + object::text(object::metadataOf(event), "name");
  }
  return key;
}

}  // namespace

std::vector<json> mergedEvents(const std::vector<json>& events) {
  std::vector<json> merged;
  std::size_t joined = 0;
  for (const auto& event : events) {
    const std::string message = object::text(event, "message");
    if (!merged.empty()) {
      json& last = merged.back();
      std::string sofar = object::text(last, "message");
      if (sofar.size() + kJoin.size() + message.size() <= kEventMessageBytes) {
        sofar.append(kJoin).append(message);
        last["message"] = std::move(sofar);
        last["count"] = ++joined;
        last["lastTimestamp"] = event.value("lastTimestamp", json());
        continue;
      }
    }
    merged.push_back(event);
    joined = 1;
  }
  return merged;
}

EventSender::EventSender(const k8s::Client& client, const runtime::Clock& clock, EventPacing pacing,
                         EventSenderHooks hooks)
    : client_(client),
      clock_(clock),
      pacing_(pacing),
      hooks_(std::move(hooks)),
      budget_(clock, pacing.qps, pacing.burst) {}

void EventSender::send(json event) {
  std::size_t dropped = 0;
  {
    const std::scoped_lock lock(mutex_);
    const std::string key = groupOf(event);
    auto [group, added] = queued_.try_emplace(key);
    if (added) {
      arrival_.push_back(key);
      group->second.job = jobOf(event);
    }
    if (endsItsJob(event)) {
      endingJobs_.insert(group->second.job);
    }
    group->second.events.push_back(std::move(event));
    ++queuedEvents_;
    while (queuedEvents_ > pacing_.maxQueued) {
      auto& oldest = queued_.at(arrival_.front());
      oldest.events.erase(oldest.events.begin());
      --queuedEvents_;
      ++dropped;
      if (oldest.events.empty()) {
        queued_.erase(arrival_.front());
        arrival_.pop_front();
      }
    }
  }
  arrived_.notify_one();
  if (dropped > 0 && hooks_.dropped) {
    hooks_.dropped(dropped);
  }
}

std::vector<EventSender::Group> EventSender::takeDue() {
  const std::scoped_lock lock(mutex_);
  const runtime::TimePoint now = clock_.now();
  std::erase_if(lastSent_, [&](const auto& sent) { return sent.second + pacing_.window <= now; });
  std::vector<Group> due;
  for (auto key = arrival_.begin(); key != arrival_.end();) {
    if (lastSent_.contains(*key) && !endingJobs_.contains(queued_.at(*key).job)) {
      ++key;
      continue;
    }
    if (!budget_.tryAcquire()) {
      break;
    }
    auto group = queued_.extract(*key);
    queuedEvents_ -= group.mapped().events.size();
    due.push_back(std::move(group.mapped()));
    lastSent_.insert_or_assign(*key, now);
    key = arrival_.erase(key);
  }
  std::erase_if(endingJobs_, [&](const std::string& job) {
    return std::ranges::none_of(queued_,
                                [&](const auto& group) { return group.second.job == job; });
  });
  return due;
}

void EventSender::post(const json& event) const {
  if (hooks_.exists && !hooks_.exists(object::member(event, "involvedObject"))) {
    return;
  }
  const auto created =
      client_.create(k8s::kEvents, object::text(object::metadataOf(event), "namespace"), event);
  // The same report made again (a reconcile run again after a restart) is the same Event.
  if (!created && created.error().kind != k8s::ErrorKind::kAlreadyExists && hooks_.failed) {
    hooks_.failed(object::text(event, "reason"), created.error());
  }
}

std::size_t EventSender::sendDue() {
  std::size_t posted = 0;
  for (const auto& group : takeDue()) {
    for (const auto& event : mergedEvents(group.events)) {
      post(event);
    }
    posted += group.events.size();
  }
  return posted;
}

// Until the first queued group's window ends, or a budget's wait when one could go now.
runtime::Duration EventSender::untilNextDue() const {
  const runtime::TimePoint now = clock_.now();
  runtime::Duration wait = runtime::Duration::max();
  for (const auto& key : arrival_) {
    const auto sent = lastSent_.find(key);
    if (sent == lastSent_.end() || endingJobs_.contains(queued_.at(key).job)) {
      return kBudgetWait;
    }
    wait = std::min(wait, std::max(runtime::Duration::zero(), sent->second + pacing_.window - now));
  }
  return wait;
}

void EventSender::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    if (sendDue() > 0) {
      continue;
    }
    std::unique_lock lock(mutex_);
    const runtime::Duration wait = untilNextDue();
    if (wait == runtime::Duration::max()) {
      arrived_.wait(lock, stop, [this] { return !arrival_.empty(); });
    } else {
      // A group new to the queue may go at once: its arrival ends the wait.
      arrived_.wait_for(lock, stop, wait,
                        [this, groups = arrival_.size()] { return arrival_.size() > groups; });
    }
  }
}

std::size_t EventSender::queued() const {
  const std::scoped_lock lock(mutex_);
  return queuedEvents_;
}

}  // namespace autotune::controller
