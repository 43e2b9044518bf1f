#pragma once
// The simulated GPU Nodes: registered as a kubelet registers its Node (capacity, labels, Ready),
// and kept alive as a kubelet does, by renewing a Lease in kube-node-lease and refreshing the
// Ready condition's heartbeat. Without those the node lifecycle controller of
// kube-controller-manager marks a Node Unknown after its grace period (50 s) and taints it
// unreachable, and its Pods are evicted.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/client.h"

namespace autotune::nodesim {

struct NodeShape {
  std::string namePrefix = "gpu-node";
  int count = 1;
  int gpus = 8;
  std::int64_t gpuMemoryMiB = 0;             // per GPU
  std::string gpuProduct = "Simulated-GPU";  // the GPU model, as nvidia.com/gpu.product
  // Set: the GPUs are a DRA driver's devices, one ResourceSlice per Node, and the Node advertises
  // no nvidia.com/gpu.
  std::string draDriver;
  std::string cpu = "32";
  std::string memory = "256Gi";
  int heartbeatSeconds = 10;
};

// A memory quantity such as 32Gi, 80G or 34359738368 in MiB (rounded down), as NVIDIA's GPU
// feature discovery writes nvidia.com/gpu.memory; nullopt when it is not a quantity.
std::optional<std::int64_t> mebibytes(std::string_view quantity);

// prefix-0 ... prefix-(count-1).
std::vector<std::string> nodeNames(const NodeShape& shape);

// The ResourceSlice of the Node `name`'s GPUs, for shape.draDriver: pool the Node's name, each
// GPU a device gpu-<i> with the attributes NVIDIA's DRA driver gives (type gpu, productName, in
// its words: spaces where nvidia.com/gpu.product has dashes) and its memory as capacity.
nlohmann::json resourceSlice(const NodeShape& shape, const std::string& name,
                             const std::string& nodeUid);

// The address the simulated Nodes and their Pods report: the processes run on this host.
inline constexpr std::string_view kHostIp = "127.0.0.1";

// How many times the simulator makes a write that the API server answers with a Conflict.
inline constexpr int kWriteAttempts = 5;

class Nodes {
 public:
  Nodes(const k8s::Client& client, NodeShape shape) : client_(client), shape_(std::move(shape)) {}

  // Creates each Node, or brings an existing one (left by an earlier run) to this shape.
  k8s::Result<void> registerAll() const;
  // Renews each Node's Lease and Ready heartbeat, registering a Node again if it was deleted.
  // Failures are logged and retried at the next beat.
  void heartbeat() const;
  // Deletes the Nodes (their Leases go with them: they are owned by the Node).
  void removeAll() const;

 private:
  k8s::Result<void> registerNode(const std::string& name) const;
  k8s::Result<void> writeStatus(const std::string& name) const;
  k8s::Result<void> renewLease(const std::string& name) const;
  // The Node's ResourceSlice, as a DRA driver's kubelet plugin publishes it: owned by the Node.
  k8s::Result<void> publishSlice(const std::string& name) const;

  const k8s::Client& client_;
  NodeShape shape_;
};

}  // namespace autotune::nodesim
