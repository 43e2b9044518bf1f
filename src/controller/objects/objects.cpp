#include "controller/objects/objects.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <string_view>

#include "api/labels.h"
#include "api/units.h"
#include "controller/objects/trial_pod.h"
#include "object/read.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using object::member;
using object::text;

constexpr std::int64_t kMebibyte = std::int64_t{1} << 20;

std::optional<Timestamp> timeAt(const json& object, std::string_view key) {
  return parseTime(text(object, key));
}

std::optional<std::int64_t> integerAt(const json& object, std::string_view key) {
  const json& value = member(object, key);
  return value.is_number_integer() ? std::optional(value.get<std::int64_t>()) : std::nullopt;
}

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
  const std::string value = text(member(member(node, "metadata"), "labels"), api::kGpuMemoryLabel);
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

std::optional<PodCondition> conditionOf(const json& status, std::string_view type) {
  for (const auto& entry : member(status, "conditions")) {
    if (text(entry, "type") == type) {
      return PodCondition{text(entry, "status"), text(entry, "reason"), text(entry, "message"),
                          timeAt(entry, "lastTransitionTime")};
    }
  }
  return std::nullopt;
}

ContainerStatus containerStatusOf(const json& status) {
  ContainerStatus container;
  container.name = text(status, "name");
  container.imageID = text(status, "imageID");
  const json& state = member(status, "state");
  if (const json& terminated = member(state, "terminated"); terminated.is_object()) {
    ContainerStatus::Terminated ended;
    if (const auto code = integerAt(terminated, "exitCode")) {
      ended.exitCode = static_cast<int>(std::clamp<std::int64_t>(
          *code, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    }
    ended.signal = static_cast<int>(
        std::clamp<std::int64_t>(integerAt(terminated, "signal").value_or(0), 0, 255));
    ended.reason = text(terminated, "reason");
    ended.message = text(terminated, "message");
    ended.startedAt = timeAt(terminated, "startedAt");
    ended.finishedAt = timeAt(terminated, "finishedAt");
    container.terminated = std::move(ended);
  }
  if (const json& waiting = member(state, "waiting"); waiting.is_object()) {
    container.waiting = ContainerStatus::Waiting{text(waiting, "reason"), text(waiting, "message")};
  }
  return container;
}

// The controlling owner, when it is an AutotuneJob or a batch Job (a multi-node trial's, if that
// Job is one: Cluster::ownerOf). Annotations and labels are not read for it: anyone who may create
// Pods may write them.
void readOwner(const json& metadata, Pod& pod) {
  for (const auto& owner : member(metadata, "ownerReferences")) {
    if (member(owner, "controller") != true) {
      continue;
    }
    if (text(owner, "kind") == api::kKind) {
      pod.ownerJobName = text(owner, "name");
      pod.ownerJobUid = text(owner, "uid");
    } else if (text(owner, "kind") == "Job" && text(owner, "apiVersion") == "batch/v1") {
      pod.batchJob = text(owner, "name");
      pod.batchJobUid = text(owner, "uid");
      pod.completionIndex = text(member(metadata, "annotations"), api::kCompletionIndexAnnotation);
    }
    return;
  }
}

// What names a namespaced object in the caches: false when it has no name.
template <class Object>
bool readIdentity(const json& object, Object& into) {
  const json& metadata = object::metadataOf(object);
  into.ns = text(metadata, "namespace");
  into.name = text(metadata, "name");
  into.key = object::keyOf(object);
  into.resourceVersion = text(metadata, "resourceVersion");
  into.uid = text(metadata, "uid");
  return !into.name.empty();
}

}  // namespace

bool Pod::heldForItsResult() const {
  return std::ranges::find(finalizers, api::kTrialResultFinalizer) != finalizers.end();
}

std::optional<Pod> decodePod(const json& object) {
  const json& metadata = object::metadataOf(object);
  Pod pod;
  if (!readIdentity(object, pod)) {
    return std::nullopt;
  }
  readOwner(metadata, pod);
  const json& labels = member(metadata, "labels");
  pod.jobLabel = text(labels, api::kJobLabel);
  pod.space = text(labels, api::kSpaceLabel);
  const json& annotations = member(metadata, "annotations");
  pod.trialName = text(annotations, api::kTrialNameAnnotation);
  pod.attemptText = text(annotations, api::kAttemptAnnotation);
  pod.preemptionsText = text(annotations, api::kPreemptionsAnnotation);
  pod.wantedSince = timeAt(annotations, api::kWantedSinceAnnotation);
  pod.created = timeAt(metadata, "creationTimestamp");
  pod.deleting = member(metadata, "deletionTimestamp").is_string();
  pod.deletionTimestamp = timeAt(metadata, "deletionTimestamp");
  pod.deletionGracePeriodSeconds = integerAt(metadata, "deletionGracePeriodSeconds");
  for (const auto& finalizer : member(metadata, "finalizers")) {
    if (finalizer.is_string()) {
      pod.finalizers.push_back(finalizer.get<std::string>());
    }
  }

  const json& spec = member(object, "spec");
  pod.nodeName = text(spec, "nodeName");
  pod.gpuModel = text(member(spec, "nodeSelector"), api::kGpuProductLabel);
  if (const json& containers = member(spec, "containers");
      containers.is_array() && !containers.empty()) {
    pod.firstContainer = text(containers.front(), "name");
  }
  pod.gpus = podGpus(object);
  pod.claimedGpus = std::min(
      gpus(member(member(object::metadataOf(object), "annotations"), api::kClaimedGpusAnnotation)),
      static_cast<int>(api::kMaxGpusPerTrial));
  for (const auto& gate : member(spec, "schedulingGates")) {
    if (auto name = text(gate, "name"); !name.empty()) {
      pod.schedulingGates.push_back(std::move(name));
    }
  }

  const json& status = member(object, "status");
  pod.phase = text(status, "phase");
  pod.reason = text(status, "reason");
  pod.message = text(status, "message");
  pod.started = timeAt(status, "startTime");
  pod.scheduled = conditionOf(status, "PodScheduled");
  pod.disruption = conditionOf(status, "DisruptionTarget");
  pod.termination = conditionOf(status, "TerminationTarget");
  for (const auto& container : member(status, "containerStatuses")) {
    pod.containers.push_back(containerStatusOf(container));
  }
  return pod;
}

std::optional<Node> decodeNode(const json& object) {
  Node node;
  node.name = text(object::metadataOf(object), "name");
  if (node.name.empty()) {
    return std::nullopt;
  }
  node.resourceVersion = object::versionOf(object);
  node.gpus = gpus(member(member(member(object, "status"), "allocatable"), kGpuResource));
  node.schedulable = member(member(object, "spec"), "unschedulable") != true && isReady(object);
  node.gpuMemoryBytes = labelledMemory(object);
  node.gpuProduct = text(member(member(object, "metadata"), "labels"), api::kGpuProductLabel);
  return node;
}

namespace {

// Iterating a string or an object as if it were a list would walk something else.
const json kNoItems = json::array();

// A device of NVIDIA's DRA driver is a whole GPU when its type says so; a driver that gives no
// type publishes GPUs alone.
bool isGpu(const json& device) {
  const json& type = member(member(device, "attributes"), "type");
  return type.empty() || text(type, "string") == "gpu";
}

// When the operator last wrote the object's status, to the second, as the API server records it:
// the time of the status entry of its field manager.
std::optional<Timestamp> statusWrittenAt(const json& metadata) {
  const json& entries = member(metadata, "managedFields");
  for (const auto& entry : entries.is_array() ? entries : kNoItems) {
    if (text(entry, "manager") == api::kOperatorName && text(entry, "subresource") == "status") {
      return timeAt(entry, "time");
    }
  }
  return std::nullopt;
}

// A DRA driver's productName as GPU feature discovery labels the same GPU (nvidia.com/gpu.product):
// NVIDIA's driver says "NVIDIA A100-SXM4-40GB" where the label says "NVIDIA-A100-SXM4-40GB". Any
// character a label value cannot hold becomes a dash; the ends are trimmed to letters and digits.
std::string asGpuModelLabel(std::string_view productName) {
  constexpr std::size_t kMaxLabelValue = 63;
  const auto alphanumeric = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  std::string label;
  for (const char c : productName) {
    label += alphanumeric(c) || c == '-' || c == '_' || c == '.' ? c : '-';
  }
  const auto first = std::ranges::find_if(label, alphanumeric);
  label.erase(label.begin(), first);
  label.resize(std::min(label.size(), kMaxLabelValue));
  while (!label.empty() && !alphanumeric(label.back())) {
    label.pop_back();
  }
  return label;
}

// The node a claim's allocation is for: its node selector's one metadata.name.
std::string allocatedNode(const json& allocation) {
  for (const auto& term : member(member(allocation, "nodeSelector"), "nodeSelectorTerms")) {
    for (const auto& field : member(term, "matchFields")) {
      const json& values = member(field, "values");
      if (text(field, "key") == "metadata.name" && text(field, "operator") == "In" &&
          values.is_array() && values.size() == 1 && values.front().is_string()) {
        return values.front().get<std::string>();
      }
    }
  }
  return "";
}

}  // namespace

std::optional<DeviceSlice> decodeDeviceSlice(const json& object, std::string_view driver) {
  const json& spec = member(object, "spec");
  DeviceSlice slice;
  slice.name = text(object::metadataOf(object), "name");
  if (slice.name.empty() || text(spec, "driver") != driver) {
    return std::nullopt;
  }
  slice.resourceVersion = object::versionOf(object);
  slice.nodeName = text(spec, "nodeName");
  const json& devices = member(spec, "devices");
  for (const auto& device : devices.is_array() ? devices : kNoItems) {
    if (!device.is_object() || !isGpu(device)) {
      continue;
    }
    if (slice.gpus++ == 0) {
      slice.product =
          asGpuModelLabel(text(member(member(device, "attributes"), "productName"), "string"));
      const auto memory =
          api::Quantity::parse(text(member(member(device, "capacity"), "memory"), "value"));
      if (memory && memory->value() > 0) {
        slice.memoryBytes = memory->value();
      }
    }
  }
  return slice;
}

std::optional<DeviceClaim> decodeDeviceClaim(const json& object, std::string_view driver) {
  const json& allocation = member(member(object, "status"), "allocation");
  DeviceClaim claim;
  if (text(object::metadataOf(object), "name").empty()) {
    return std::nullopt;
  }
  claim.key = object::keyOf(object);
  claim.resourceVersion = object::versionOf(object);
  claim.nodeName = allocatedNode(allocation);
  const json& results = member(member(allocation, "devices"), "results");
  for (const auto& result : results.is_array() ? results : kNoItems) {
    claim.gpus += text(result, "driver") == driver ? 1 : 0;
  }
  return claim;
}

std::optional<CachedAutotuneJob> decodeAutotuneJob(const json& object) {
  json slim = object;
  if (auto metadata = slim.find("metadata"); metadata != slim.end() && metadata->is_object()) {
    metadata->erase("managedFields");
    if (auto annotations = metadata->find("annotations");
        annotations != metadata->end() && annotations->is_object()) {
      annotations->erase("kubectl.kubernetes.io/last-applied-configuration");
    }
  }
  const json& metadata = object::metadataOf(slim);
  CachedAutotuneJob job;
  job.key = object::keyOf(slim);
  if (text(metadata, "name").empty()) {
    return std::nullopt;
  }
  job.statusWrittenAt = statusWrittenAt(object::metadataOf(object));
  job.resourceVersion = text(metadata, "resourceVersion");
  job.generation = integerAt(metadata, "generation").value_or(0);
  job.creationTimestamp = text(metadata, "creationTimestamp");
  job.metadata = metadata;
  if (const json* owner = object::controllerOf(slim);
      owner != nullptr && text(*owner, "kind") == api::kKind) {
    job.ownerJobName = text(*owner, "name");
    job.ownerJobUid = text(*owner, "uid");
  }
  job.decoded = api::decode(slim);
  if (job.decoded) {
    job.status = std::move(job.decoded->job.status);
    job.decoded->job.status = {};
  } else if (const json& status = member(slim, "status"); status.is_object()) {
    job.status = api::decodeStatus(status).value_or(api::Status{});
  }
  return job;
}

std::optional<BatchJob> decodeBatchJob(const json& object) {
  const json& metadata = object::metadataOf(object);
  BatchJob job;
  if (!readIdentity(object, job)) {
    return std::nullopt;
  }
  job.serviceUid = text(member(metadata, "annotations"), api::kServiceUidAnnotation);
  job.jobLabel = text(member(metadata, "labels"), api::kJobLabel);
  if (const json* owner = object::controllerOf(object);
      owner != nullptr && text(*owner, "kind") == api::kKind) {
    job.ownerJobName = text(*owner, "name");
    job.ownerJobUid = text(*owner, "uid");
  }
  job.created = timeAt(metadata, "creationTimestamp");
  job.deleting = member(metadata, "deletionTimestamp").is_string();
  job.suspended = member(member(object, "spec"), "suspend") == true;
  return job;
}

std::optional<Workload> decodeWorkload(const json& object) {
  Workload workload;
  if (!readIdentity(object, workload)) {
    return std::nullopt;
  }
  if (const json* owner = object::controllerOf(object); owner != nullptr) {
    workload.ownerKind = text(*owner, "kind");
    workload.ownerName = text(*owner, "name");
    workload.ownerUid = text(*owner, "uid");
  }
  const json& status = member(object, "status");
  const auto admitted = conditionOf(status, "Admitted");
  workload.admitted = admitted && admitted->status == "True";
  if (const auto evicted = conditionOf(status, "Evicted"); evicted && evicted->status == "True") {
    workload.evictedReason = evicted->reason;
    if (!workload.admitted) {
      workload.pendingMessage = evicted->message;
    }
  }
  if (const auto reserved = conditionOf(status, "QuotaReserved");
      reserved && reserved->status == "False" && !reserved->message.empty()) {
    workload.pendingMessage = reserved->message;
  }
  return workload;
}

std::optional<LocalQueue> decodeLocalQueue(const json& object) {
  LocalQueue queue;
  if (!readIdentity(object, queue)) {
    return std::nullopt;
  }
  return queue;
}

bool beingDeleted(const CachedAutotuneJob& job) {
  return member(job.metadata, "deletionTimestamp").is_string();
}

std::vector<std::string> jobKeysOfBatchJob(const BatchJob* before, const BatchJob* after) {
  const BatchJob* job = after != nullptr ? after : before;
  if (job == nullptr || job->ownerJobName.empty()) {
    return {};
  }
  return {job->ns + "/" + job->ownerJobName};
}

namespace {

bool progressed(const CachedAutotuneJob& before, const CachedAutotuneJob& after) {
  return before.status.phase != after.status.phase ||
         before.status.message != after.status.message || before.status.best != after.status.best;
}

}  // namespace

std::vector<std::string> jobKeysOfAutotuneJob(const CachedAutotuneJob* before,
                                              const CachedAutotuneJob* after) {
  const CachedAutotuneJob* job = after != nullptr ? after : before;
  if (job == nullptr) {
    return {};
  }
  const bool appearedOrWent = before == nullptr || after == nullptr;
  std::vector<std::string> keys;
  if (appearedOrWent || before->generation != after->generation) {
    keys.push_back(job->key);
  }
  // A model's search tells its job of a new phase or best; its trial counts follow with those.
  // A tenant's job that names another as its controller changes nothing but a look.
  if (!job->ownerJobName.empty() && (appearedOrWent || progressed(*before, *after))) {
    keys.push_back(object::text(job->metadata, "namespace") + "/" + job->ownerJobName);
  }
  return keys;
}

}  // namespace autotune::controller
