#include "controller/cluster.h"

#include <algorithm>
#include <utility>

#include "api/job.h"

namespace autotune::controller {
namespace {

constexpr std::string_view kByJobLabel = "job";
constexpr std::string_view kByNode = "node";
constexpr std::chrono::hours kForgetLookup{1};

std::string labelled(const std::string& ns, const std::string& jobLabel) {
  return ns + "/" + jobLabel;
}

std::string phaseOf(const Job& job) { return std::string(api::toString(job.status.phase)); }

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

}  // namespace

std::vector<std::string> jobKeysOfPod(const Pod* before, const Pod* after) {
  const Pod* pod = after != nullptr ? after : before;
  if (pod == nullptr || pod->ownerJobName.empty()) {
    return {};
  }
  return {pod->ns + "/" + pod->ownerJobName};
}

std::vector<std::string> jobKeysOfJob(const Job* before, const Job* after) {
  const Job* job = after != nullptr ? after : before;
  if (job == nullptr ||
      (before != nullptr && after != nullptr && before->generation == after->generation)) {
    return {};
  }
  return {job->key};
}

Cluster::Cluster()
    : nodes_(std::make_unique<NodeStore>(
          decodeNode, [](const Node& node) { return node.name; },
          [](const Node& node) { return node.resourceVersion; })) {
  nodes_->listen([this](const Node* before, const Node* after) { nodeChanged(before, after); });
}

JobStore& Cluster::addJobs(const std::string& ns) {
  auto store = std::make_unique<JobStore>(
      decodeJob, [](const Job& job) { return job.key; },
      [](const Job& job) { return job.resourceVersion; });
  store->listen([this](const Job* before, const Job* after) { jobChanged(before, after); });
  jobs_.emplace_back(ns, std::move(store));
  return *jobs_.back().second;
}

PodStore& Cluster::addPods(const std::string& ns) {
  auto store = std::make_unique<PodStore>(
      decodePod, [](const Pod& pod) { return pod.key; },
      [](const Pod& pod) { return pod.resourceVersion; });
  store->addIndex(std::string(kByJobLabel), [](const Pod& pod) {
    return pod.jobLabel.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>{labelled(pod.ns, pod.jobLabel)};
  });
  store->addIndex(std::string(kByNode), [](const Pod& pod) {
    return pod.nodeName.empty() ? std::vector<std::string>{}
                                : std::vector<std::string>{pod.nodeName};
  });
  store->listen([this](const Pod* before, const Pod* after) { podChanged(before, after); });
  pods_.emplace_back(ns, std::move(store));
  return *pods_.back().second;
}

runtime::Shared<Job> Cluster::job(const std::string& key) const {
  const std::string ns = key.substr(0, key.find('/'));
  const auto* store = storeFor(jobs_, ns);
  return store == nullptr ? nullptr : store->get(key);
}

runtime::Shared<Pod> Cluster::pod(const std::string& key) const {
  const auto* store = storeFor(pods_, key.substr(0, key.find('/')));
  return store == nullptr ? nullptr : store->get(key);
}

std::vector<runtime::Shared<Pod>> Cluster::podsLabelled(const std::string& ns,
                                                        const std::string& jobLabel) const {
  const auto* store = storeFor(pods_, ns);
  if (store == nullptr) {
    return {};
  }
  return store->byIndex(std::string(kByJobLabel), labelled(ns, jobLabel));
}

MissingNodes Cluster::missingNodes(const NodeNames& named, Timestamp now) const {
  NodeNames absent;
  for (const auto& name : named) {
    if (!nodes_->get(name)) {
      absent.insert(name);
    }
  }
  MissingNodes missing;
  const std::scoped_lock lock(mutex_);
  for (const auto& name : absent) {
    const auto lookup = nodeLookups_.find(name);
    if (lookup == nodeLookups_.end()) {
      missing.awaited.insert(name);
      missing.toLookUp.insert(name);
      continue;
    }
    const auto& [at, absentSince] = lookup->second;
    if (absentSince && now - *absentSince >= kNodeGoneGrace) {
      missing.gone.insert(name);
      continue;
    }
    missing.awaited.insert(name);
    if (now - at >= kNodeRecheck) {
      missing.toLookUp.insert(name);
    }
  }
  return missing;
}

void Cluster::nodeLookedUp(const std::string& name, bool found, Timestamp at) {
  const std::scoped_lock lock(mutex_);
  // Lookups of nodes long gone, whose Pods are long lost, are of no more use.
  std::erase_if(nodeLookups_,
                [at](const auto& entry) { return at - entry.second.at > kForgetLookup; });
  NodeLookup& lookup = nodeLookups_[name];
  lookup.at = at;
  if (found) {
    lookup.absentSince.reset();
  } else if (!lookup.absentSince) {
    lookup.absentSince = at;
  }
}

int Cluster::slotsHeldForOlderJobs(const Job& job, int gpusPerTrial) const {
  const std::scoped_lock lock(mutex_);
  const auto own = std::make_tuple(job.creationTimestamp, job.key);
  int held = 0;
  for (auto waiting = waiting_.begin(); waiting != waiting_.end() && waiting->first < own;
       ++waiting) {
    held += (waiting->second + gpusPerTrial - 1) / gpusPerTrial;
  }
  return held;
}

std::vector<std::string> Cluster::jobsConcernedBy(const Node* before, const Node* after) const {
  const Node* node = after != nullptr ? after : before;
  if (node == nullptr || (before != nullptr && after != nullptr && before->sameForJobs(*after))) {
    return {};
  }
  std::set<std::string> keys;
  {
    const std::scoped_lock lock(mutex_);
    for (const auto& [order, gpus] : waiting_) {
      keys.insert(std::get<1>(order));
    }
  }
  for (const auto& [ns, store] : pods_) {
    for (const auto& pod : store->byIndex(std::string(kByNode), node->name)) {
      for (auto& key : jobKeysOfPod(nullptr, pod.get())) {
        keys.insert(std::move(key));
      }
    }
  }
  return {keys.begin(), keys.end()};
}

std::map<std::string, std::int64_t, std::less<>> Cluster::jobsByPhase() const {
  const std::scoped_lock lock(mutex_);
  return phaseCounts_;
}

std::optional<Timestamp> Cluster::statusWrittenAt(const std::string& key) const {
  const std::scoped_lock lock(mutex_);
  const auto found = statusWrittenAt_.find(key);
  return found == statusWrittenAt_.end() ? std::nullopt : std::optional(found->second);
}

void Cluster::wroteStatus(const nlohmann::json& object, Timestamp at) {
  auto decoded = decodeJob(object);
  if (!decoded) {
    return;
  }
  {
    const std::scoped_lock lock(mutex_);
    statusWrittenAt_[decoded->key] = at;
  }
  if (auto* store = storeFor(jobs_, k8s::text(k8s::metadataOf(object), "namespace"))) {
    store->put(std::make_shared<const Job>(std::move(*decoded)));
  }
}

void Cluster::wrotePod(const nlohmann::json& object) {
  auto decoded = decodePod(object);
  if (!decoded) {
    return;
  }
  if (auto* store = storeFor(pods_, decoded->ns)) {
    store->put(std::make_shared<const Pod>(std::move(*decoded)));
  }
}

void Cluster::createdTrialJob(const std::string& key, Timestamp at) {
  constexpr auto kRemembered = std::chrono::hours(24);
  const std::scoped_lock lock(mutex_);
  std::erase_if(trialJobsCreated_,
                [&](const auto& entry) { return entry.second + kRemembered < at; });
  trialJobsCreated_[key] = at;
}

void Cluster::deletedTrialJob(const std::string& key) {
  const std::scoped_lock lock(mutex_);
  trialJobsCreated_.erase(key);
}

std::optional<Timestamp> Cluster::trialJobCreated(const std::string& key) const {
  const std::scoped_lock lock(mutex_);
  const auto found = trialJobsCreated_.find(key);
  return found == trialJobsCreated_.end() ? std::nullopt : std::optional(found->second);
}

void Cluster::deletingPod(const Pod& pod) {
  if (auto* store = storeFor(pods_, pod.ns)) {
    Pod deleting = pod;
    deleting.deleting = true;
    store->put(std::make_shared<const Pod>(std::move(deleting)));
  }
}

void Cluster::jobChanged(const Job* before, const Job* after) {
  const std::scoped_lock lock(mutex_);
  const std::string& key = after != nullptr ? after->key : before->key;
  if (const auto found = waitingKey_.find(key); found != waitingKey_.end()) {
    waiting_.erase(found->second);
    waitingKey_.erase(found);
  }
  if (const auto found = phaseOf_.find(key); found != phaseOf_.end()) {
    if (--phaseCounts_[found->second] == 0) {
      phaseCounts_.erase(found->second);
    }
    phaseOf_.erase(found);
  }
  if (after == nullptr) {
    statusWrittenAt_.erase(key);
    return;
  }
  const std::string phase = phaseOf(*after);
  ++phaseCounts_[phase];
  phaseOf_.emplace(key, phase);
  if (after->gpusWanted > 0) {
    auto order = std::make_tuple(after->creationTimestamp, key);
    waiting_.insert_or_assign(order, after->gpusWanted);
    waitingKey_.insert_or_assign(key, std::move(order));
  }
}

void Cluster::podChanged(const Pod* before, const Pod* after) {
  if (after == nullptr) {
    gpus_.removePod(before->key);
  } else {
    gpus_.setPod(*after);
  }
}

void Cluster::nodeChanged(const Node* before, const Node* after) {
  if (after == nullptr) {
    gpus_.removeNode(before->name);
    return;
  }
  gpus_.setNode(*after);
  const std::scoped_lock lock(mutex_);
  nodeLookups_.erase(after->name);  // the watch caught up
}

}  // namespace autotune::controller
