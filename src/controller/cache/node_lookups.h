#pragma once
// Nodes that trial Pods are bound to and the Node cache lacks. The cache lags behind the cluster:
// a Node added while the watch backs off, or deleted and registered again, looks gone for a
// while. So such a node is gone only on the API server's word: a direct GET that has answered
// 404 throughout a grace period. Until then its Pods run on. Forgetting every lookup (a restart)
// only starts the grace again. Thread-safe.

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "controller/objects/objects.h"

namespace autotune::controller {

class NodeLookups {
 public:
  // What is known at `now` of `absent`, nodes the Node cache lacks.
  MissingNodes missing(const NodeNames& absent, Timestamp now) const;
  // What a direct GET of a node the cache lacks answered.
  void lookedUp(const std::string& name, bool found, Timestamp at);
  // The Node cache holds the node again.
  void cached(const std::string& name);

 private:
  struct Lookup {
    Timestamp at;
    std::optional<Timestamp> absentSince;  // the first of the 404s since it was last found
  };

  mutable std::mutex mutex_;
  std::map<std::string, Lookup, std::less<>> lookups_;
};

}  // namespace autotune::controller
