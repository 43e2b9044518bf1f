// The Cluster's view of a DRA driver's GPUs (--dra-driver): its ResourceSlices and every
// namespace's ResourceClaims, kept in the GPU ledger, and whom their changes wake.

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "controller/cache/cluster.h"

namespace autotune::controller {

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
  // The GPU model as the ledger counts it: the node's label, else the slice's.
  const auto node = nodes_->get(after->nodeName);
  const std::string& model =
      node != nullptr && !node->gpuProduct.empty() ? node->gpuProduct : after->product;
  std::set<std::string> keys;
  for (auto& key : waiting_.takers(more, model)) {
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
  const auto node = nodes_->get(before->nodeName);
  return waiting_.takers(fewer, node != nullptr ? node->gpuProduct : "");
}

}  // namespace autotune::controller
