#include "nodes.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <chrono>

#include "container.h"
#include "k8s/resources.h"
#include "log.h"
#include "object/read.h"

namespace autotune::nodesim {
namespace {

using k8s::kLeases;
using k8s::kNamespaces;
using k8s::kNodes;
using nlohmann::json;

constexpr const char* kLeaseNamespace = "kube-node-lease";
// The kubelet's defaults: a Lease lasts 40 s; a Node holds 110 Pods.
constexpr int kLeaseSeconds = 40;
constexpr const char* kMaxPods = "110";

// A node of a DRA driver runs no GPU feature discovery: it is labelled a GPU node, as the
// operator's node selector asks, and its GPUs are named by its ResourceSlice alone.
json labels(const NodeShape& shape, const std::string& name) {
  json labels = {{"kubernetes.io/hostname", name},
                 {"kubernetes.io/os", "linux"},
                 {"kubernetes.io/arch", "amd64"},
                 {"nvidia.com/gpu.present", "true"},
                 {"autotune.io/node-sim", "true"}};
  if (shape.draDriver.empty()) {
    // What NVIDIA's GPU feature discovery labels a GPU node with.
    labels["nvidia.com/gpu.count"] = std::to_string(shape.gpus);
    labels["nvidia.com/gpu.memory"] = std::to_string(shape.gpuMemoryMiB);
    labels["nvidia.com/gpu.product"] = shape.gpuProduct;
  }
  return labels;
}

// The product as NVIDIA's DRA driver names it, with spaces ("NVIDIA H100 80GB HBM3") where GPU
// feature discovery's label has dashes.
std::string driverProductName(std::string product) {
  std::ranges::replace(product, '-', ' ');
  return product;
}

// The kubelet's node conditions, all healthy, heartbeat now; a transition time is kept while
// the condition's status stays the same.
json conditions(const json& previous, const std::string& time) {
  const std::vector<std::array<const char*, 4>> healthy = {
      {"Ready", "True", "KubeletReady", "kubelet is posting ready status"},
      {"MemoryPressure", "False", "KubeletHasSufficientMemory",
       "kubelet has sufficient memory available"},
      {"DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
      {"PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"}};
  json result = json::array();
  for (const auto& [type, status, reason, message] : healthy) {
    std::string transition = time;
    if (previous.is_array()) {
      for (const auto& old : previous) {
        if (old.value("type", "") == type && old.value("status", "") == status) {
          transition = old.value("lastTransitionTime", time);
        }
      }
    }
    result.push_back({{"type", type},
                      {"status", status},
                      {"reason", reason},
                      {"message", message},
                      {"lastHeartbeatTime", time},
                      {"lastTransitionTime", transition}});
  }
  return result;
}

// Rewrites what a kubelet owns in a Node's status.
void writeNodeStatus(json& status, const NodeShape& shape, const std::string& name) {
  json resources = {{"cpu", shape.cpu}, {"memory", shape.memory}, {"pods", kMaxPods}};
  if (shape.draDriver.empty()) {
    resources["nvidia.com/gpu"] = std::to_string(shape.gpus);
  }
  status["capacity"] = resources;
  status["allocatable"] = resources;
  status["conditions"] = conditions(status.value("conditions", json()), now());
  status["addresses"] = json::array(
      {{{"type", "InternalIP"}, {"address", kHostIp}}, {{"type", "Hostname"}, {"address", name}}});
  status["nodeInfo"] = {{"architecture", "amd64"},
                        {"operatingSystem", "linux"},
                        {"osImage", "autotune node simulator"},
                        {"containerRuntimeVersion", "node-sim://0.1"},
                        {"kernelVersion", ""},
                        {"kubeletVersion", ""},
                        {"kubeProxyVersion", ""},
                        {"machineID", name},
                        {"systemUUID", name},
                        {"bootID", name}};
}

}  // namespace

std::optional<std::int64_t> mebibytes(std::string_view quantity) {
  std::size_t digits = 0;
  while (digits < quantity.size() &&
         std::isdigit(static_cast<unsigned char>(quantity[digits])) != 0) {
    ++digits;
  }
  if (digits == 0 || digits > 15) {
    return std::nullopt;
  }
  std::int64_t number = 0;
  std::from_chars(quantity.data(), quantity.data() + digits, number);
  const std::string_view suffix = quantity.substr(digits);
  constexpr std::int64_t kMi = std::int64_t{1} << 20;
  const std::vector<std::pair<std::string_view, std::int64_t>> units = {
      {"", 1},
      {"Ki", std::int64_t{1} << 10},
      {"Mi", kMi},
      {"Gi", std::int64_t{1} << 30},
      {"Ti", std::int64_t{1} << 40},
      {"k", 1000},
      {"M", 1000 * 1000},
      {"G", 1000 * 1000 * 1000},
      {"T", std::int64_t{1000} * 1000 * 1000 * 1000}};
  for (const auto& [unit, bytes] : units) {
    if (suffix == unit) {
      // Whole MiB without overflow: units of a MiB or more multiply, smaller ones divide.
      return bytes >= kMi ? number * (bytes / kMi) : number * bytes / kMi;
    }
  }
  return std::nullopt;
}

json resourceSlice(const NodeShape& shape, const std::string& name, const std::string& nodeUid) {
  json devices = json::array();
  for (int index = 0; index < shape.gpus; ++index) {
    devices.push_back(
        {{"name", "gpu-" + std::to_string(index)},
         {"attributes",
          {{"type", {{"string", "gpu"}}},
           {"productName", {{"string", driverProductName(shape.gpuProduct)}}}}},
         {"capacity", {{"memory", {{"value", std::to_string(shape.gpuMemoryMiB) + "Mi"}}}}}});
  }
  const json owner = {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", name}, {"uid", nodeUid}};
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name + "-gpus"}, {"ownerReferences", json::array({owner})}}},
          {"spec",
           {{"driver", shape.draDriver},
            {"nodeName", name},
            {"pool", {{"name", name}, {"generation", 1}, {"resourceSliceCount", 1}}},
            {"devices", std::move(devices)}}}};
}

std::vector<std::string> nodeNames(const NodeShape& shape) {
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(shape.count));
  for (int index = 0; index < shape.count; ++index) {
    names.push_back(shape.namePrefix + "-" + std::to_string(index));
  }
  return names;
}

k8s::Result<void> Nodes::registerAll() const {
  // The API server makes kube-node-lease itself; a server that has not yet done so gets it here.
  if (auto made = client_.create(kNamespaces, "", {{"metadata", {{"name", kLeaseNamespace}}}});
      !made && made.error().kind != k8s::ErrorKind::kAlreadyExists) {
    return tl::unexpected(made.error());
  }
  for (const auto& name : nodeNames(shape_)) {
    if (auto registered = registerNode(name); !registered) {
      return registered;
    }
    if (auto published = publishSlice(name); !published) {
      return published;
    }
    if (auto renewed = renewLease(name); !renewed) {
      return renewed;
    }
  }
  return {};
}

k8s::Result<void> Nodes::registerNode(const std::string& name) const {
  json node = {{"apiVersion", "v1"},
               {"kind", "Node"},
               {"metadata", {{"name", name}, {"labels", labels(shape_, name)}}},
               {"status", json::object()}};
  writeNodeStatus(node["status"], shape_, name);
  // The API server keeps the status given on create (a kubelet registers this way), and its
  // TaintNodesByCondition admission adds node.kubernetes.io/not-ready:NoSchedule, which the node
  // lifecycle controller removes once it sees the Node Ready.
  auto created = client_.create(kNodes, "", node);
  if (created) {
    logLine("registered node " + name + " with " + std::to_string(shape_.gpus) + " GPUs of " +
            std::to_string(shape_.gpuMemoryMiB) + " MiB");
    return {};
  }
  if (created.error().kind != k8s::ErrorKind::kAlreadyExists) {
    return tl::unexpected(created.error());
  }
  // An update ignores status (that takes nodes/status) and keeps others' taints and labels.
  const json wanted = labels(shape_, name);
  for (int attempt = 0;; ++attempt) {
    auto existing = client_.get(kNodes, "", name);
    if (!existing) {
      return tl::unexpected(existing.error());
    }
    for (const auto& [key, value] : wanted.items()) {
      (*existing)["metadata"]["labels"][key] = value;
    }
    auto updated = client_.update(kNodes, "", *existing);
    if (updated) {
      break;
    }
    if (updated.error().kind != k8s::ErrorKind::kConflict || attempt + 1 >= kWriteAttempts) {
      return tl::unexpected(updated.error());
    }
  }
  if (auto written = writeStatus(name); !written) {
    return written;
  }
  logLine("updated existing node " + name + " to " + std::to_string(shape_.gpus) + " GPUs of " +
          std::to_string(shape_.gpuMemoryMiB) + " MiB");
  return {};
}

k8s::Result<void> Nodes::writeStatus(const std::string& name) const {
  for (int attempt = 0;; ++attempt) {
    auto node = client_.get(kNodes, "", name);
    if (!node) {
      return tl::unexpected(node.error());
    }
    writeNodeStatus((*node)["status"], shape_, name);
    auto written = client_.updateStatus(kNodes, "", *node);
    if (written) {
      return {};
    }
    if (written.error().kind != k8s::ErrorKind::kConflict || attempt + 1 >= kWriteAttempts) {
      return tl::unexpected(written.error());
    }
  }
}

k8s::Result<void> Nodes::publishSlice(const std::string& name) const {
  if (shape_.draDriver.empty()) {
    return {};
  }
  auto node = client_.get(kNodes, "", name);
  if (!node) {
    return tl::unexpected(node.error());
  }
  json slice = resourceSlice(shape_, name, object::text(object::metadataOf(*node), "uid"));
  const std::string sliceName = slice["metadata"]["name"];
  // One left by an earlier run is replaced: its owner may be a Node since deleted.
  if (auto removed = client_.remove(k8s::kResourceSlices, "", sliceName);
      !removed && removed.error().kind != k8s::ErrorKind::kNotFound) {
    return tl::unexpected(removed.error());
  }
  auto created = client_.create(k8s::kResourceSlices, "", slice);
  if (!created) {
    return tl::unexpected(created.error());
  }
  logLine("published ResourceSlice " + sliceName + " of driver " + shape_.draDriver + " with " +
          std::to_string(shape_.gpus) + " GPUs");
  return {};
}

k8s::Result<void> Nodes::renewLease(const std::string& name) const {
  const std::string renewTime = microTimestamp(std::chrono::system_clock::now());
  auto lease = client_.get(kLeases, kLeaseNamespace, name);
  if (lease) {
    (*lease)["spec"]["holderIdentity"] = name;
    (*lease)["spec"]["leaseDurationSeconds"] = kLeaseSeconds;
    (*lease)["spec"]["renewTime"] = renewTime;
    auto updated = client_.update(kLeases, kLeaseNamespace, *lease);
    return updated ? k8s::Result<void>() : tl::unexpected(updated.error());
  }
  if (lease.error().kind != k8s::ErrorKind::kNotFound) {
    return tl::unexpected(lease.error());
  }
  // Owned by its Node, as the kubelet does it, so the garbage collector removes it with the Node.
  auto node = client_.get(kNodes, "", name);
  if (!node) {
    return tl::unexpected(node.error());
  }
  const json owner = {
      {"apiVersion", "v1"}, {"kind", "Node"}, {"name", name}, {"uid", (*node)["metadata"]["uid"]}};
  auto created =
      client_.create(kLeases, kLeaseNamespace,
                     {{"apiVersion", "coordination.k8s.io/v1"},
                      {"kind", "Lease"},
                      {"metadata", {{"name", name}, {"ownerReferences", json::array({owner})}}},
                      {"spec",
                       {{"holderIdentity", name},
                        {"leaseDurationSeconds", kLeaseSeconds},
                        {"renewTime", renewTime}}}});
  return created ? k8s::Result<void>() : tl::unexpected(created.error());
}

void Nodes::heartbeat() const {
  for (const auto& name : nodeNames(shape_)) {
    auto written = writeStatus(name);
    if (!written && written.error().kind == k8s::ErrorKind::kNotFound) {
      logLine("node " + name + " was deleted; registering it again");
      written = registerNode(name);
      if (written) {
        written = publishSlice(name);
      }
    }
    if (!written) {
      logLine("heartbeat of node " + name + " failed: " + k8s::describe(written.error()));
    }
    if (auto renewed = renewLease(name); !renewed) {
      logLine("renewing the lease of node " + name + " failed: " + k8s::describe(renewed.error()));
    }
  }
}

void Nodes::removeAll() const {
  for (const auto& name : nodeNames(shape_)) {
    auto removed = client_.remove(kNodes, "", name);
    if (removed || removed.error().kind == k8s::ErrorKind::kNotFound) {
      logLine("deleted node " + name);
    } else {
      logLine("deleting node " + name + " failed: " + k8s::describe(removed.error()));
    }
  }
}

}  // namespace autotune::nodesim
