#pragma once
// The cluster's GPUs as the controller sees them: what schedulable Nodes offer, what Pods hold or
// are about to take, and so how many more trials can start now. Which job gets the slots is the
// reconciler's business; this only counts.

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "controller/objects.h"

namespace autotune::controller {

struct NodeGpus {
  std::string name;
  int allocatable = 0;  // status.allocatable nvidia.com/gpu
  int used = 0;         // held by unfinished Pods bound to this node
  int reserved = 0;     // wanted by unbound Pods that fit here (see gpuCapacity)
  std::optional<std::int64_t> memoryBytes;  // per GPU, from api::kGpuMemoryLabel
  std::string product;                      // from api::kGpuProductLabel

  int free() const;
};

struct GpuCapacity {
  std::vector<NodeGpus> nodes;  // Ready, schedulable Nodes with GPUs, by name
  int waiting = 0;              // GPUs wanted by unbound Pods that fit on no node now
  std::string nodeSelector;     // of the Nodes watched; empty: every Node

  int total() const;
  int used() const;
  int reserved() const;
  int free() const;
};

// The cluster's GPUs kept current as Nodes and trial Pods change, so that reading the capacity
// walks the nodes and the unbound Pods only. Thread-safe.
//
// GPUs of Ready Nodes without spec.unschedulable (taints are not read: GPU nodes are commonly
// tainted for the Pods that tolerate it). A Pod bound to a node holds the GPUs its containers ask
// for (see Pod::gpus) until it Succeeded or Failed, whoever made it: the scheduler placed it there.
// An unbound Pod holds nothing, but one that `reserves` accepts (a trial of a job the operator
// holds) and that no scheduling gate holds is placed best-fit, largest first, as a reservation, so
// that trials already waiting for the scheduler are not counted twice. Pods on other Nodes are
// ignored.
class GpuLedger {
 public:
  // Whether the unbound Pod of this key (namespace/name) reserves GPUs.
  using Reserves = std::function<bool(const std::string& podKey)>;

  void setNode(const Node& node);
  void removeNode(const std::string& name);
  void setPod(const Pod& pod);
  void removePod(const std::string& key);

  // `reserves` is asked without the ledger's lock held: it may read the caches.
  GpuCapacity capacity(const Reserves& reserves) const;

 private:
  struct Hold {
    std::string node;  // empty while unbound
    int gpus = 0;
  };

  void release(const std::string& key);

  mutable std::mutex mutex_;
  std::map<std::string, Node, std::less<>> nodes_;  // schedulable, with GPUs
  std::map<std::string, Hold, std::less<>> holds_;  // by Pod key
  std::map<std::string, int, std::less<>> usedOnNode_;
  std::map<std::string, int, std::less<>> unbound_;  // Pod key -> GPUs
};

// A trial takes gpusPerTrial over nodesPerTrial distinct nodes, the same number on each.

// How many trials of this shape can start now, all or nothing: each needs its share of GPUs free
// on each of `nodes` distinct nodes, so that no trial is launched half placed, to hold GPUs while
// it waits for others that another half-placed trial holds.
int freeSlotsFor(const GpuCapacity& capacity, const api::Resources& trial);

// Whether enough nodes could hold a trial of this shape once they are idle.
bool fitsSomeNodes(const GpuCapacity& capacity, const api::Resources& trial);

// Whether the node has GPUs enough for one of the trial's ranks (a rank runs on one node).
bool holdsARank(const NodeGpus& node, const api::Resources& trial);

// The per-GPU memory a trial can count on when spec.resources.gpuMemory is absent: the smallest
// labelled among the nodes that could hold its share. Nothing when none of them is labelled.
std::optional<std::int64_t> gpuMemoryBytes(const GpuCapacity& capacity,
                                           const api::Resources& trial);

}  // namespace autotune::controller
