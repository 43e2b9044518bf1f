#include "controller/objects/gpu_capacity.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

namespace autotune::controller {

int NodeGpus::free() const { return std::max(0, allocatable - used - reserved); }

int GpuCapacity::total() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const NodeGpus& node) { return sum + node.allocatable; });
}

int GpuCapacity::used() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const NodeGpus& node) { return sum + node.used; });
}

int GpuCapacity::reserved() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const NodeGpus& node) { return sum + node.reserved; });
}

int GpuCapacity::free() const {
  return std::accumulate(nodes.begin(), nodes.end(), 0,
                         [](int sum, const NodeGpus& node) { return sum + node.free(); });
}

GpuCapacity forJob(GpuCapacity capacity, const api::Spec& spec) {
  if (spec.gpuModels.empty()) {
    return capacity;
  }
  capacity.model = spec.gpuModels.front();
  std::vector<NodeGpus> ofModel;
  for (auto& node : capacity.nodes) {
    if (node.product == capacity.model) {
      ofModel.push_back(std::move(node));
    } else {
      capacity.otherModels.insert(node.product);
    }
  }
  capacity.nodes = std::move(ofModel);
  return capacity;
}

int freeSlotsFor(const GpuCapacity& capacity, const api::Resources& trial) {
  const int perNode = trial.gpusPerNode();
  if (perNode <= 0 || trial.nodesPerTrial <= 0) {
    return 0;
  }
  // k trials fit when the nodes' shares, each node giving at most one per trial, add up to
  // k * nodes: k is at most the sum of the shares divided by the nodes per trial.
  std::vector<int> shares;
  int total = 0;
  for (const auto& node : capacity.nodes) {
    if (const int share = node.free() / perNode; share > 0) {
      shares.push_back(share);
      total += share;
    }
  }
  int trials = total / trial.nodesPerTrial;
  const auto fits = [&](int count) {
    std::int64_t placed = 0;
    for (const int share : shares) {
      placed += std::min(share, count);
    }
    return placed >= std::int64_t{count} * trial.nodesPerTrial;
  };
  while (trials > 0 && !fits(trials)) {
    --trials;
  }
  return trials;
}

bool holdsARank(const NodeGpus& node, const api::Resources& trial) {
  return node.allocatable >= trial.gpusPerNode();
}

bool fitsSomeNodes(const GpuCapacity& capacity, const api::Resources& trial) {
  const auto holding = std::ranges::count_if(
      capacity.nodes, [&](const NodeGpus& node) { return holdsARank(node, trial); });
  return trial.gpusPerNode() > 0 && holding >= trial.nodesPerTrial;
}

std::optional<std::int64_t> gpuMemoryBytes(const GpuCapacity& capacity,
                                           const api::Resources& trial) {
  std::optional<std::int64_t> smallest;
  for (const auto& node : capacity.nodes) {
    if (holdsARank(node, trial) && node.memoryBytes) {
      smallest = std::min(smallest.value_or(*node.memoryBytes), *node.memoryBytes);
    }
  }
  return smallest;
}

}  // namespace autotune::controller
