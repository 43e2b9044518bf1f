#pragma once
// What the controller knows of the cluster: AutotuneJobs, their trial Pods and the Nodes, as the
// watches keep them (runtime/store.h), indexed by job and by node, with the cluster-wide figures
// every reconcile needs (GPU slots by node, jobs by phase, jobs waiting for GPUs in creation
// order) kept current as events arrive rather than recomputed per reconcile. Thread-safe.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "controller/gpu_slots.h"
#include "controller/objects.h"
#include "runtime/store.h"

namespace autotune::controller {

// A node that trial Pods are bound to and the Node cache lacks is gone only once a direct GET has
// answered 404 throughout this long; meanwhile it is looked up again at most this often.
inline constexpr std::chrono::seconds kNodeGoneGrace{30};
inline constexpr std::chrono::seconds kNodeRecheck{5};

// Nodes that trial Pods are bound to and the Node cache lacks.
struct MissingNodes {
  NodeNames gone;      // 404 throughout kNodeGoneGrace: their Pods are lost
  NodeNames awaited;   // the others: their Pods run on until the API server says more
  NodeNames toLookUp;  // of those, the ones not looked up within kNodeRecheck
};

using JobStore = runtime::Indexed<Job>;
using PodStore = runtime::Indexed<Pod>;
using NodeStore = runtime::Indexed<Node>;

class Cluster {
 public:
  Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;
  Cluster(Cluster&&) = delete;
  Cluster& operator=(Cluster&&) = delete;
  ~Cluster() = default;

  // Stores for the watches, each of one namespace ("" for all), read by this cluster view.
  // Call before the watches start.
  JobStore& addJobs(const std::string& ns);
  PodStore& addPods(const std::string& ns);
  NodeStore& nodes() { return *nodes_; }

  runtime::Shared<Job> job(const std::string& key) const;
  runtime::Shared<Pod> pod(const std::string& key) const;
  // The Pods labelled for the job of this name in its namespace, whoever owns them.
  std::vector<runtime::Shared<Pod>> podsLabelled(const std::string& ns,
                                                 const std::string& jobLabel) const;
  // Of the nodes `named`, those the Node cache lacks. The cache lags behind the cluster: a Node
  // added while the watch backs off, or deleted and registered again, looks gone for a while, so
  // a node is gone only on the API server's word (nodeLookedUp), and only after a grace period.
  MissingNodes missingNodes(const NodeNames& named, Timestamp now) const;
  // What a direct GET of a node the cache lacks answered.
  void nodeLookedUp(const std::string& name, bool found, Timestamp at);
  GpuCapacity capacity() const { return gpus_.capacity(); }

  // Slots of `gpusPerTrial` GPUs that jobs created before `job` are waiting for: first come,
  // first served.
  int slotsHeldForOlderJobs(const Job& job, int gpusPerTrial) const;
  // What a Node's change concerns: the jobs waiting for GPUs and those with Pods on it, unless
  // nothing a job reads of the Node changed (a heartbeat).
  std::vector<std::string> jobsConcernedBy(const Node* before, const Node* after) const;
  // Jobs by status.phase (Pending while they have none).
  std::map<std::string, std::int64_t, std::less<>> jobsByPhase() const;
  // When this process last wrote the job's status, if it has since it started.
  std::optional<Timestamp> statusWrittenAt(const std::string& key) const;

  // What the controller's own writes returned, stored at once so that the next reconcile reads
  // them even before the watch delivers them.
  void wroteStatus(const nlohmann::json& object, Timestamp at);
  void wrotePod(const nlohmann::json& object);
  void deletingPod(const Pod& pod);
  // A multi-node trial's batch Job this process created ("namespace/name"), whose Pods the Job
  // controller makes a moment later: until then the trial is pending, not gone. Forgotten once
  // deleted, or a day on.
  void createdTrialJob(const std::string& key, Timestamp at);
  void deletedTrialJob(const std::string& key);
  std::optional<Timestamp> trialJobCreated(const std::string& key) const;

 private:
  void jobChanged(const Job* before, const Job* after);
  void podChanged(const Pod* before, const Pod* after);
  void nodeChanged(const Node* before, const Node* after);

  std::vector<std::pair<std::string, std::unique_ptr<JobStore>>> jobs_;
  std::vector<std::pair<std::string, std::unique_ptr<PodStore>>> pods_;
  std::unique_ptr<NodeStore> nodes_;
  GpuLedger gpus_;

  mutable std::mutex mutex_;
  std::map<std::string, std::string, std::less<>> phaseOf_;  // job key -> phase
  std::map<std::string, std::int64_t, std::less<>> phaseCounts_;
  // (creationTimestamp, key) -> GPUs wanted, of jobs waiting for GPUs
  std::map<std::tuple<std::string, std::string>, int> waiting_;
  std::map<std::string, std::tuple<std::string, std::string>, std::less<>> waitingKey_;
  std::map<std::string, Timestamp, std::less<>> statusWrittenAt_;
  struct NodeLookup {
    Timestamp at;
    std::optional<Timestamp> absentSince;  // the first of the 404s since it was last found
  };
  std::map<std::string, NodeLookup, std::less<>> nodeLookups_;  // of nodes the cache lacks
  std::map<std::string, Timestamp, std::less<>> trialJobsCreated_;
};

// The job a trial Pod belongs to ("namespace/name" of its controlling AutotuneJob), if any.
std::vector<std::string> jobKeysOfPod(const Pod* before, const Pod* after);

// The job itself, unless only its status changed: the status is the reconcile's own output, and
// reconciling on it would only repeat the reconcile that wrote it.
std::vector<std::string> jobKeysOfJob(const Job* before, const Job* after);

}  // namespace autotune::controller
