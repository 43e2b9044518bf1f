#include "controller/gpu_slots.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <numeric>
#include <string_view>
#include <tuple>

#include "api/units.h"
#include "controller/json_fields.h"
#include "controller/trial_pod.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

constexpr std::int64_t kMebibyte = std::int64_t{1} << 20;

// A count of devices: quantities are strings ("8") in what the API server returns, numbers in
// what people write.
std::optional<std::int64_t> count(const json& quantity) {
  if (quantity.is_number_integer()) {
    return quantity.get<std::int64_t>();
  }
  if (quantity.is_string()) {
    if (auto parsed = api::Quantity::parse(quantity.get<std::string>())) {
      return parsed->value();
    }
  }
  return std::nullopt;
}

int gpus(const json& quantity) {
  const auto value = count(quantity).value_or(0);
  return static_cast<int>(std::clamp<std::int64_t>(value, 0, std::numeric_limits<int>::max()));
}

// Extended resources need limits and allow requests only equal to them; either one says it.
int containerGpus(const json& container) {
  const json& resources = member(container, "resources");
  const json& limit = member(member(resources, "limits"), kGpuResource);
  return gpus(limit.is_null() ? member(member(resources, "requests"), kGpuResource) : limit);
}

// As the scheduler counts a Pod: its containers and sidecars together, or its largest init step
// (with the sidecars started before it), whichever is more.
int podGpus(const json& pod) {
  const json& spec = member(pod, "spec");
  int sidecars = 0;
  int initPeak = 0;
  for (const auto& init : member(spec, "initContainers")) {
    if (text(init, "restartPolicy") == "Always") {
      sidecars += containerGpus(init);
    } else {
      initPeak = std::max(initPeak, sidecars + containerGpus(init));
    }
  }
  int containers = 0;
  for (const auto& container : member(spec, "containers")) {
    containers += containerGpus(container);
  }
  return std::max(containers + sidecars, initPeak);
}

bool isReady(const json& node) {
  for (const auto& condition : member(member(node, "status"), "conditions")) {
    if (text(condition, "type") == "Ready") {
      return text(condition, "status") == "True";
    }
  }
  return false;
}

// Per-GPU memory from the label: a number of MiB as GPU feature discovery writes it, or a
// quantity with its unit.
std::optional<std::int64_t> labelledMemory(const json& node) {
  const std::string value = text(member(member(node, "metadata"), "labels"), kGpuMemoryLabel);
  if (value.empty()) {
    return std::nullopt;
  }
  std::int64_t mebibytes = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), mebibytes);
  if (error == std::errc() && end == value.data() + value.size()) {
    return mebibytes > 0 ? std::optional(mebibytes * kMebibyte) : std::nullopt;
  }
  if (auto quantity = api::Quantity::parse(value); quantity && quantity->value() > 0) {
    return quantity->value();
  }
  return std::nullopt;
}

bool finished(const json& pod) {
  const std::string phase = text(member(pod, "status"), "phase");
  return phase == "Succeeded" || phase == "Failed";
}

}  // namespace

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

GpuCapacity gpuCapacity(const std::vector<json>& nodes, const std::vector<json>& pods) {
  GpuCapacity capacity;
  for (const auto& node : nodes) {
    const int allocatable =
        gpus(member(member(member(node, "status"), "allocatable"), kGpuResource));
    if (allocatable <= 0 || member(member(node, "spec"), "unschedulable") == true ||
        !isReady(node)) {
      continue;
    }
    capacity.nodes.push_back(
        {text(member(node, "metadata"), "name"), allocatable, 0, 0, labelledMemory(node)});
  }
  std::ranges::sort(capacity.nodes, {}, &NodeGpus::name);

  // (GPUs, namespace/name) of the unbound Pods, to place after the bound ones.
  std::vector<std::tuple<int, std::string>> unbound;
  for (const auto& pod : pods) {
    const int wanted = podGpus(pod);
    if (wanted <= 0 || finished(pod)) {
      continue;
    }
    const std::string node = text(member(pod, "spec"), "nodeName");
    if (node.empty()) {
      const json& metadata = member(pod, "metadata");
      unbound.emplace_back(wanted, text(metadata, "namespace") + "/" + text(metadata, "name"));
      continue;
    }
    const auto held = std::ranges::find(capacity.nodes, node, &NodeGpus::name);
    if (held != capacity.nodes.end()) {
      held->used += wanted;
    }
  }
  // Largest first, then by name, so the same Pods always give the same placement.
  std::ranges::sort(unbound, [](const auto& left, const auto& right) {
    return std::get<0>(left) != std::get<0>(right) ? std::get<0>(left) > std::get<0>(right)
                                                   : std::get<1>(left) < std::get<1>(right);
  });
  for (const auto& [wanted, name] : unbound) {
    NodeGpus* best = nullptr;
    for (auto& node : capacity.nodes) {
      if (node.free() >= wanted && (best == nullptr || node.free() < best->free())) {
        best = &node;
      }
    }
    if (best == nullptr) {
      capacity.waiting += wanted;
    } else {
      best->reserved += wanted;
    }
  }
  return capacity;
}

int freeSlotsFor(const GpuCapacity& capacity, int gpusPerTrial) {
  if (gpusPerTrial <= 0) {
    return 0;
  }
  return std::accumulate(
      capacity.nodes.begin(), capacity.nodes.end(), 0,
      [&](int sum, const NodeGpus& node) { return sum + node.free() / gpusPerTrial; });
}

bool fitsSomeNode(const GpuCapacity& capacity, int gpusPerTrial) {
  return std::ranges::any_of(
      capacity.nodes, [&](const NodeGpus& node) { return node.allocatable >= gpusPerTrial; });
}

std::optional<std::int64_t> gpuMemoryBytes(const GpuCapacity& capacity, int gpusPerTrial) {
  std::optional<std::int64_t> smallest;
  for (const auto& node : capacity.nodes) {
    if (node.allocatable >= gpusPerTrial && node.memoryBytes) {
      smallest = std::min(smallest.value_or(*node.memoryBytes), *node.memoryBytes);
    }
  }
  return smallest;
}

}  // namespace autotune::controller
