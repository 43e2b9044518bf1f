#include "runtime/informer.h"

#include <set>
#include <utility>

namespace autotune::runtime {
namespace {

// Whether the object can be stored: anything without a name has no key to be found by.
bool named(const nlohmann::json& object) {
  return !object::text(metadataOf(object), "name").empty();
}

}  // namespace

std::string_view toString(RestartReason reason) {
  switch (reason) {
    case RestartReason::kExpired:
      return "expired";
    case RestartReason::kGone:
      return "gone";
    case RestartReason::kDropped:
      return "dropped";
    case RestartReason::kListFailed:
      return "list_failed";
    case RestartReason::kWatchFailed:
      break;
  }
  return "watch_failed";
}

Watcher::Watcher(const k8s::Client& client, WatchTarget target, Store& store, const Clock& clock,
                 WatcherOptions options)
    : client_(client),
      target_(std::move(target)),
      store_(store),
      onRestart_([](RestartReason) {}),
      options_(std::move(options)),
      backoffs_(clock, options_.backoff, options_.random) {}

WatchPhase Watcher::step(const std::stop_token& stop) {
  switch (phase_) {
    case WatchPhase::kList:
      phase_ = list();
      break;
    case WatchPhase::kWatch:
      phase_ = watch(stop);
      break;
    case WatchPhase::kBackoff:
      phase_ = afterBackoff_;
      break;
  }
  return phase_;
}

void Watcher::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    if (phase_ == WatchPhase::kBackoff) {
      sleepFor(backoffDelay_, stop);
    }
    step(stop);
  }
}

WatchPhase Watcher::list() {
  k8s::ListOptions options;
  options.labelSelector = target_.labelSelector;
  options.limit = options_.listPageSize;
  options.omittedKeys = target_.omittedKeys;
  std::string version;
  store_.beginList();
  do {
    auto page = client_.list(target_.resource, target_.ns, options);
    if (!page) {
      return backOff(WatchPhase::kList, RestartReason::kListFailed);
    }
    if (const auto items = page->find("items"); items != page->end() && items->is_array()) {
      for (const auto& item : *items) {
        if (named(item)) {
          store_.listed(item);
        }
      }
    }
    const auto& metadata = metadataOf(*page);
    if (version.empty()) {
      version = object::text(metadata, "resourceVersion");
    }
    options.continueToken = object::text(metadata, "continue");
  } while (!options.continueToken.empty());

  // The store tells its listeners of objects that vanished while no watch was open.
  store_.endList();
  resourceVersion_ = version;
  synced_ = true;
  return WatchPhase::kWatch;
}

WatchPhase Watcher::watch(const std::stop_token& stop) {
  k8s::WatchOptions options;
  options.resourceVersion = resourceVersion_;
  options.labelSelector = target_.labelSelector;
  options.omittedKeys = target_.omittedKeys;
  options.timeoutSeconds = static_cast<int>(options_.minWatchSeconds * (1.0 + options_.random()));
  options.stop = stop;
  const auto ended = client_.watch(target_.resource, target_.ns, options,
                                   [this, &stop](const k8s::WatchEvent& event) {
                                     apply(event);
                                     return !stop.stop_requested();
                                   });
  if (stop.stop_requested()) {
    return WatchPhase::kWatch;
  }
  if (ended) {
    onRestart_(RestartReason::kExpired);
    return WatchPhase::kWatch;
  }
  switch (ended.error().kind) {
    case k8s::ErrorKind::kGone:
      onRestart_(RestartReason::kGone);
      return WatchPhase::kList;
    case k8s::ErrorKind::kTransport:
      return backOff(WatchPhase::kWatch, RestartReason::kDropped);
    default:
      return backOff(WatchPhase::kList, RestartReason::kWatchFailed);
  }
}

WatchPhase Watcher::backOff(WatchPhase then, RestartReason reason) {
  onRestart_(reason);
  afterBackoff_ = then;
  backoffDelay_ = backoffs_.next();
  return WatchPhase::kBackoff;
}

void Watcher::apply(const k8s::WatchEvent& event) {
  if (const std::string version = versionOf(event.object); !version.empty()) {
    resourceVersion_ = version;
  }
  if (event.type == "BOOKMARK" || !named(event.object)) {
    return;
  }
  if (event.type == "DELETED") {
    store_.erase(event.object);
  } else {
    store_.upsert(event.object);
  }
}

}  // namespace autotune::runtime
