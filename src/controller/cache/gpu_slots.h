#pragma once
// The GPU ledger: what schedulable Nodes offer and what Pods hold or are about to take, kept
// current as they change, read as a GpuCapacity (gpu_capacity.h).

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "controller/objects/gpu_capacity.h"
#include "controller/objects/objects.h"

namespace autotune::controller {

// The cluster's GPUs kept current as Nodes and trial Pods change, so that reading the capacity
// walks the nodes and the unbound Pods only. Thread-safe.
//
// GPUs of Ready Nodes without spec.unschedulable (taints are not read: GPU nodes are commonly
// tainted for the Pods that tolerate it). A Pod bound to a node holds the GPUs its containers ask
// for (see Pod::gpus) until it Succeeded or Failed, whoever made it: the scheduler placed it there.
// An unbound Pod holds nothing, but one that `reserves` accepts (a trial of a job the operator
// holds) and that no scheduling gate holds is placed best-fit, largest first, as a reservation (on
// a node of its GPU model, when it selects one), so that trials already waiting for the scheduler
// are not counted twice. Pods on other Nodes are ignored.
//
// A Node that advertises no nvidia.com/gpu has the GPUs of its DRA driver's ResourceSlices
// instead (with --dra-driver): there the ResourceClaims allocated on it hold GPUs, its Pods'
// requests none (a Pod that asks for nvidia.com/gpu through DRA's extended-resource mapping has a
// claim of its own), its GPU memory is its label's, else its slices', and its GPU model is its
// label's alone (a search of one model pins its trials by that label; publishedGpu names the
// slices' model for what ran there).
class GpuLedger {
 public:
  // Whether the unbound Pod of this key (namespace/name) reserves GPUs.
  using Reserves = std::function<bool(const std::string& podKey)>;

  void setNode(const Node& node);
  void removeNode(const std::string& name);
  void setPod(const Pod& pod);
  void removePod(const std::string& key);
  void setSlice(const DeviceSlice& slice);
  void removeSlice(const std::string& name);
  void setClaim(const DeviceClaim& claim);
  void removeClaim(const std::string& key);

  // `reserves` is asked without the ledger's lock held: it may read the caches.
  GpuCapacity capacity(const Reserves& reserves) const;
  // The model and memory the driver's first slice on the node publishes, cordoned or not.
  std::optional<GpuModel> publishedGpu(const std::string& node) const;

 private:
  // GPUs held on nodes by key (a bound Pod, an allocated claim), added up per node.
  class NodeTally {
   public:
    void hold(const std::string& key, const std::string& node, int gpus);
    void release(const std::string& key);
    int on(const std::string& node) const;

   private:
    std::map<std::string, std::pair<std::string, int>, std::less<>> byKey_;
    std::map<std::string, int, std::less<>> byNode_;
  };

  // What an unbound Pod waits for.
  struct Unbound {
    int gpus = 0;
    std::string gpuModel;  // the one model it may go to (Pod::gpuModel), if any
  };

  // Counts the node among those with GPUs, or no longer: schedulable, with GPUs of its own or
  // slices that name it. Kept as things change, so that reading the capacity walks those alone.
  void recount(const std::string& node);
  void release(const std::string& podKey);
  void removeSliceLocked(const std::string& name);
  // A node as GpuCapacity counts it: its DRA GPUs when it advertises none.
  NodeGpus countOf(const Node& node) const;

  mutable std::mutex mutex_;
  std::map<std::string, Node, std::less<>> nodes_;  // schedulable
  std::set<std::string, std::less<>> counted_;      // of nodes_, those with GPUs
  NodeTally boundPods_;
  std::map<std::string, Unbound, std::less<>> unbound_;  // by Pod key
  // The DRA slices of GPUs that name each node, by slice name, and the node of each slice.
  std::map<std::string, std::map<std::string, DeviceSlice>, std::less<>> slicesOnNode_;
  std::map<std::string, std::string, std::less<>> nodeOfSlice_;
  NodeTally claims_;
};

}  // namespace autotune::controller
