#pragma once
// The cluster's GPUs as the controller sees them: what schedulable Nodes offer, what Pods hold or
// are about to take, and so how many more trials can start now. Which job gets the slots is the
// plan's business; this only counts.

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/job.h"

namespace autotune::controller {

// The GPU a trial runs on: its node's nvidia.com/gpu.product label, and its memory from the
// nvidia.com/gpu.memory label, else spec.resources.gpuMemory. On a node without those labels, what
// a DRA driver's slice publishes of its GPUs stands for them.
struct GpuModel {
  std::string product;
  std::optional<std::int64_t> memoryBytes;

  bool operator==(const GpuModel&) const = default;
};

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
  // For a job of one GPU model (forJob): that model, whose nodes alone are counted, and the
  // models of the nodes left out.
  std::string model;
  std::set<std::string> otherModels;

  int total() const;
  int used() const;
  int reserved() const;
  int free() const;
};

// What a job's trials can use: with spec.gpuModels, the nodes of that model alone.
GpuCapacity forJob(GpuCapacity capacity, const api::Spec& spec);

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
