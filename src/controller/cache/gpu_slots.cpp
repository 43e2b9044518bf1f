#include "controller/cache/gpu_slots.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace autotune::controller {
namespace {

// Best fit: each unbound Pod on the node with the fewest free GPUs that holds it (of its GPU
// model, when it selects one), the first by name among equals. Nodes are kept ordered by (free
// GPUs, index), all together and per model, so that finding one costs a lookup, not a pass over
// every node: a burst of jobs leaves thousands of Pods unbound.
class BestFit {
 public:
  explicit BestFit(std::vector<NodeGpus>& nodes) : nodes_(nodes) {
    for (std::size_t index = 0; index < nodes_.size(); ++index) {
      add(index);
    }
  }

  // Reserves `gpus` on the best node for a Pod of `model` ("" for any); false when none holds it.
  bool reserve(int gpus, const std::string& model) {
    const auto& byFree = model.empty() ? all_ : ofModel_[model];
    const auto fit = byFree.lower_bound({gpus, 0});
    if (fit == byFree.end()) {
      return false;
    }
    const std::size_t index = fit->second;
    remove(index);
    nodes_[index].reserved += gpus;
    add(index);
    return true;
  }

 private:
  using ByFree = std::set<std::pair<int, std::size_t>>;

  void add(std::size_t index) {
    all_.emplace(nodes_[index].free(), index);
    ofModel_[nodes_[index].product].emplace(nodes_[index].free(), index);
  }

  void remove(std::size_t index) {
    all_.erase({nodes_[index].free(), index});
    ofModel_[nodes_[index].product].erase({nodes_[index].free(), index});
  }

  std::vector<NodeGpus>& nodes_;
  ByFree all_;
  std::map<std::string, ByFree, std::less<>> ofModel_;
};

}  // namespace

void GpuLedger::setNode(const Node& node) {
  const std::scoped_lock lock(mutex_);
  if (node.schedulable) {
    nodes_.insert_or_assign(node.name, node);
  } else {
    nodes_.erase(node.name);
  }
}

void GpuLedger::removeNode(const std::string& name) {
  const std::scoped_lock lock(mutex_);
  nodes_.erase(name);
}

void GpuLedger::setPod(const Pod& pod) {
  const std::scoped_lock lock(mutex_);
  release(pod.key);
  // An unbound trial of claims holds what it asks for until the scheduler allocates its claims;
  // once bound, its node's claims count it.
  const bool unbound = pod.nodeName.empty();
  const int gpus = unbound && pod.gpus <= 0 ? pod.claimedGpus : pod.gpus;
  if (gpus <= 0 || pod.finished() || (unbound && !pod.schedulingGates.empty())) {
    return;
  }
  const Hold hold{pod.nodeName, gpus, pod.gpuModel};
  holds_.insert_or_assign(pod.key, hold);
  if (pod.nodeName.empty()) {
    unbound_.insert_or_assign(pod.key, hold);
  } else {
    usedOnNode_[pod.nodeName] += gpus;
  }
}

void GpuLedger::removePod(const std::string& key) {
  const std::scoped_lock lock(mutex_);
  release(key);
}

void GpuLedger::release(const std::string& key) {
  const auto held = holds_.find(key);
  if (held == holds_.end()) {
    return;
  }
  if (held->second.node.empty()) {
    unbound_.erase(key);
  } else if (const auto used = usedOnNode_.find(held->second.node); used != usedOnNode_.end()) {
    used->second -= held->second.gpus;
    if (used->second <= 0) {
      usedOnNode_.erase(used);
    }
  }
  holds_.erase(held);
}

void GpuLedger::setSlice(const DeviceSlice& slice) {
  const std::scoped_lock lock(mutex_);
  slices_.insert_or_assign(slice.name, slice);
}

void GpuLedger::removeSlice(const std::string& name) {
  const std::scoped_lock lock(mutex_);
  slices_.erase(name);
}

void GpuLedger::setClaim(const DeviceClaim& claim) {
  const std::scoped_lock lock(mutex_);
  releaseClaim(claim.key);
  if (claim.gpus > 0 && !claim.nodeName.empty()) {
    claims_.insert_or_assign(claim.key, claim);
    claimedOnNode_[claim.nodeName] += claim.gpus;
  }
}

void GpuLedger::removeClaim(const std::string& key) {
  const std::scoped_lock lock(mutex_);
  releaseClaim(key);
}

void GpuLedger::releaseClaim(const std::string& key) {
  const auto held = claims_.find(key);
  if (held == claims_.end()) {
    return;
  }
  if (const auto used = claimedOnNode_.find(held->second.nodeName); used != claimedOnNode_.end()) {
    used->second -= held->second.gpus;
    if (used->second <= 0) {
      claimedOnNode_.erase(used);
    }
  }
  claims_.erase(held);
}

NodeGpus GpuLedger::countOf(const Node& node,
                            const std::map<std::string, DeviceSlice>& slices) const {
  const auto countedIn = [](const auto& counts, const std::string& name) {
    const auto found = counts.find(name);
    return found == counts.end() ? 0 : found->second;
  };
  NodeGpus counted{node.name, node.gpus,           countedIn(usedOnNode_, node.name),
                   0,         node.gpuMemoryBytes, node.gpuProduct};
  const auto dra = slices.find(node.name);
  if (node.gpus > 0 || dra == slices.end()) {
    return counted;
  }
  counted.allocatable = dra->second.gpus;
  counted.used = countedIn(claimedOnNode_, node.name);
  if (counted.product.empty()) {
    counted.product = dra->second.product;
  }
  if (!counted.memoryBytes) {
    counted.memoryBytes = dra->second.memoryBytes;
  }
  return counted;
}

GpuCapacity GpuLedger::capacity(const Reserves& reserves) const {
  GpuCapacity capacity;
  std::vector<std::pair<std::string, Hold>> unbound;
  {
    const std::scoped_lock lock(mutex_);
    // The DRA GPUs of each node: its slices' added up, the model and memory of the first.
    std::map<std::string, DeviceSlice> draOnNode;
    for (const auto& [name, slice] : slices_) {
      if (slice.nodeName.empty() || slice.gpus <= 0) {
        continue;
      }
      auto [added, first] = draOnNode.try_emplace(slice.nodeName, slice);
      if (!first) {
        added->second.gpus += slice.gpus;
      }
    }
    for (const auto& [name, node] : nodes_) {
      if (NodeGpus counted = countOf(node, draOnNode); counted.allocatable > 0) {
        capacity.nodes.push_back(std::move(counted));
      }
    }
    unbound.assign(unbound_.begin(), unbound_.end());
  }
  std::erase_if(unbound, [&](const auto& pod) { return !reserves(pod.first); });
  // Largest first, then by key, so the same Pods always give the same placement.
  std::ranges::sort(unbound, [](const auto& left, const auto& right) {
    return left.second.gpus != right.second.gpus ? left.second.gpus > right.second.gpus
                                                 : left.first < right.first;
  });
  BestFit fit(capacity.nodes);
  for (const auto& [key, hold] : unbound) {
    if (!fit.reserve(hold.gpus, hold.gpuModel)) {
      capacity.waiting += hold.gpus;
    }
  }
  return capacity;
}

}  // namespace autotune::controller
