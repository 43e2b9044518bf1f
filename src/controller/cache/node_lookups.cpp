#include "controller/cache/node_lookups.h"

namespace autotune::controller {
namespace {

// Lookups of nodes long gone, whose Pods are long lost, are of no more use.
constexpr std::chrono::hours kForgetLookup{1};

}  // namespace

MissingNodes NodeLookups::missing(const NodeNames& absent, Timestamp now) const {
  MissingNodes missing;
  const std::scoped_lock lock(mutex_);
  for (const auto& name : absent) {
    const auto lookup = lookups_.find(name);
    if (lookup == lookups_.end()) {
      missing.awaited.insert(name);
      missing.toLookUp.insert(name);
      continue;
    }
    const auto& [at, absentSince] = lookup->second;
    if (absentSince && now - *absentSince >= kNodeGoneGrace) {
      missing.gone.insert(name);
      continue;
    }
    missing.awaited.insert(name);
    if (now - at >= kNodeRecheck) {
      missing.toLookUp.insert(name);
    }
  }
  return missing;
}

void NodeLookups::lookedUp(const std::string& name, bool found, Timestamp at) {
  const std::scoped_lock lock(mutex_);
  std::erase_if(lookups_, [at](const auto& entry) { return at - entry.second.at > kForgetLookup; });
  Lookup& lookup = lookups_[name];
  lookup.at = at;
  if (found) {
    lookup.absentSince.reset();
  } else if (!lookup.absentSince) {
    lookup.absentSince = at;
  }
}

void NodeLookups::cached(const std::string& name) {
  const std::scoped_lock lock(mutex_);
  lookups_.erase(name);
}

}  // namespace autotune::controller
