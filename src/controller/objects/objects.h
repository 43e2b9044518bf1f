#pragma once
// The cluster's objects as the controller reads them: each decoded once, when the watch delivers
// it, into the fields the controller uses, so that no reconcile reads raw JSON or copies it.
// Decoding never fails on a field of an unexpected type: what the API server sends is input, and
// a field that cannot be read reads as absent.

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "api/codec.h"
#include "api/job.h"
#include "object/time.h"

namespace autotune::controller {

// Wall-clock time, as the API server stamps objects.
using Timestamp = std::chrono::system_clock::time_point;

// An object as the cache holds it: read-only and shared, never copied (runtime::Shared).
template <class T>
using Shared = std::shared_ptr<const T>;

// What a condition of a Pod's status says.
struct PodCondition {
  std::string status;  // True, False or Unknown
  std::string reason;
  std::string message;
  std::optional<Timestamp> since;  // lastTransitionTime
};

// status.containerStatuses[], as far as a trial's exit is concerned.
struct ContainerStatus {
  struct Terminated {
    std::optional<int> exitCode;
    int signal = 0;
    std::string reason;
    std::string message;  // the termination message: a trial's metrics file, or its log tail
    std::optional<Timestamp> startedAt;
    std::optional<Timestamp> finishedAt;
  };
  struct Waiting {
    std::string reason;
    std::string message;
  };

  std::string name;
  std::string imageID;  // the image the container runs, by digest where the runtime says
  std::optional<Terminated> terminated;
  std::optional<Waiting> waiting;
};

struct Pod {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string resourceVersion;
  std::string uid;
  // The AutotuneJob that controls it directly, if one does. Cluster::ownerOf says whose trial it
  // is, through a multi-node trial's batch Job too.
  std::string ownerJobName;
  std::string ownerJobUid;
  // The batch Job that controls it, if one does: the Pod may be one node of a multi-node trial.
  std::string batchJob;
  std::string batchJobUid;
  std::string completionIndex;           // of that Job: "0" is the trial's rank 0
  std::string jobLabel;                  // labels[autotune.io/job]
  std::string space;                     // labels[autotune.io/space]
  std::string trialName;                 // annotations[autotune.io/trial-name]
  std::string attemptText;               // annotations[autotune.io/attempt]
  std::string preemptionsText;           // annotations[autotune.io/preemptions]
  std::optional<Timestamp> wantedSince;  // annotations[autotune.io/wanted-since]
  std::optional<Timestamp> created;
  bool deleting = false;  // metadata.deletionTimestamp is set
  std::optional<Timestamp> deletionTimestamp;
  std::optional<std::int64_t> deletionGracePeriodSeconds;
  std::vector<std::string> finalizers;  // metadata.finalizers

  std::string nodeName;                      // spec.nodeName
  std::string firstContainer;                // spec.containers[0].name
  std::vector<std::string> schedulingGates;  // spec.schedulingGates[].name
  int gpus = 0;                              // nvidia.com/gpu, as the scheduler counts the Pod
  // api::kClaimedGpusAnnotation: what a trial whose GPUs come from claims asks for per node.
  int claimedGpus = 0;
  // spec.nodeSelector[nvidia.com/gpu.product]: the one GPU model it may run on, if it selects one.
  std::string gpuModel;

  std::string phase;  // status.phase
  std::string reason;
  std::string message;
  std::optional<Timestamp> started;  // status.startTime
  std::optional<PodCondition> scheduled;
  std::optional<PodCondition> disruption;  // DisruptionTarget
  // TerminationTarget: what Kueue sets on a Pod it stops (evicts or preempts) before deleting it.
  std::optional<PodCondition> termination;
  std::vector<ContainerStatus> containers;

  // Ended by itself: Succeeded or Failed. Its GPUs are free again.
  bool finished() const { return phase == "Succeeded" || phase == "Failed"; }
  // Kept by the API server until the operator takes api::kTrialResultFinalizer off.
  bool heldForItsResult() const;
};

struct Node {
  std::string name;
  std::string resourceVersion;
  int gpus = 0;                                // status.allocatable nvidia.com/gpu
  bool schedulable = false;                    // Ready and not spec.unschedulable
  std::optional<std::int64_t> gpuMemoryBytes;  // per GPU, from the nvidia.com/gpu.memory label
  std::string gpuProduct;                      // the nvidia.com/gpu.product label

  // Whether jobs would see the two alike: a heartbeat changes only what is not read here.
  bool sameForJobs(const Node& other) const {
    return gpus == other.gpus && schedulable == other.schedulable &&
           gpuMemoryBytes == other.gpuMemoryBytes && gpuProduct == other.gpuProduct;
  }
};

// An AutotuneJob as the cache holds it.
struct CachedAutotuneJob {
  std::string key;  // namespace/name
  std::string resourceVersion;
  std::int64_t generation = 0;
  std::string creationTimestamp;
  // When the operator last wrote its status, to the second (the API server's managedFields), if
  // it ever has: what paces the writes that only move live figures, across restarts and leaders.
  std::optional<Timestamp> statusWrittenAt;
  // The AutotuneJob that controls it, if one does: it is then a GPU model's search of that job
  // (models.h), provided the UID is that job's.
  std::string ownerJobName;
  std::string ownerJobUid;
  // Without managedFields and the last-applied annotation, which nothing here reads.
  nlohmann::json metadata;
  // The spec decoded and validated (with `metadata`, and an empty status: the status is
  // `status`), or why it is not valid.
  tl::expected<api::Decoded, api::FieldErrors> decoded;
  api::Status status;  // as written; empty when it cannot be read
};

// A multi-node trial's batch/v1 Job, as far as telling whose it is and since when it exists.
struct BatchJob {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string resourceVersion;
  std::string uid;
  std::string serviceUid;  // annotations[autotune.io/service-uid]: its Service's
  std::string jobLabel;    // labels[autotune.io/job]
  // The AutotuneJob that controls it, if one does.
  std::string ownerJobName;
  std::string ownerJobUid;
  std::optional<Timestamp> created;
  bool deleting = false;   // metadata.deletionTimestamp is set
  bool suspended = false;  // spec.suspend: a queueing system holds it
};

// A Kueue Workload (kueue.x-k8s.io/v1beta2), as far as a trial waiting for admission needs it:
// Kueue makes one for each trial Pod (its `pod` integration) or multi-node trial's batch Job
// (`batch/job`), owned by it.
struct Workload {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string resourceVersion;
  std::string uid;
  std::string ownerKind;  // the controlling owner: Pod, or Job
  std::string ownerName;
  std::string ownerUid;
  bool admitted = false;  // Admitted=True: its quota is reserved and its checks passed
  // Why it is not admitted: QuotaReserved=False's message (e.g. "couldn't assign flavors to pod
  // set main: insufficient quota for nvidia.com/gpu ..."), or Evicted's.
  std::string pendingMessage;
  // Why Kueue evicted it, while it is evicted: the Evicted condition's reason (Preempted,
  // PodsReadyTimeout, AdmissionCheck, Deactivated, ...).
  std::string evictedReason;

  // Whether a trial waiting for it would read the two alike: only its resourceVersion differs.
  bool sameForTrials(const Workload& other) const {
    return admitted == other.admitted && pendingMessage == other.pendingMessage &&
           evictedReason == other.evictedReason && ownerUid == other.ownerUid;
  }
};

// A Kueue LocalQueue: that it exists is all the controller reads.
struct LocalQueue {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string resourceVersion;
  std::string uid;
};

// The names of the cluster's Nodes.
using NodeNames = std::set<std::string, std::less<>>;

// A node that trial Pods are bound to and the Node cache lacks is gone once a GET has answered 404
// throughout kNodeGoneGrace; meanwhile it is looked up again at most every kNodeRecheck
// (node_lookups.h).
inline constexpr std::chrono::seconds kNodeGoneGrace{30};
inline constexpr std::chrono::seconds kNodeRecheck{5};
struct MissingNodes {
  NodeNames gone;      // 404 throughout kNodeGoneGrace: their Pods are lost
  NodeNames awaited;   // the others: their Pods run on until the API server says more
  NodeNames toLookUp;  // of those, the ones not looked up within kNodeRecheck
};

// A DRA driver's ResourceSlice (resource.k8s.io/v1), as far as counting a node's GPUs: its
// devices of type gpu (or of no type), on the node it names; the driver's devices on no one node
// are not counted.
struct DeviceSlice {
  std::string name;
  std::string resourceVersion;
  std::string nodeName;
  int gpus = 0;
  std::string product;  // the first GPU's productName attribute, as a kGpuProductLabel value
  std::optional<std::int64_t> memoryBytes;  // the first GPU's memory capacity

  bool operator==(const DeviceSlice&) const = default;
};

// A ResourceClaim's devices of the GPU driver, on the node its allocation names: the GPUs it
// holds there until it is deallocated (none while it is not allocated).
struct DeviceClaim {
  std::string key;  // namespace/name
  std::string resourceVersion;
  std::string nodeName;
  int gpus = 0;

  bool operator==(const DeviceClaim&) const = default;
};

// The AutotuneJob whose trial a Pod is.
struct TrialOwner {
  std::string name;
  std::string uid;
};

// What Kueue says of a job's queue, when the operator watches Kueue's objects (--kueue).
enum class QueueState { kNotWatched, kFound, kMissing };

std::optional<Pod> decodePod(const nlohmann::json& object);
std::optional<Node> decodeNode(const nlohmann::json& object);
std::optional<CachedAutotuneJob> decodeAutotuneJob(const nlohmann::json& object);
std::optional<BatchJob> decodeBatchJob(const nlohmann::json& object);
std::optional<Workload> decodeWorkload(const nlohmann::json& object);
std::optional<LocalQueue> decodeLocalQueue(const nlohmann::json& object);
// Nothing for another driver's slice, or an object without a name.
std::optional<DeviceSlice> decodeDeviceSlice(const nlohmann::json& object, std::string_view driver);
std::optional<DeviceClaim> decodeDeviceClaim(const nlohmann::json& object, std::string_view driver);

using object::parseTime;

// RFC 3339 in UTC: whole seconds without a fraction (as metav1.Time), others with milliseconds.
inline std::string formatTime(Timestamp time) {
  return object::formatTime(time, object::Fraction::kMillisecondsUnlessWhole);
}

// Whether its deletion has begun (metadata.deletionTimestamp): garbage collection is deleting
// what it owns (foreground deletion), or a finalizer of someone else's holds it.
bool beingDeleted(const CachedAutotuneJob& job);

// The job a trial's batch Job belongs to, if any.
std::vector<std::string> jobKeysOfBatchJob(const BatchJob* before, const BatchJob* after);

// The job itself, unless only its status changed: the status is the reconcile's own output, and
// reconciling on it would only repeat the reconcile that wrote it.
std::vector<std::string> jobKeysOfAutotuneJob(const CachedAutotuneJob* before,
                                              const CachedAutotuneJob* after);

}  // namespace autotune::controller
