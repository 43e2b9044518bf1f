#pragma once
// What the controller knows of the cluster: AutotuneJobs, their trial Pods and batch Jobs, and the
// Nodes, as the watches keep them (runtime/store.h), indexed by job and by node. Each change is
// passed on to what keeps a cluster-wide figure current as events arrive rather than recomputed
// per reconcile: the GPU ledger (gpu_slots.h), the jobs waiting for GPUs (waiting_jobs.h) and
// the jobs by phase. All of it is rebuilt from the watches after a restart. Thread-safe. A
// reconcile's decision reads it as a ClusterView (objects/cluster_view.h).

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "controller/cache/gpu_slots.h"
#include "controller/cache/node_lookups.h"
#include "controller/cache/waiting_jobs.h"
#include "controller/objects/cluster_view.h"
#include "controller/objects/measurements.h"
#include "controller/objects/objects.h"
#include "runtime/store.h"

namespace autotune::controller {

using AutotuneJobStore = runtime::Indexed<CachedAutotuneJob>;
using PodStore = runtime::Indexed<Pod>;
using BatchJobStore = runtime::Indexed<BatchJob>;
using NodeStore = runtime::Indexed<Node>;
using WorkloadStore = runtime::Indexed<Workload>;
using LocalQueueStore = runtime::Indexed<LocalQueue>;
using MeasurementStore = runtime::Indexed<MeasurementObject>;
using DeviceSliceStore = runtime::Indexed<DeviceSlice>;
using DeviceClaimStore = runtime::Indexed<DeviceClaim>;

class Cluster final : public ClusterView {
 public:
  // `nodeSelector`: the label selector of the Nodes watched (empty: all), named where no node
  // can take a trial.
  explicit Cluster(MeasurementPolicy measurementPolicy = {}, std::string nodeSelector = "");
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  Cluster(Cluster&&) = delete;
  Cluster& operator=(Cluster&&) = delete;
  ~Cluster() override = default;

  // Stores for the watches, each of one namespace ("" for all), read by this cluster view.
  // Call before the watches start.
  AutotuneJobStore& addAutotuneJobs(const std::string& ns);
  PodStore& addPods(const std::string& ns);
  BatchJobStore& addBatchJobs(const std::string& ns);
  NodeStore& nodes() { return *nodes_; }
  // Kueue's Workloads and LocalQueues of a namespace ("" for all), with --kueue only.
  WorkloadStore& addWorkloads(const std::string& ns);
  LocalQueueStore& addLocalQueues(const std::string& ns);
  // The measurement ConfigMaps of a namespace ("" for all): measurements.h.
  MeasurementStore& addMeasurements(const std::string& ns);
  // The ResourceSlices and ResourceClaims (of every namespace) of the DRA driver whose devices
  // are GPUs, with --dra-driver only: the GPUs of nodes that advertise no nvidia.com/gpu.
  DeviceSliceStore& addDeviceSlices(const std::string& driver);
  DeviceClaimStore& addDeviceClaims(const std::string& driver);

  Shared<CachedAutotuneJob> job(const std::string& key) const override;
  // Every AutotuneJob the watches hold.
  std::vector<Shared<CachedAutotuneJob>> jobs() const;
  Shared<Pod> pod(const std::string& key) const;
  Shared<BatchJob> batchJob(const std::string& key) const override;
  std::vector<Shared<Pod>> podsLabelled(const std::string& ns,
                                        const std::string& jobLabel) const override;
  Shared<Workload> workloadOf(const std::string& ns, std::string_view kind, const std::string& name,
                              const std::string& uid) const override;
  Shared<Node> node(const std::string& name) const override { return nodes_->get(name); }
  // The measurement ConfigMap of that name, if the cache holds one.
  Shared<MeasurementObject> measurement(const std::string& ns, const std::string& name) const;
  // The measurement ConfigMaps of a namespace the operator deletes to keep within its bound,
  // having just kept `justKept` (beyondBound), taken out of the cache as they are claimed: a
  // reconcile of another job of the namespace, at once or before the watch reports the deletes,
  // does not claim them again (each a DELETE answered 404).
  std::vector<Shared<MeasurementObject>> claimMeasurementsBeyondBound(const std::string& ns,
                                                                      const JustKept& justKept);
  // A claimed measurement whose delete failed: back in the cache, to be claimed again.
  void measurementNotDeleted(Shared<MeasurementObject> measurement);
  const MeasurementPolicy& measurementPolicy() const { return measurementPolicy_; }
  std::vector<Shared<MeasurementObject>> measurementsBy(const std::string& ns,
                                                        const std::string& jobUid) const override;
  std::vector<Shared<MeasurementObject>> measurementsIn(
      const std::string& ns, const std::string& environment) const override;
  const MeasurementLimits& measurementLimits() const override { return measurementPolicy_.limits; }
  QueueState localQueue(const std::string& ns, const std::string& name) const override;
  MissingNodes missingNodes(const NodeNames& named, Timestamp now) const override;
  // What a direct GET of a node the cache lacks answered.
  void nodeLookedUp(const std::string& name, bool found, Timestamp at);
  // The AutotuneJob whose trial the Pod is: its controller, or the controller of the batch Job
  // the cache holds under the Pod's controller's name and UID (a multi-node trial's). Nothing
  // for any other Pod, whatever its labels and annotations say: any tenant can write those.
  std::optional<TrialOwner> ownerOf(const Pod& pod) const override;
  // GPUs bound Pods hold, and those unbound trial Pods of jobs the cache holds and that have not
  // ended reserve (GpuLedger): a Pod that merely carries the operator's labels reserves none.
  GpuCapacity capacity() const override;
  std::optional<GpuModel> publishedGpu(const std::string& node) const override {
    return gpus_.publishedGpu(node);
  }

  // Slots of `gpusPerTrial` GPUs that jobs created before `job` are waiting for: first come,
  // first served.
  int slotsHeldForOlderJobs(const CachedAutotuneJob& job, int gpusPerTrial) const override;
  // The job waits for `gpus` GPUs, or none (WaitingJobs).
  void jobWaits(const CachedAutotuneJob& job, int gpus);
  // Whether no node watched can hold a trial of the job: a node that comes to offer more GPUs
  // wakes it (WaitingJobs::waitingForNode).
  void jobWaitsForNode(const std::string& key, bool waits);
  // What a Node's change concerns: the jobs with Pods on it, and when it offers more GPUs than
  // before, the waiting jobs they may go to (WaitingJobs::takers) and those no node could hold;
  // nothing when nothing a job reads of the Node changed (a heartbeat).
  std::vector<std::string> jobsConcernedBy(const Node* before, const Node* after) const;
  // What a trial Pod's change concerns: its job.
  std::vector<std::string> jobsConcernedByPod(const Pod* before, const Pod* after) const;
  // Who a Pod's change wakes at once: when the Pod let go of GPUs (it ended or went), the waiting
  // jobs they may go to, oldest first (WaitingJobs::takers), so that freed GPUs are taken without
  // waiting for the Pod watch's batch.
  std::vector<std::string> jobsWokenByPod(const Pod* before, const Pod* after) const;
  // A slice of more GPUs than before, and a claim that holds fewer, free GPUs as a Node and a Pod
  // do: the waiting jobs they may go to.
  std::vector<std::string> jobsWokenBySlice(const DeviceSlice* before,
                                            const DeviceSlice* after) const;
  std::vector<std::string> jobsWokenByClaim(const DeviceClaim* before,
                                            const DeviceClaim* after) const;
  // What a Workload's change concerns: the job whose trial's run owns it, unless nothing a trial
  // reads of it changed.
  std::vector<std::string> jobsConcernedByWorkload(const Workload* before,
                                                   const Workload* after) const;
  // What a LocalQueue's coming or going concerns: the jobs of its namespace that name it.
  std::vector<std::string> jobsConcernedByLocalQueue(const LocalQueue* before,
                                                     const LocalQueue* after) const;
  // Jobs by status.phase (Pending while they have none).
  std::map<std::string, std::int64_t, std::less<>> jobsByPhase() const;

  // What the controller's own writes returned, stored at once so that the next reconcile reads
  // them even before the watch delivers them.
  void wroteStatus(const nlohmann::json& object);
  void wrotePod(const nlohmann::json& object);
  void wroteBatchJob(const nlohmann::json& object);
  // A Pod this process deleted, marked as going, unless the watch has already said it is gone.
  void deletingPod(const Pod& pod);
  // Whether a foreign Pod (Snapshot::foreignPods) of this UID is new to this process: each is told
  // of once. The kRememberedForeignPods noticed most recently are remembered.
  bool noticeForeignPod(const std::string& uid);

 private:
  void jobChanged(const CachedAutotuneJob* before, const CachedAutotuneJob* after);
  // Whether the unbound Pod of this key is a trial of a job that holds GPUs for it.
  bool reservesGpus(const std::string& podKey) const;

  std::vector<std::pair<std::string, std::unique_ptr<AutotuneJobStore>>> jobs_;
  std::vector<std::pair<std::string, std::unique_ptr<PodStore>>> pods_;
  std::vector<std::pair<std::string, std::unique_ptr<BatchJobStore>>> batchJobs_;
  std::vector<std::pair<std::string, std::unique_ptr<WorkloadStore>>> workloads_;
  std::vector<std::pair<std::string, std::unique_ptr<LocalQueueStore>>> localQueues_;
  std::vector<std::pair<std::string, std::unique_ptr<MeasurementStore>>> measurements_;
  std::unique_ptr<NodeStore> nodes_;
  std::unique_ptr<DeviceSliceStore> slices_;
  std::unique_ptr<DeviceClaimStore> claims_;
  MeasurementPolicy measurementPolicy_;
  std::string nodeSelector_;
  GpuLedger gpus_;
  WaitingJobs waiting_;
  NodeLookups nodeLookups_;

  mutable std::mutex mutex_;
  std::mutex claimingMeasurements_;  // one claim at a time: no measurement is claimed twice
  std::map<std::string, std::string, std::less<>> phaseOf_;  // job key -> phase
  std::map<std::string, std::int64_t, std::less<>> phaseCounts_;
  std::set<std::string, std::less<>> foreignPods_;  // UIDs, as noticed
  std::deque<std::string> foreignOrder_;
};

inline constexpr std::size_t kRememberedForeignPods = 4096;

}  // namespace autotune::controller
