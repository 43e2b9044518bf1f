#pragma once
// What a reconcile reads of the cluster: the one way the decision (observe.h) sees the cache,
// which cluster.h keeps and implements. Reading it never talks to the API server.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "controller/objects/gpu_capacity.h"
#include "controller/objects/measurements.h"
#include "controller/objects/objects.h"

namespace autotune::controller {

class ClusterView {
 public:
  ClusterView() = default;
  ClusterView(const ClusterView&) = delete;
  ClusterView& operator=(const ClusterView&) = delete;
  ClusterView(ClusterView&&) = delete;
  ClusterView& operator=(ClusterView&&) = delete;
  virtual ~ClusterView() = default;

  virtual Shared<CachedAutotuneJob> job(const std::string& key) const = 0;
  // The Pods labelled for the job of this name in its namespace, whoever owns them.
  virtual std::vector<Shared<Pod>> podsLabelled(const std::string& ns,
                                                const std::string& jobLabel) const = 0;
  // The AutotuneJob whose trial the Pod is, by its owners alone: labels and annotations prove
  // nothing, since any tenant can write them.
  virtual std::optional<TrialOwner> ownerOf(const Pod& pod) const = 0;
  virtual Shared<BatchJob> batchJob(const std::string& key) const = 0;
  // The Workload Kueue made for a trial's run (`kind` Pod or Job, its name and UID), if any.
  virtual Shared<Workload> workloadOf(const std::string& ns, std::string_view kind,
                                      const std::string& name, const std::string& uid) const = 0;
  virtual Shared<Node> node(const std::string& name) const = 0;
  // Of the nodes `named`, those the Node cache lacks, and what the API server said of them.
  virtual MissingNodes missingNodes(const NodeNames& named, Timestamp now) const = 0;
  // Whether the LocalQueue exists, or that Kueue's objects are not watched in that namespace.
  virtual QueueState localQueue(const std::string& ns, const std::string& name) const = 0;
  virtual GpuCapacity capacity() const = 0;
  // What a DRA driver's slices on the node publish of its GPUs, if any (GpuModel).
  virtual std::optional<GpuModel> publishedGpu(const std::string& node) const = 0;
  // Slots of `gpusPerTrial` GPUs that jobs created before `job` are waiting for.
  virtual int slotsHeldForOlderJobs(const CachedAutotuneJob& job, int gpusPerTrial) const = 0;
  // The kept measurements (measurements.h) the job with this UID made in the namespace, and those
  // of the namespace labelled for the environment, a job's trials' identity less its config.
  virtual std::vector<Shared<MeasurementObject>> measurementsBy(
      const std::string& ns, const std::string& jobUid) const = 0;
  virtual std::vector<Shared<MeasurementObject>> measurementsIn(
      const std::string& ns, const std::string& environment) const = 0;
  virtual const MeasurementLimits& measurementLimits() const = 0;
};

}  // namespace autotune::controller
