// The Cluster's view of a DRA driver's GPUs (--dra-driver): its ResourceSlices and every
// namespace's ResourceClaims, kept in the GPU ledger, and whom their changes wake.

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/cache/cluster.h"

namespace autotune::controller {
namespace {

// The GPU model of the node as the ledger counts it, and as a search of one model pins its trials:
// its nvidia.com/gpu.product label alone ("" when unlabelled or unknown).
std::string labelledModel(const NodeStore& nodes, const std::string& name) {
  const auto node = nodes.get(name);
  return node != nullptr ? node->gpuProduct : "";
}

}  // namespace

DeviceSliceStore& Cluster::addDeviceSlices(const std::string& driver) {
  slices_ = std::make_unique<DeviceSliceStore>(
      [driver](const nlohmann::json& object) { return decodeDeviceSlice(object, driver); },
      [](const DeviceSlice& slice) { return slice.name; },
      [](const DeviceSlice& slice) { return slice.resourceVersion; });
  slices_->listen([this](const DeviceSlice* before, const DeviceSlice* after) {
    if (after == nullptr) {
      gpus_.removeSlice(before->name);
    } else {
      gpus_.setSlice(*after);
    }
  });
  return *slices_;
}

DeviceClaimStore& Cluster::addDeviceClaims(const std::string& driver) {
  claims_ = std::make_unique<DeviceClaimStore>(
      [driver](const nlohmann::json& object) { return decodeDeviceClaim(object, driver); },
      [](const DeviceClaim& claim) { return claim.key; },
      [](const DeviceClaim& claim) { return claim.resourceVersion; });
  claims_->listen([this](const DeviceClaim* before, const DeviceClaim* after) {
    if (after == nullptr) {
      gpus_.removeClaim(before->key);
    } else {
      gpus_.setClaim(*after);
    }
  });
  return *claims_;
}

std::vector<std::string> Cluster::jobsWokenBySlice(const DeviceSlice* before,
                                                   const DeviceSlice* after) const {
  if (after == nullptr) {
    return {};
  }
  const int more = after->gpus - (before != nullptr ? before->gpus : 0);
  if (more <= 0) {
    return {};
  }
  std::set<std::string> keys;
  for (auto& key : waiting_.takers(more, labelledModel(*nodes_, after->nodeName))) {
    keys.insert(std::move(key));
  }
  for (auto& key : waiting_.waitingForNode()) {
    keys.insert(std::move(key));
  }
  return {keys.begin(), keys.end()};
}

std::vector<std::string> Cluster::jobsWokenByClaim(const DeviceClaim* before,
                                                   const DeviceClaim* after) const {
  if (before == nullptr) {
    return {};
  }
  const int fewer = before->gpus - (after != nullptr ? after->gpus : 0);
  if (fewer <= 0) {
    return {};
  }
  return waiting_.takers(fewer, labelledModel(*nodes_, before->nodeName));
}

}  // namespace autotune::controller
