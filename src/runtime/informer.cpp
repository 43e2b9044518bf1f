#include "runtime/informer.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <utility>

namespace autotune::runtime {
namespace {

// A string field of an object from the API server, or "" when it is absent or not a string.
std::string stringField(const nlohmann::json& object, const char* key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

std::string resourceVersionOf(const nlohmann::json& object) {
  return stringField(metadataOf(object), "resourceVersion");
}

// Whether the object can be stored: anything without a name has no key to be found by.
bool named(const nlohmann::json& object) {
  return !stringField(metadataOf(object), "name").empty();
}

}  // namespace

const nlohmann::json& metadataOf(const nlohmann::json& object) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  const auto found = object.find("metadata");
  return found != object.end() && found->is_object() ? *found : kEmpty;
}

std::string keyOf(const nlohmann::json& object) {
  const auto& metadata = metadataOf(object);
  const std::string ns = stringField(metadata, "namespace");
  const std::string name = stringField(metadata, "name");
  return ns.empty() ? name : ns + "/" + name;
}

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

Store::Store() : objects_(std::make_shared<Objects>()) {}

void Store::replace(const std::vector<nlohmann::json>& objects) {
  auto fresh = std::make_shared<Objects>();
  for (const auto& object : objects) {
    fresh->insert_or_assign(keyOf(object), object);
  }
  const std::unique_lock lock(mutex_);
  objects_ = std::move(fresh);
}

void Store::upsert(const nlohmann::json& object) {
  const std::unique_lock lock(mutex_);
  objects_->insert_or_assign(keyOf(object), object);
}

void Store::erase(const std::string& key) {
  const std::unique_lock lock(mutex_);
  objects_->erase(key);
}

std::optional<nlohmann::json> Store::get(const std::string& key) const {
  const std::shared_lock lock(mutex_);
  const auto found = objects_->find(key);
  if (found == objects_->end()) {
    return std::nullopt;
  }
  return found->second;
}

std::vector<nlohmann::json> Store::list() const {
  const std::shared_lock lock(mutex_);
  std::vector<nlohmann::json> objects;
  objects.reserve(objects_->size());
  for (const auto& [key, object] : *objects_) {
    objects.push_back(object);
  }
  return objects;
}

std::vector<nlohmann::json> Store::withLabel(const std::string& label, const std::string& value,
                                             const std::string& ns) const {
  const std::shared_lock lock(mutex_);
  std::vector<nlohmann::json> objects;
  for (const auto& [key, object] : *objects_) {
    const auto& metadata = metadataOf(object);
    if (!ns.empty() && metadata.value("namespace", "") != ns) {
      continue;
    }
    const auto labels = metadata.value("labels", nlohmann::json::object());
    if (labels.is_object() && labels.value(label, "") == value) {
      objects.push_back(object);
    }
  }
  return objects;
}

std::size_t Store::size() const {
  const std::shared_lock lock(mutex_);
  return objects_->size();
}

Watcher::Watcher(const k8s::Client& client, WatchTarget target, Store& store, const Clock& clock,
                 ChangeHandler onChange, WatcherOptions options)
    : client_(client),
      target_(std::move(target)),
      store_(store),
      onChange_(std::move(onChange)),
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
  std::vector<nlohmann::json> objects;
  std::string version;
  do {
    auto page = client_.list(target_.resource, target_.ns, options);
    if (!page) {
      return backOff(WatchPhase::kList, RestartReason::kListFailed);
    }
    if (const auto items = page->find("items"); items != page->end() && items->is_array()) {
      std::ranges::copy_if(*items, std::back_inserter(objects), named);
    }
    const auto& metadata = metadataOf(*page);
    if (version.empty()) {
      version = stringField(metadata, "resourceVersion");
    }
    options.continueToken = stringField(metadata, "continue");
  } while (!options.continueToken.empty());

  // Objects that vanished while no watch was open are deletions the handler must hear of.
  std::set<std::string> listed;
  for (const auto& object : objects) {
    listed.insert(keyOf(object));
  }
  std::vector<nlohmann::json> vanished;
  for (auto& object : store_.list()) {
    if (!listed.contains(keyOf(object))) {
      vanished.push_back(std::move(object));
    }
  }
  store_.replace(objects);
  resourceVersion_ = version;
  synced_ = true;
  for (const auto& object : objects) {
    onChange_(object);
  }
  for (const auto& object : vanished) {
    onChange_(object);
  }
  return WatchPhase::kWatch;
}

WatchPhase Watcher::watch(const std::stop_token& stop) {
  k8s::WatchOptions options;
  options.resourceVersion = resourceVersion_;
  options.labelSelector = target_.labelSelector;
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
  if (const std::string version = resourceVersionOf(event.object); !version.empty()) {
    resourceVersion_ = version;
  }
  if (event.type == "BOOKMARK" || !named(event.object)) {
    return;
  }
  if (event.type == "DELETED") {
    store_.erase(keyOf(event.object));
  } else {
    store_.upsert(event.object);
  }
  onChange_(event.object);
}

}  // namespace autotune::runtime
