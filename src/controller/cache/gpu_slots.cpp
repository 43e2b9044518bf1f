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

void GpuLedger::NodeTally::hold(const std::string& key, const std::string& node, int gpus) {
  release(key);
  byKey_.insert_or_assign(key, std::pair{node, gpus});
  byNode_[node] += gpus;
}

void GpuLedger::NodeTally::release(const std::string& key) {
  const auto held = byKey_.find(key);
  if (held == byKey_.end()) {
    return;
  }
  const auto& [node, gpus] = held->second;
  if (const auto used = byNode_.find(node); used != byNode_.end()) {
    used->second -= gpus;
    if (used->second <= 0) {
      byNode_.erase(used);
    }
  }
  byKey_.erase(held);
}

int GpuLedger::NodeTally::on(const std::string& node) const {
  const auto found = byNode_.find(node);
  return found == byNode_.end() ? 0 : found->second;
}

void GpuLedger::recount(const std::string& node) {
  const auto found = nodes_.find(node);
  if (found != nodes_.end() && (found->second.gpus > 0 || slicesOnNode_.contains(node))) {
    counted_.insert(node);
  } else {
    counted_.erase(node);
  }
}

void GpuLedger::setNode(const Node& node) {
  const std::scoped_lock lock(mutex_);
  if (node.schedulable) {
    nodes_.insert_or_assign(node.name, node);
  } else {
    nodes_.erase(node.name);
  }
  recount(node.name);
}

void GpuLedger::removeNode(const std::string& name) {
  const std::scoped_lock lock(mutex_);
  nodes_.erase(name);
  recount(name);
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
  if (unbound) {
    unbound_.insert_or_assign(pod.key, Unbound{gpus, pod.gpuModel});
  } else {
    boundPods_.hold(pod.key, pod.nodeName, gpus);
  }
}

void GpuLedger::removePod(const std::string& key) {
  const std::scoped_lock lock(mutex_);
  release(key);
}

void GpuLedger::release(const std::string& key) {
  unbound_.erase(key);
  boundPods_.release(key);
}

void GpuLedger::setSlice(const DeviceSlice& slice) {
  const std::scoped_lock lock(mutex_);
  removeSliceLocked(slice.name);
  if (slice.nodeName.empty() || slice.gpus <= 0) {
    return;
  }
  slicesOnNode_[slice.nodeName].insert_or_assign(slice.name, slice);
  nodeOfSlice_.insert_or_assign(slice.name, slice.nodeName);
  recount(slice.nodeName);
}

void GpuLedger::removeSlice(const std::string& name) {
  const std::scoped_lock lock(mutex_);
  removeSliceLocked(name);
}

void GpuLedger::removeSliceLocked(const std::string& name) {
  const auto named = nodeOfSlice_.find(name);
  if (named == nodeOfSlice_.end()) {
    return;
  }
  const std::string node = named->second;
  nodeOfSlice_.erase(named);
  if (const auto slices = slicesOnNode_.find(node); slices != slicesOnNode_.end()) {
    slices->second.erase(name);
    if (slices->second.empty()) {
      slicesOnNode_.erase(slices);
    }
  }
  recount(node);
}

void GpuLedger::setClaim(const DeviceClaim& claim) {
  const std::scoped_lock lock(mutex_);
  claims_.release(claim.key);
  if (claim.gpus > 0 && !claim.nodeName.empty()) {
    claims_.hold(claim.key, claim.nodeName, claim.gpus);
  }
}

void GpuLedger::removeClaim(const std::string& key) {
  const std::scoped_lock lock(mutex_);
  claims_.release(key);
}

NodeGpus GpuLedger::countOf(const Node& node) const {
  NodeGpus counted{node.name, node.gpus,           boundPods_.on(node.name),
                   0,         node.gpuMemoryBytes, node.gpuProduct};
  const auto slices = slicesOnNode_.find(node.name);
  if (node.gpus > 0 || slices == slicesOnNode_.end()) {
    return counted;
  }
  // Its slices' GPUs added up, the memory of the first. Not their model: a search of one GPU model
  // pins its trials by the node's label, which such a node may lack (publishedGpu records it).
  counted.allocatable = 0;
  for (const auto& [name, slice] : slices->second) {
    counted.allocatable += slice.gpus;
  }
  counted.used = claims_.on(node.name);
  const DeviceSlice& first = slices->second.begin()->second;
  if (!counted.memoryBytes) {
    counted.memoryBytes = first.memoryBytes;
  }
  return counted;
}

std::optional<GpuModel> GpuLedger::publishedGpu(const std::string& node) const {
  const std::scoped_lock lock(mutex_);
  const auto slices = slicesOnNode_.find(node);
  if (slices == slicesOnNode_.end()) {
    return std::nullopt;
  }
  const DeviceSlice& first = slices->second.begin()->second;
  return GpuModel{first.product, first.memoryBytes};
}

GpuCapacity GpuLedger::capacity(const Reserves& reserves) const {
  GpuCapacity capacity;
  std::vector<std::pair<std::string, Unbound>> unbound;
  {
    const std::scoped_lock lock(mutex_);
    for (const auto& name : counted_) {
      const auto node = nodes_.find(name);
      if (node == nodes_.end()) {
        continue;
      }
      if (NodeGpus counted = countOf(node->second); counted.allocatable > 0) {
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
