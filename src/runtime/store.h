#pragma once
// The local copy of one kind of object that a Watcher keeps current (client-go's Indexer): each
// object decoded once, as it arrives, into the fields its readers use, held as an immutable
// shared value and indexed, so that a reader takes what it needs without copying the cache.

#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "object/read.h"

namespace autotune::runtime {

using object::keyOf;
using object::metadataOf;
using object::versionOf;

// What a Watcher writes into. Every object it passes has a name.
class Store {
 public:
  Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  Store(Store&&) = delete;
  Store& operator=(Store&&) = delete;
  virtual ~Store() = default;

  // A complete list, a page at a time: beginList, each object of each page, then endList, when
  // the store takes the objects listed and drops those the list lacked. Each object is decoded as
  // it is listed, so that no more than one page is ever held as JSON. A beginList drops what an
  // unfinished list gathered.
  virtual void beginList() = 0;
  virtual void listed(const nlohmann::json& object) = 0;
  virtual void endList() = 0;
  virtual void upsert(const nlohmann::json& object) = 0;
  virtual void erase(const nlohmann::json& object) = 0;

  // A complete list at once.
  void replace(const std::vector<nlohmann::json>& objects) {
    beginList();
    for (const auto& object : objects) {
      listed(object);
    }
    endList();
  }
};

template <class T>
using Shared = std::shared_ptr<const T>;

// Whether `incoming` may replace `held`: not when both resourceVersions are numbers (as etcd's
// are) and the incoming one is older, which happens when a write's own result was stored before
// the watch delivered the event of an earlier write.
bool notOlder(const std::string& incoming, const std::string& held);

// A Store of objects decoded into T. `decode` returns nothing for an object to leave out; `key`
// reads a decoded object's key (keyOf of the object it came from) and `version` its
// resourceVersion. Indexes map an object to the
// values it is found under. Listeners hear of every change, after the store holds it, with the
// object before and after (null when absent); they run on the writer's thread and must not
// write to this store.
template <class T>
class Indexed final : public Store {
 public:
  using Decode = std::function<std::optional<T>(const nlohmann::json&)>;
  using Read = std::function<std::string(const T&)>;
  using IndexOf = std::function<std::vector<std::string>(const T&)>;
  using Listener = std::function<void(const T* before, const T* after)>;

  Indexed(
      Decode decode, Read key, Read version = [](const T&) { return std::string(); })
      : decode_(std::move(decode)), key_(std::move(key)), version_(std::move(version)) {}

  // Call before the first write.
  void addIndex(const std::string& name, IndexOf indexOf) {
    indexers_.emplace(name, std::move(indexOf));
  }
  void listen(Listener listener) { listeners_.push_back(std::move(listener)); }

  void beginList() override { listing_.clear(); }

  void listed(const nlohmann::json& object) override {
    if (auto decoded = decodeShared(object)) {
      listing_.insert_or_assign(key_(*decoded), std::move(decoded));
    }
  }

  void endList() override {
    std::vector<Change> changes;
    {
      const std::unique_lock lock(mutex_);
      for (const auto& [key, object] : listing_) {
        changes.push_back({find(key), object});
      }
      for (const auto& [key, object] : objects_) {
        if (!listing_.contains(key)) {
          changes.push_back({object, nullptr});
        }
      }
      objects_.clear();
      index_.clear();
      for (auto& [key, object] : listing_) {
        place(object);
      }
    }
    listing_.clear();
    tell(changes);
  }

  void upsert(const nlohmann::json& object) override {
    if (auto decoded = decodeShared(object)) {
      put(std::move(decoded));
    }
  }

  void erase(const nlohmann::json& object) override { remove(keyOf(object)); }

  // Stores what the caller's own write returned, unless the store already has a newer version.
  void put(Shared<T> object) { store(std::move(object), Absent::kStore); }

  // Like put, but only over an object the store still holds: what the caller learned of an object
  // it deleted never brings it back once the watch has said it is gone.
  void putIfPresent(Shared<T> object) { store(std::move(object), Absent::kSkip); }

  void remove(const std::string& key) {
    Shared<T> before;
    {
      const std::unique_lock lock(mutex_);
      before = find(key);
      if (!before) {
        return;
      }
      unplace(before);
    }
    tell({{before, nullptr}});
  }

  Shared<T> get(const std::string& key) const {
    const std::shared_lock lock(mutex_);
    return find(key);
  }

  // The objects found under `value` in the index `name`, in key order.
  std::vector<Shared<T>> byIndex(const std::string& name, const std::string& value) const {
    const std::shared_lock lock(mutex_);
    std::vector<Shared<T>> found;
    const auto index = index_.find(name);
    if (index == index_.end()) {
      return found;
    }
    const auto entry = index->second.find(value);
    if (entry == index->second.end()) {
      return found;
    }
    for (const auto& key : entry->second) {
      found.push_back(objects_.at(key));
    }
    return found;
  }

  std::vector<Shared<T>> list() const {
    const std::shared_lock lock(mutex_);
    std::vector<Shared<T>> all;
    all.reserve(objects_.size());
    for (const auto& [key, object] : objects_) {
      all.push_back(object);
    }
    return all;
  }

  std::size_t size() const {
    const std::shared_lock lock(mutex_);
    return objects_.size();
  }

 private:
  struct Change {
    Shared<T> before;
    Shared<T> after;
  };

  Shared<T> decodeShared(const nlohmann::json& object) const {
    auto decoded = decode_(object);
    if (!decoded) {
      return nullptr;
    }
    return std::make_shared<const T>(std::move(*decoded));
  }

  Shared<T> find(const std::string& key) const {
    const auto found = objects_.find(key);
    return found == objects_.end() ? nullptr : found->second;
  }

  enum class Absent { kStore, kSkip };  // what put does when the store lacks the object

  void store(Shared<T> object, Absent absent) {
    Shared<T> before;
    {
      const std::unique_lock lock(mutex_);
      before = find(key_(*object));
      if (!before && absent == Absent::kSkip) {
        return;
      }
      if (before && !notOlder(version_(*object), version_(*before))) {
        return;
      }
      if (before) {
        unplace(before);
      }
      place(object);
    }
    tell({{before, object}});
  }

  void place(const Shared<T>& object) {
    const std::string key = key_(*object);
    objects_.insert_or_assign(key, object);
    for (const auto& [name, indexOf] : indexers_) {
      for (const auto& value : indexOf(*object)) {
        index_[name][value].insert(key);
      }
    }
  }

  void unplace(const Shared<T>& object) {
    const std::string key = key_(*object);
    objects_.erase(key);
    for (const auto& [name, indexOf] : indexers_) {
      auto& index = index_[name];
      for (const auto& value : indexOf(*object)) {
        const auto entry = index.find(value);
        if (entry != index.end() && entry->second.erase(key) > 0 && entry->second.empty()) {
          index.erase(entry);
        }
      }
    }
  }

  void tell(const std::vector<Change>& changes) const {
    for (const auto& change : changes) {
      for (const auto& listener : listeners_) {
        listener(change.before.get(), change.after.get());
      }
    }
  }

  Decode decode_;
  Read key_;
  Read version_;
  std::map<std::string, IndexOf> indexers_;
  std::vector<Listener> listeners_;

  // What the list under way has given so far; only the watcher's thread touches it.
  std::map<std::string, Shared<T>> listing_;
  mutable std::shared_mutex mutex_;
  std::map<std::string, Shared<T>> objects_;
  // index name -> value -> keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> index_;
};

// Objects kept as they came, minus managedFields: for readers that want the raw object.
std::unique_ptr<Indexed<nlohmann::json>> rawStore();

}  // namespace autotune::runtime
