#include "controller/cache/cluster.h"

#include <algorithm>
#include <memory>
#include <set>
#include <utility>

#include "api/job.h"
#include "object/read.h"

namespace autotune::controller {
namespace {

constexpr std::string_view kByJobLabel = "job";
constexpr std::string_view kByNode = "node";
constexpr std::string_view kByOwner = "owner";
constexpr std::string_view kByMeasuringJob = "measuring-job";
constexpr std::string_view kByNamespace = "namespace";
constexpr std::string_view kByEnvironment = "environment";  // namespace/environment

std::string ownerKey(std::string_view kind, const std::string& name) {
  return std::string(kind) + "/" + name;
}

std::string labelled(const std::string& ns, const std::string& jobLabel) {
  return ns + "/" + jobLabel;
}

std::string phaseOf(const CachedAutotuneJob& job) {
  return std::string(api::toString(job.status.phase));
}

// A store of objects found by their own key and versioned by their resourceVersion.
template <typename Object>
std::unique_ptr<runtime::Indexed<Object>> storeOf(
    typename runtime::Indexed<Object>::Decode decode) {
  return std::make_unique<runtime::Indexed<Object>>(
      std::move(decode), [](const Object& object) { return object.key; },
      [](const Object& object) { return object.resourceVersion; });
}

// The store of a namespace: the one for it, or the one for every namespace.
template <class Store>
Store* storeFor(const std::vector<std::pair<std::string, std::unique_ptr<Store>>>& stores,
                const std::string& ns) {
  for (const auto& [watched, store] : stores) {
    if (watched.empty() || watched == ns) {
      return store.get();
    }
  }
  return nullptr;
}

// What a write returned, into the store of its namespace at once, ahead of its watch event.
template <class Object>
void putWritten(
    const std::vector<std::pair<std::string, std::unique_ptr<runtime::Indexed<Object>>>>& stores,
    const std::string& ns, Object written) {
  if (auto* store = storeFor(stores, ns)) {
    store->put(std::make_shared<const Object>(std::move(written)));
  }
}

}  // namespace

Cluster::Cluster(MeasurementPolicy measurementPolicy, std::string nodeSelector)
    : nodes_(std::make_unique<NodeStore>(
          decodeNode, [](const Node& node) { return node.name; },
          [](const Node& node) { return node.resourceVersion; })),
      measurementPolicy_(std::move(measurementPolicy)),
      nodeSelector_(std::move(nodeSelector)) {
  nodes_->listen([this](const Node* before, const Node* after) {
    if (after == nullptr) {
      gpus_.removeNode(before->name);
      return;
    }
    gpus_.setNode(*after);
    nodeLookups_.cached(after->name);  // the watch caught up
  });
}

AutotuneJobStore& Cluster::addAutotuneJobs(const std::string& ns) {
  auto store = storeOf<CachedAutotuneJob>(decodeAutotuneJob);
  store->listen([this](const CachedAutotuneJob* before, const CachedAutotuneJob* after) {
    jobChanged(before, after);
  });
  jobs_.emplace_back(ns, std::move(store));
  return *jobs_.back().second;
}

PodStore& Cluster::addPods(const std::string& ns) {
  auto store = storeOf<Pod>(decodePod);
  store->addIndex(std::string(kByJobLabel), [](const Pod& pod) {
    return pod.jobLabel.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>{labelled(pod.ns, pod.jobLabel)};
  });
  store->addIndex(std::string(kByNode), [](const Pod& pod) {
    return pod.nodeName.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>{pod.nodeName};
  });
  store->listen([this](const Pod* before, const Pod* after) {
    if (after == nullptr) {
      gpus_.removePod(before->key);
    } else {
      gpus_.setPod(*after);
    }
  });
  pods_.emplace_back(ns, std::move(store));
  return *pods_.back().second;
}

BatchJobStore& Cluster::addBatchJobs(const std::string& ns) {
  batchJobs_.emplace_back(ns, storeOf<BatchJob>(decodeBatchJob));
  return *batchJobs_.back().second;
}

WorkloadStore& Cluster::addWorkloads(const std::string& ns) {
  auto store = storeOf<Workload>(decodeWorkload);
  store->addIndex(std::string(kByOwner), [](const Workload& workload) {
    return workload.ownerName.empty()
               ? std::vector<std::string>{}
               : std::vector<std::string>{ownerKey(workload.ownerKind, workload.ownerName)};
  });
  workloads_.emplace_back(ns, std::move(store));
  return *workloads_.back().second;
}

LocalQueueStore& Cluster::addLocalQueues(const std::string& ns) {
  localQueues_.emplace_back(ns, storeOf<LocalQueue>(decodeLocalQueue));
  return *localQueues_.back().second;
}

MeasurementStore& Cluster::addMeasurements(const std::string& ns) {
  auto store =
      storeOf<MeasurementObject>([seal = measurementPolicy_.seal](const nlohmann::json& object) {
        return decodeMeasurementObject(object, seal);
      });
  store->addIndex(std::string(kByMeasuringJob), [](const MeasurementObject& kept) {
    return kept.measuredByUid.empty() ? std::vector<std::string>{}
                                      : std::vector<std::string>{kept.measuredByUid};
  });
  store->addIndex(std::string(kByNamespace),
                  [](const MeasurementObject& kept) { return std::vector<std::string>{kept.ns}; });
  store->addIndex(std::string(kByEnvironment), [](const MeasurementObject& kept) {
    return kept.environment.empty() ? std::vector<std::string>{}
                                    : std::vector<std::string>{kept.ns + "/" + kept.environment};
  });
  measurements_.emplace_back(ns, std::move(store));
  return *measurements_.back().second;
}

Shared<CachedAutotuneJob> Cluster::job(const std::string& key) const {
  const std::string ns = key.substr(0, key.find('/'));
  const auto* store = storeFor(jobs_, ns);
  return store == nullptr ? nullptr : store->get(key);
}

std::vector<Shared<CachedAutotuneJob>> Cluster::jobs() const {
  std::vector<Shared<CachedAutotuneJob>> all;
  for (const auto& [ns, store] : jobs_) {
    std::ranges::move(store->list(), std::back_inserter(all));
  }
  return all;
}

Shared<Pod> Cluster::pod(const std::string& key) const {
  const auto* store = storeFor(pods_, key.substr(0, key.find('/')));
  return store == nullptr ? nullptr : store->get(key);
}

Shared<BatchJob> Cluster::batchJob(const std::string& key) const {
  const auto* store = storeFor(batchJobs_, key.substr(0, key.find('/')));
  return store == nullptr ? nullptr : store->get(key);
}

std::optional<TrialOwner> Cluster::ownerOf(const Pod& pod) const {
  if (!pod.ownerJobUid.empty()) {
    return TrialOwner{pod.ownerJobName, pod.ownerJobUid};
  }
  if (pod.batchJob.empty()) {
    return std::nullopt;
  }
  const auto job = batchJob(pod.ns + "/" + pod.batchJob);
  if (!job || job->uid != pod.batchJobUid || job->ownerJobUid.empty()) {
    return std::nullopt;
  }
  return TrialOwner{job->ownerJobName, job->ownerJobUid};
}

GpuCapacity Cluster::capacity() const {
  GpuCapacity capacity =
      gpus_.capacity([this](const std::string& podKey) { return reservesGpus(podKey); });
  capacity.nodeSelector = nodeSelector_;
  return capacity;
}

bool Cluster::reservesGpus(const std::string& podKey) const {
  const auto pod = this->pod(podKey);
  const auto owner = pod ? ownerOf(*pod) : std::nullopt;
  if (!owner) {
    return false;
  }
  const auto job = this->job(pod->ns + "/" + owner->name);
  return job && object::text(job->metadata, "uid") == owner->uid &&
         !api::hasEnded(job->status.phase);
}

std::vector<Shared<Pod>> Cluster::podsLabelled(const std::string& ns,
                                               const std::string& jobLabel) const {
  const auto* store = storeFor(pods_, ns);
  if (store == nullptr) {
    return {};
  }
  return store->byIndex(std::string(kByJobLabel), labelled(ns, jobLabel));
}

Shared<Workload> Cluster::workloadOf(const std::string& ns, std::string_view kind,
                                     const std::string& name, const std::string& uid) const {
  const auto* store = storeFor(workloads_, ns);
  if (store == nullptr) {
    return nullptr;
  }
  for (auto& workload : store->byIndex(std::string(kByOwner), ownerKey(kind, name))) {
    if (workload->ns == ns && (uid.empty() || workload->ownerUid == uid)) {
      return workload;
    }
  }
  return nullptr;
}

Shared<MeasurementObject> Cluster::measurement(const std::string& ns,
                                               const std::string& name) const {
  const auto* store = storeFor(measurements_, ns);
  return store == nullptr ? nullptr : store->get(ns + "/" + name);
}

std::vector<Shared<MeasurementObject>> Cluster::claimMeasurementsBeyondBound(
    const std::string& ns, const JustKept& justKept) {
  auto* store = storeFor(measurements_, ns);
  if (store == nullptr) {
    return {};
  }
  const std::scoped_lock claiming(claimingMeasurements_);
  auto claimed = beyondBound(store->byIndex(std::string(kByNamespace), ns),
                             measurementPolicy_.limits, justKept);
  for (const auto& measurement : claimed) {
    store->remove(measurement->key);
  }
  return claimed;
}

void Cluster::measurementNotDeleted(Shared<MeasurementObject> measurement) {
  if (auto* store = storeFor(measurements_, measurement->ns)) {
    store->put(std::move(measurement));
  }
}

std::vector<Shared<MeasurementObject>> Cluster::measurementsBy(const std::string& ns,
                                                               const std::string& jobUid) const {
  const auto* store = storeFor(measurements_, ns);
  if (store == nullptr) {
    return {};
  }
  auto made = store->byIndex(std::string(kByMeasuringJob), jobUid);
  std::erase_if(made, [&](const auto& kept) { return kept->ns != ns; });
  return made;
}

std::vector<Shared<MeasurementObject>> Cluster::measurementsIn(
    const std::string& ns, const std::string& environment) const {
  const auto* store = storeFor(measurements_, ns);
  return store == nullptr ? std::vector<Shared<MeasurementObject>>{}
                          : store->byIndex(std::string(kByEnvironment), ns + "/" + environment);
}

QueueState Cluster::localQueue(const std::string& ns, const std::string& name) const {
  const auto* store = storeFor(localQueues_, ns);
  if (store == nullptr) {
    return QueueState::kNotWatched;
  }
  return store->get(ns + "/" + name) ? QueueState::kFound : QueueState::kMissing;
}

MissingNodes Cluster::missingNodes(const NodeNames& named, Timestamp now) const {
  NodeNames absent;
  for (const auto& name : named) {
    if (!nodes_->get(name)) {
      absent.insert(name);
    }
  }
  return nodeLookups_.missing(absent, now);
}

void Cluster::nodeLookedUp(const std::string& name, bool found, Timestamp at) {
  nodeLookups_.lookedUp(name, found, at);
}

int Cluster::slotsHeldForOlderJobs(const CachedAutotuneJob& job, int gpusPerTrial) const {
  return waiting_.slotsHeldBefore(job.key, job.creationTimestamp, gpusPerTrial, gpuModelOf(job));
}

void Cluster::jobWaits(const CachedAutotuneJob& job, int gpus) {
  waiting_.set(job.key, job.creationTimestamp, gpus, gpuModelOf(job));
}

void Cluster::jobWaitsForNode(const std::string& key, bool waits) {
  waiting_.setWaitsForNode(key, waits);
}

std::vector<std::string> Cluster::jobsConcernedByPod(const Pod* before, const Pod* after) const {
  const Pod* pod = after != nullptr ? after : before;
  if (pod == nullptr) {
    return {};
  }
  std::vector<std::string> keys;
  // A Pod no job of ours controls concerns the job its label names, which tells of it.
  if (const auto owner = ownerOf(*pod)) {
    keys.push_back(pod->ns + "/" + owner->name);
  } else if (!pod->jobLabel.empty()) {
    keys.push_back(pod->ns + "/" + pod->jobLabel);
  }
  return keys;
}

std::vector<std::string> Cluster::jobsWokenByPod(const Pod* before, const Pod* after) const {
  const bool heldGpus = before != nullptr && before->gpus > 0 && !before->finished();
  const bool letGo = after == nullptr || after->finished();
  if (!heldGpus || !letGo) {
    return {};
  }
  const auto node = nodes_->get(before->nodeName);
  return waiting_.takers(before->gpus, node != nullptr ? node->gpuProduct : "");
}

std::vector<std::string> Cluster::jobsConcernedBy(const Node* before, const Node* after) const {
  const Node* node = after != nullptr ? after : before;
  if (node == nullptr || (before != nullptr && after != nullptr && before->sameForJobs(*after))) {
    return {};
  }
  std::set<std::string> keys;
  const auto offered = [](const Node* node) {
    return node != nullptr && node->schedulable ? node->gpus : 0;
  };
  if (const int more = offered(after) - offered(before); more > 0) {
    for (auto& key : waiting_.takers(more, node->gpuProduct)) {
      keys.insert(std::move(key));
    }
    for (auto& key : waiting_.waitingForNode()) {
      keys.insert(std::move(key));
    }
  }
  for (const auto& [ns, store] : pods_) {
    for (const auto& pod : store->byIndex(std::string(kByNode), node->name)) {
      if (const auto owner = ownerOf(*pod)) {
        keys.insert(pod->ns + "/" + owner->name);
      }
    }
  }
  return {keys.begin(), keys.end()};
}

std::vector<std::string> Cluster::jobsConcernedByWorkload(const Workload* before,
                                                          const Workload* after) const {
  const Workload* workload = after != nullptr ? after : before;
  if (workload == nullptr ||
      (before != nullptr && after != nullptr && before->sameForTrials(*after))) {
    return {};
  }
  const std::string ownerKey = workload->ns + "/" + workload->ownerName;
  std::string ownerJob;
  if (workload->ownerKind == "Pod") {
    if (const auto pod = this->pod(ownerKey)) {
      ownerJob = ownerOf(*pod).value_or(TrialOwner{}).name;
    }
  } else if (workload->ownerKind == "Job") {
    if (const auto job = batchJob(ownerKey)) {
      ownerJob = job->ownerJobName;
    }
  }
  if (ownerJob.empty()) {
    return {};
  }
  return {workload->ns + "/" + ownerJob};
}

std::vector<std::string> Cluster::jobsConcernedByLocalQueue(const LocalQueue* before,
                                                            const LocalQueue* after) const {
  const LocalQueue* queue = after != nullptr ? after : before;
  if (queue == nullptr || (before != nullptr && after != nullptr)) {
    return {};
  }
  std::vector<std::string> keys;
  const auto* store = storeFor(jobs_, queue->ns);
  if (store == nullptr) {
    return keys;
  }
  for (const auto& job : store->list()) {
    if (job->decoded && job->decoded->job.namespaceName() == queue->ns &&
        job->decoded->job.spec.queueName == queue->name) {
      keys.push_back(job->key);
    }
  }
  return keys;
}

std::map<std::string, std::int64_t, std::less<>> Cluster::jobsByPhase() const {
  const std::scoped_lock lock(mutex_);
  return phaseCounts_;
}

void Cluster::wroteStatus(const nlohmann::json& object) {
  if (auto decoded = decodeAutotuneJob(object)) {
    const std::string ns = object::text(object::metadataOf(object), "namespace");
    putWritten(jobs_, ns, std::move(*decoded));
  }
}

void Cluster::wrotePod(const nlohmann::json& object) {
  if (auto decoded = decodePod(object)) {
    const std::string ns = decoded->ns;
    putWritten(pods_, ns, std::move(*decoded));
  }
}

void Cluster::wroteBatchJob(const nlohmann::json& object) {
  if (auto decoded = decodeBatchJob(object)) {
    const std::string ns = decoded->ns;
    putWritten(batchJobs_, ns, std::move(*decoded));
  }
}

void Cluster::deletingPod(const Pod& pod) {
  if (auto* store = storeFor(pods_, pod.ns)) {
    Pod deleting = pod;
    deleting.deleting = true;
    store->putIfPresent(std::make_shared<const Pod>(std::move(deleting)));
  }
}

bool Cluster::noticeForeignPod(const std::string& uid) {
  const std::scoped_lock lock(mutex_);
  if (!foreignPods_.insert(uid).second) {
    return false;
  }
  foreignOrder_.push_back(uid);
  if (foreignOrder_.size() > kRememberedForeignPods) {
    foreignPods_.erase(foreignOrder_.front());
    foreignOrder_.pop_front();
  }
  return true;
}

void Cluster::jobChanged(const CachedAutotuneJob* before, const CachedAutotuneJob* after) {
  const std::string& key = after != nullptr ? after->key : before->key;
  if (after == nullptr) {
    waiting_.set(key, before->creationTimestamp, 0);
    waiting_.setWaitsForNode(key, false);
  } else if (before == nullptr) {
    // A job first seen (after a restart: every job) holds back what it waited for from younger
    // jobs at once, not from its own first reconcile on, which may come after theirs.
    if (const int gpus = gpusWaitedForAsWritten(*after); gpus > 0) {
      waiting_.set(key, after->creationTimestamp, gpus, gpuModelOf(*after));
    }
  }
  const std::scoped_lock lock(mutex_);
  if (const auto found = phaseOf_.find(key); found != phaseOf_.end()) {
    if (--phaseCounts_[found->second] == 0) {
      phaseCounts_.erase(found->second);
    }
    phaseOf_.erase(found);
  }
  if (after == nullptr) {
    return;
  }
  const std::string phase = phaseOf(*after);
  ++phaseCounts_[phase];
  phaseOf_.emplace(key, phase);
}

}  // namespace autotune::controller
