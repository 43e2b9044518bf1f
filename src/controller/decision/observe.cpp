#include "controller/decision/observe.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "api/labels.h"
#include "controller/objects/conditions.h"
#include "controller/objects/trial_pod.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

// A trial's run as observed: one Pod, or the Pods of a multi-node trial's batch Job as one state
// (combineRanks).
struct ObservedRun {
  TrialRunState state;
  bool deleting = false;  // all its Pods are being deleted
  std::vector<Shared<Pod>> pods;
};

// A multi-node trial's batch Job suspended while its Pods are being stopped: a queueing system
// took its admission back (Kueue evicts a Workload by suspending its Job), and the Job controller
// deletes its Pods. The trial runs again whole: as preempted when Kueue preempted its Workload (or
// its Workload is not watched), as lost for any other eviction (its waitForPodsReady timeout, a
// failed admission check, a deactivation), which may be the trial's doing. Pods that are alive and
// not being deleted say the suspension is older than they are: the Job's update resuming it has
// not reached the cache yet, its Pods (which the resumption made) have.
void suspendedWhileRunning(TrialRunState& state, const Workload* workload) {
  const bool stopped = state.phase == TrialRunState::Phase::kLost ||
                       (state.phase == TrialRunState::Phase::kFinished && state.exit.exitCode != 0);
  if (!stopped) {
    return;
  }
  const std::string why = workload != nullptr ? workload->evictedReason : "";
  state.phase = TrialRunState::Phase::kLost;
  state.preempted = why.empty() || why == "Preempted";
  state.message = "its Job was suspended by a queueing system (Kueue evicted its Workload" +
                  (why.empty() ? std::string() : ": " + why) + ")";
}

bool isTrialOf(const ClusterView& cluster, const Pod& pod, const api::AutotuneJob& job) {
  const auto owner = cluster.ownerOf(pod);
  return owner && owner->uid == job.uid();
}

// The runs of the job's trials from its Pods; names taken by Pods it does not own, those Pods,
// and Pods that cannot be read, go into the snapshot.
std::vector<ObservedRun> observeRuns(const ClusterView& cluster,
                                     const std::vector<Shared<Pod>>& pods, Snapshot& snapshot) {
  const api::AutotuneJob& job = snapshot.job;
  std::vector<ObservedRun> observed;
  std::map<std::string, ObservedRun> batchJobs;
  std::map<std::string, std::vector<TrialRunState>> ranks;
  for (const auto& pod : pods) {
    if (!isTrialOf(cluster, *pod, job)) {
      snapshot.namesTaken.insert(pod->batchJob.empty() ? pod->name : pod->batchJob);
      if (!pod->deleting) {
        snapshot.foreignPods.push_back(pod);
      } else if (pod->heldForItsResult()) {
        snapshot.settled.push_back(pod);  // an earlier job's of the same name: it tells nothing
      }
      continue;
    }
    auto state = readTrialPod(*pod, job.spec, snapshot.missingNodes.gone);
    if (!state) {
      snapshot.unreadable.push_back(state.error());
      if (pod->deleting && pod->heldForItsResult()) {
        snapshot.settled.push_back(pod);  // it tells nothing: nothing is lost with it
      }
    } else if (pod->batchJob.empty()) {
      observed.push_back({std::move(*state), pod->deleting, {pod}});
    } else {
      auto& run =
          batchJobs.try_emplace(pod->batchJob, ObservedRun{{}, pod->deleting, {}}).first->second;
      run.deleting = run.deleting && pod->deleting;
      run.pods.push_back(pod);
      ranks[pod->batchJob].push_back(std::move(*state));
    }
  }
  for (auto& [name, run] : batchJobs) {
    run.state = combineRanks(ranks[name], job.spec);
    if (const auto batchJob = cluster.batchJob(job.namespaceName() + "/" + name)) {
      run.state.run.serviceUid = batchJob->serviceUid;
      if (batchJob->suspended) {
        const auto workload =
            cluster.workloadOf(job.namespaceName(), "Job", batchJob->name, batchJob->uid);
        suspendedWhileRunning(run.state, workload.get());
      }
    }
    observed.push_back(std::move(run));
  }
  return observed;
}

// Trials the written status counts in flight of which no run was seen: deleted before any
// reconcile saw them go, or never created. Not measured, and nothing says it was the config's
// doing: they run again as their next attempt, never under a name already used. A multi-node
// trial's batch Job whose Pods the Job controller has yet to make is pending rather than gone,
// until its scheduling timeout; one a queueing system holds suspended is queued.
TrialRunState vanished(const ClusterView& cluster, const api::AutotuneJob& job,
                       const api::LaunchedTrial& launched, Timestamp now) {
  TrialRunState state;
  state.phase = TrialRunState::Phase::kNotMeasured;
  state.trialName = launched.name;
  state.attempt = launched.attempt;
  state.preemptions = launched.preemptions;
  state.run = trialRunOf(job, launched.name, launched.attempt);
  state.message = "its " + state.run.describe() + " is gone: deleted, or never created";
  if (state.run.carrier != TrialRun::Carrier::kBatchJob) {
    return state;
  }
  const auto batchJob = cluster.batchJob(job.namespaceName() + "/" + state.run.name);
  if (!batchJob || batchJob->ownerJobUid != job.uid() || batchJob->deleting) {
    return state;
  }
  state.created = batchJob->created;
  state.run.uid = batchJob->uid;
  state.run.serviceUid = batchJob->serviceUid;
  if (batchJob->suspended) {
    state.phase = TrialRunState::Phase::kQueued;
    state.heldBack = true;
    state.message = "its Job is suspended: a queueing system holds it";
    return state;
  }
  state.phase = TrialRunState::Phase::kPending;
  state.message = "its Pods are not made yet";
  if (auto why = notMeasured(state, job.spec, now)) {
    state.phase = TrialRunState::Phase::kNotMeasured;
    state.message = std::move(*why);
  }
  return state;
}

// Sorts the observed runs: those of recorded trials (or of any, once the job has ended) and
// superseded attempts are stale; of the rest, the newest attempt of each trial tells its state.
std::map<std::string, TrialRunState> newestRuns(std::vector<ObservedRun>&& observed,
                                                const std::set<std::string>& recorded,
                                                Snapshot& snapshot) {
  const api::Spec& spec = snapshot.job.spec;
  const bool terminal = api::hasEnded(snapshot.job.status.phase);
  std::map<std::string, TrialRunState> newest;
  for (auto& [state, deleting, pods] : observed) {
    if (auto why = notMeasured(state, spec, snapshot.now)) {
      state.phase = TrialRunState::Phase::kNotMeasured;
      state.message = std::move(*why);
    }
    if (recorded.contains(state.trialName) || terminal) {
      if (removable(state, spec) && !deleting) {
        snapshot.staleRuns.push_back(state.run);
      } else {
        std::ranges::copy_if(pods, std::back_inserter(snapshot.settled),
                             [](const auto& pod) { return pod->heldForItsResult(); });
      }
      continue;
    }
    const auto kept = newest.find(state.trialName);
    if (kept == newest.end()) {
      newest.emplace(state.trialName, std::move(state));
    } else if (kept->second.attempt < state.attempt) {
      snapshot.staleRuns.push_back(kept->second.run);
      kept->second = std::move(state);
    } else {
      snapshot.staleRuns.push_back(state.run);
    }
  }
  return newest;
}

// What a trial that finished ran on: its node's GPU, and its image's digest if the runtime gave
// one. Nothing for a trial that did not finish by itself, or whose node the cache lacks.
std::optional<RanOn> ranOnOf(const ClusterView& cluster, const TrialRunState& state) {
  if (state.phase != TrialRunState::Phase::kFinished || state.node.empty()) {
    return std::nullopt;
  }
  const auto node = cluster.node(state.node);
  if (!node) {
    return std::nullopt;
  }
  GpuModel gpu{node->gpuProduct, node->gpuMemoryBytes};
  if (gpu.product.empty() || !gpu.memoryBytes) {
    if (const auto published = cluster.publishedGpu(state.node)) {
      gpu.product = gpu.product.empty() ? published->product : gpu.product;
      gpu.memoryBytes = gpu.memoryBytes ? gpu.memoryBytes : published->memoryBytes;
    }
  }
  return RanOn{std::move(gpu), imageDigest(state.imageID)};
}

// The job's trial Pods. Each stays, deleted or not, until the written status accounts for it
// (api::kTrialResultFinalizer), so a Pod that went between two reconciles, or while no operator
// ran, still says how it ended.
void observeTrials(const ClusterView& cluster, Snapshot& snapshot) {
  const api::AutotuneJob& job = snapshot.job;
  std::set<std::string> recorded;
  for (const auto& record : job.status.results) {
    recorded.insert(record.name);
  }
  auto pods = cluster.podsLabelled(job.namespaceName(), jobLabelValue(job.name()));
  NodeNames bound;
  for (const auto& pod : pods) {
    if (!pod->nodeName.empty() && isTrialOf(cluster, *pod, job)) {
      bound.insert(pod->nodeName);
    }
  }
  snapshot.missingNodes = cluster.missingNodes(bound, snapshot.now);
  auto newest = newestRuns(observeRuns(cluster, pods, snapshot), recorded, snapshot);
  if (!api::hasEnded(job.status.phase)) {
    for (const auto& launched : job.status.inFlight) {
      if (!recorded.contains(launched.name) && !newest.contains(launched.name)) {
        newest.emplace(launched.name, vanished(cluster, job, launched, snapshot.now));
      }
    }
  }
  for (auto& [trial, state] : newest) {
    if (auto result = resultOf(state, job.spec, snapshot.now)) {
      auto ranOn = ranOnOf(cluster, state);
      if (ranOn) {
        result->record.gpuModel =
            tuning::boundedName(ranOn->gpu.product, api::kMaxRecordedGpuModel);
      }
      snapshot.concluded.push_back({std::move(state), std::move(*result), std::move(ranOn)});
    } else {
      snapshot.inFlight.push_back(std::move(state));
    }
  }
  // In the order the trials started, so that a restart records them the same way.
  std::ranges::sort(snapshot.concluded, [](const Concluded& a, const Concluded& b) {
    return std::tie(a.result.record.startTime, a.result.record.name) <
           std::tie(b.result.record.startTime, b.result.record.name);
  });
  snapshot.results = job.status.results;
  snapshot.model = job.status.model;
  for (const auto& concluded : snapshot.concluded) {
    snapshot.results.push_back(concluded.result.record);
    if (concluded.result.measured) {
      snapshot.model = concluded.result.measured;
    }
  }
}

// Kueue makes a trial's Workload within seconds of its Pod or Job. One still missing after this
// long is most likely one the operator does not see.
constexpr auto kWorkloadExpectedWithin = std::chrono::seconds(30);

// Why a queued trial's Workload is not in the cache: not made yet, or, once it should have been,
// made but not watched (Kueue did not copy the label the operator watches Workloads by) or not
// made at all (Kueue does not manage the namespace).
std::string noWorkloadYet(const TrialRunState& state, Snapshot& snapshot) {
  std::string words = "Kueue has not made its Workload yet";
  if (!state.created) {
    return words;
  }
  const Timestamp overdue = *state.created + kWorkloadExpectedWithin;
  if (snapshot.now < overdue) {
    snapshot.workloadOverdueAt = std::min(snapshot.workloadOverdueAt.value_or(overdue), overdue);
    return words;
  }
  return words + " (after " + std::to_string(kWorkloadExpectedWithin.count()) +
         "s: check that Kueue manages this namespace, and that its Configuration copies the "
         "label " +
         std::string(api::kJobLabel) +
         " to Workloads, integrations.labelKeysToCopy, which the operator watches them by "
         "unless its --kueue-workload-selector says otherwise)";
}

// A queued trial of a job in a Kueue LocalQueue waits for admission until its Workload is
// admitted; the Workload's own words say why it is not. Once it is, the trial waits on the
// scheduler like any other.
void readAdmissions(const ClusterView& cluster, Snapshot& snapshot) {
  const api::AutotuneJob& job = snapshot.job;
  if (job.spec.queueName.empty()) {
    return;
  }
  snapshot.queue = cluster.localQueue(job.namespaceName(), job.spec.queueName);
  if (snapshot.queue == QueueState::kNotWatched) {
    return;
  }
  for (auto& state : snapshot.inFlight) {
    if (state.phase != TrialRunState::Phase::kQueued) {
      continue;
    }
    const bool pod = state.run.carrier == TrialRun::Carrier::kPod;
    const auto workload =
        cluster.workloadOf(job.namespaceName(), pod ? "Pod" : "Job", state.run.name, state.run.uid);
    if (workload && workload->admitted) {
      continue;
    }
    state.awaitingAdmission = true;
    state.heldBack = true;
    state.message = "waits for Kueue admission in LocalQueue " + job.spec.queueName + ": " +
                    (!workload ? noWorkloadYet(state, snapshot)
                     : workload->pendingMessage.empty()
                         ? "its Workload " + workload->name + " is not admitted yet"
                         : workload->pendingMessage);
  }
}

// The digest the job's own trials ran their image as, if the runtime reported one: those that
// ended now, else those it kept measurements of.
std::string digestRunBefore(const ClusterView& cluster, const Snapshot& snapshot) {
  for (const auto& concluded : snapshot.concluded) {
    if (concluded.ranOn && !concluded.ranOn->imageDigest.empty()) {
      return concluded.ranOn->imageDigest;
    }
  }
  const api::AutotuneJob& job = snapshot.job;
  for (const auto& made : cluster.measurementsBy(job.namespaceName(), job.uid())) {
    if (auto digest = imageDigestOf(*made); !digest.empty()) {
      return digest;
    }
  }
  return "";
}

// When the job began to wait for room, while it does: its WaitingForRoom condition's time.
std::optional<Timestamp> waitingSince(const api::Status& status) {
  const api::Condition* waiting = findCondition(status, condition::kWaitingForRoom);
  if (waiting == nullptr || waiting->status != "True") {
    return std::nullopt;
  }
  return parseTime(waiting->lastTransitionTime);
}

}  // namespace

std::optional<Recallable> recallableFor(const ClusterView& cluster, const Snapshot& snapshot) {
  const api::AutotuneJob& job = snapshot.job;
  // With no room left by parallelism the engine wants no trial, and nothing is looked up.
  const bool roomToLaunch = job.spec.parallelism > static_cast<int>(snapshot.inFlight.size());
  if (job.spec.reuse != api::Reuse::kEnabled || hasEnded(job.status.phase) || !roomToLaunch) {
    return std::nullopt;
  }
  auto ranOn = expectedRanOn(job.spec, snapshot.capacity);
  if (!ranOn) {
    return std::nullopt;
  }
  if (ranOn->imageDigest.empty()) {
    ranOn->imageDigest = digestRunBefore(cluster, snapshot);
  }
  Recallable recallable{*ranOn, {}, cluster.measurementLimits().maxAge};
  const std::string environment = environmentOf(job.namespaceName(), job.spec, *ranOn);
  for (const auto& kept : cluster.measurementsIn(job.namespaceName(), environment)) {
    for (const auto& identity : kept->identities) {
      // Measured more than once (again past its age, say): the newest stands.
      auto [held, added] = recallable.byName.try_emplace(identity, kept);
      if (!added && kept->measuredAt(identity) > held->second->measuredAt(identity)) {
        held->second = kept;
      }
    }
  }
  return recallable;
}

Snapshot observe(const ClusterView& cluster, const CachedAutotuneJob& job, Timestamp now) {
  Snapshot snapshot;
  snapshot.now = now;
  snapshot.key = job.key;
  snapshot.generation = job.generation;
  snapshot.job = job.decoded->job;
  snapshot.job.status = job.status;
  snapshot.warnings = job.decoded->warnings;
  snapshot.statusWrittenAt = job.statusWrittenAt;
  snapshot.waitingSince = waitingSince(job.status);
  observeTrials(cluster, snapshot);
  readAdmissions(cluster, snapshot);
  snapshot.capacity = forJob(cluster.capacity(), snapshot.job.spec);
  snapshot.slotsHeldForOlderJobs =
      cluster.slotsHeldForOlderJobs(job, snapshot.job.spec.resources.gpusPerTrial);
  snapshot.recallable = recallableFor(cluster, snapshot);
  return snapshot;
}

}  // namespace autotune::controller
