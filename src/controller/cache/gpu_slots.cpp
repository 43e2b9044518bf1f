#include "controller/cache/gpu_slots.h"

#include <algorithm>
#include <cstddef>
#include <set>
#include <utility>

namespace autotune::controller {
void GpuLedger::setNode(const Node& node) {
  const std::scoped_lock lock(mutex_);
  if (node.schedulable && node.gpus > 0) {
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
  if (pod.gpus <= 0 || pod.finished()) {
    return;
  }
  if (pod.nodeName.empty() && !pod.schedulingGates.empty()) {
    return;
  }
  holds_.insert_or_assign(pod.key, Hold{pod.nodeName, pod.gpus});
  if (pod.nodeName.empty()) {
    unbound_[pod.key] = pod.gpus;
  } else {
    usedOnNode_[pod.nodeName] += pod.gpus;
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

GpuCapacity GpuLedger::capacity(const Reserves& reserves) const {
  GpuCapacity capacity;
  std::vector<std::pair<int, std::string>> unbound;
  {
    const std::scoped_lock lock(mutex_);
    for (const auto& [name, node] : nodes_) {
      const auto used = usedOnNode_.find(name);
      capacity.nodes.push_back({name, node.gpus, used == usedOnNode_.end() ? 0 : used->second, 0,
                                node.gpuMemoryBytes, node.gpuProduct});
    }
    unbound.reserve(unbound_.size());
    for (const auto& [key, gpus] : unbound_) {
      unbound.emplace_back(gpus, key);
    }
  }
  std::erase_if(unbound, [&](const auto& pod) { return !reserves(pod.second); });
  // Largest first, then by key, so the same Pods always give the same placement.
  std::ranges::sort(unbound, [](const auto& left, const auto& right) {
    return left.first != right.first ? left.first > right.first : left.second < right.second;
  });
  // Best fit: each unbound Pod on the node with the fewest free GPUs that holds it, the first by
  // name among equals. Nodes are kept ordered by (free GPUs, index) so that finding it costs a
  // lookup, not a pass over every node: a burst of jobs leaves thousands of Pods unbound.
  std::set<std::pair<int, std::size_t>> byFree;
  for (std::size_t index = 0; index < capacity.nodes.size(); ++index) {
    byFree.emplace(capacity.nodes[index].free(), index);
  }
  for (const auto& [wanted, key] : unbound) {
    const auto fit = byFree.lower_bound({wanted, 0});
    if (fit == byFree.end()) {
      capacity.waiting += wanted;
      continue;
    }
    const std::size_t index = fit->second;
    byFree.erase(fit);
    NodeGpus& node = capacity.nodes[index];
    node.reserved += wanted;
    byFree.emplace(node.free(), index);
  }
  return capacity;
}

}  // namespace autotune::controller
