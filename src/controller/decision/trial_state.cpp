#include "controller/decision/trial_state.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "api/labels.h"
#include "controller/objects/trial_pod.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

// Waiting reasons of a container that cannot be created: no retry by the kubelet will help
// before someone changes the image, the registry or the objects the Pod refers to.
constexpr std::array<std::string_view, 6> kCannotStartReasons = {
    "ErrImagePull",      "ImagePullBackOff",           "InvalidImageName",
    "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError"};

// Pod status reasons of a Pod stopped from outside: kubelet eviction, node shutdown, a node
// that stopped reporting, preemption.
constexpr std::array<std::string_view, 6> kLostReasons = {"Evicted",  "NodeLost",     "Terminated",
                                                          "Shutdown", "NodeShutdown", "Preempting"};

std::string joined(std::string_view reason, std::string_view message) {
  if (reason.empty() || message.empty()) {
    return std::string(reason.empty() ? message : reason);
  }
  return std::string(reason) + ": " + std::string(message);
}

// The primary container's status: spec.primaryContainer, else the Pod's first container.
const ContainerStatus* primaryStatus(const Pod& pod, const api::Spec& spec) {
  const std::string& name =
      spec.primaryContainer.empty() ? pod.firstContainer : spec.primaryContainer;
  const auto found = std::ranges::find(pod.containers, name, &ContainerStatus::name);
  return found == pod.containers.end() ? nullptr : &*found;
}

// The container ended before anyone asked the Pod to go: deletionTimestamp is when the grace
// period of the deletion ends.
bool endedBeforeDeletion(const Pod& pod, const std::optional<Timestamp>& finished) {
  if (!pod.deletionTimestamp || !finished || !pod.deletionGracePeriodSeconds) {
    return false;
  }
  // Within a year either way, so that the arithmetic cannot overflow on a value no API server sets.
  constexpr std::int64_t kYear = 365LL * 24 * 3600;
  const std::int64_t seconds = std::clamp<std::int64_t>(*pod.deletionGracePeriodSeconds, 0, kYear);
  return *finished < *pod.deletionTimestamp - std::chrono::seconds(seconds);
}

// DisruptionTarget reasons of a Pod preempted or drained: the scheduler made room for a higher
// priority, or someone evicted it through the Eviction API (kubectl drain). Neither says anything
// of its config. (TerminationByKubelet, the node running short of memory, may: an offload that
// exhausts the node gets its Pod evicted.)
constexpr std::array<std::string_view, 3> kPreemptionReasons = {
    "PreemptionByScheduler", "PreemptionByKubeScheduler", "EvictionByEvictionAPI"};

// Kueue stops a Pod whose Workload it evicts with the TerminationTarget reason
// WorkloadEvictedDueTo<the Workload's Evicted reason>. Only preemption (a higher priority, quota
// reclaimed within a cohort) says nothing of the trial; its waitForPodsReady timeout
// (PodsReadyTimeout), a failed admission check, a deactivated Workload or a stopped queue may, and
// they are losses like any other. Older releases said StoppedByKueue for every eviction.
bool preemptedByKueue(std::string_view reason) {
  return reason == "WorkloadEvictedDueToPreempted" || reason == "StoppedByKueue";
}

struct Loss {
  std::string reason;
  bool preempted = false;
};

// Why the Pod is lost, if it is: something outside the trial stopped it or is about to.
std::optional<Loss> lossOf(const Pod& pod, const ContainerStatus::Terminated* terminated,
                           const NodeNames& goneNodes) {
  if (pod.phase == "Unknown") {
    return Loss{joined("node not reporting", pod.message)};
  }
  if (pod.termination && pod.termination->status == "True") {
    return Loss{joined(pod.termination->reason, pod.termination->message),
                preemptedByKueue(pod.termination->reason)};
  }
  if (pod.disruption && pod.disruption->status == "True") {
    const bool preempted =
        std::ranges::find(kPreemptionReasons, pod.disruption->reason) != kPreemptionReasons.end();
    return Loss{joined(pod.disruption->reason, pod.disruption->message), preempted};
  }
  if (std::ranges::find(kLostReasons, pod.reason) != kLostReasons.end()) {
    return Loss{joined(pod.reason, pod.message)};
  }
  if (terminated != nullptr && terminated->reason == "ContainerStatusUnknown") {
    return Loss{joined("ContainerStatusUnknown", terminated->message)};
  }
  if (goneNodes.contains(pod.nodeName)) {
    return Loss{"node " + pod.nodeName + " is gone"};
  }
  if (pod.deleting &&
      !endedBeforeDeletion(pod, terminated != nullptr ? terminated->finishedAt : std::nullopt)) {
    return Loss{"deleted before the trial ended"};
  }
  if (terminated == nullptr && pod.finished()) {
    return Loss{joined(pod.phase + " without running the trial", joined(pod.reason, pod.message))};
  }
  return std::nullopt;
}

// What a Pod without a node waits for: the scheduler, in its words, or its scheduling gates.
std::string queuedFor(const Pod& pod) {
  if (!pod.schedulingGates.empty()) {
    std::string gates;
    for (const auto& gate : pod.schedulingGates) {
      gates += (gates.empty() ? "" : ", ") + gate;
    }
    return "held by scheduling gates: " + gates;
  }
  if (pod.scheduled && pod.scheduled->status == "False" && !pod.scheduled->message.empty()) {
    return pod.scheduled->message;
  }
  return "waiting for the scheduler";
}

tuning::TrialExit trialExit(const ContainerStatus::Terminated& terminated) {
  tuning::TrialExit exit;
  exit.exitCode = terminated.exitCode.value_or(-1);
  if (terminated.signal != 0) {
    exit.signal = terminated.signal;
  }
  exit.oomKilled = terminated.reason == "OOMKilled";
  std::string message = terminated.message;
  if (exit.exitCode == 0) {
    if (!message.empty()) {
      exit.metrics = std::move(message);
    }
    return exit;
  }
  if (message.empty() && terminated.reason != "Error") {
    message = terminated.reason;
  }
  exit.message = tuning::tail(message, tuning::kTerminationMessageBytes);
  return exit;
}

int countOf(const std::string& value) {
  int attempt = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), attempt);
  return error == std::errc() && end == value.data() + value.size() && attempt > 0 ? attempt : 0;
}

double secondsBetween(Timestamp from, Timestamp to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

api::TrialRecord recordOf(const TrialRunState& state, api::Outcome outcome, std::string_view reason,
                          Timestamp start, double seconds) {
  api::TrialRecord record;
  record.name = state.trialName;
  record.space = state.space;
  record.outcome = outcome;
  record.reason = tuning::boundedReason(reason);
  record.startTime = formatTime(start);
  record.durationSeconds = seconds;
  return record;
}

// What a trial Pod says of its trial whatever its phase: who it is, its attempt, and when it was
// made, scheduled and started.
TrialRunState identityOf(const Pod& pod) {
  TrialRunState state;
  state.trialName = pod.trialName;
  state.space = pod.space;
  state.batchJob = pod.batchJob;
  state.batchJobUid = pod.batchJobUid;
  state.rank = pod.completionIndex;
  state.run = {TrialRun::Carrier::kPod, pod.name, pod.uid, ""};
  state.attempt = countOf(pod.attemptText);
  state.preemptions = std::min(countOf(pod.preemptionsText), state.attempt);
  state.created = pod.created;
  state.wantedSince = pod.wantedSince;
  state.started = pod.started;
  if (!pod.nodeName.empty()) {
    const bool saidWhen = pod.scheduled && pod.scheduled->status == "True";
    state.scheduledAt = saidWhen && pod.scheduled->since ? pod.scheduled->since : state.created;
  }
  return state;
}

}  // namespace

tl::expected<TrialRunState, std::string> readTrialPod(const Pod& pod, const api::Spec& spec,
                                                      const NodeNames& goneNodes) {
  if (pod.trialName.empty()) {
    return tl::make_unexpected("pod " + pod.name + " has no " +
                               std::string(api::kTrialNameAnnotation) + " annotation");
  }
  TrialRunState state = identityOf(pod);
  const ContainerStatus* primary = primaryStatus(pod, spec);
  const ContainerStatus::Terminated* terminated =
      primary != nullptr && primary->terminated ? &*primary->terminated : nullptr;
  const bool endedCleanly = terminated != nullptr && terminated->exitCode == 0;
  if (!endedCleanly) {
    if (auto loss = lossOf(pod, terminated, goneNodes)) {
      state.phase = TrialRunState::Phase::kLost;
      state.message = std::move(loss->reason);
      state.preempted = loss->preempted;
      return state;
    }
  }
  if (terminated != nullptr) {
    state.phase = TrialRunState::Phase::kFinished;
    state.exit = trialExit(*terminated);
    // The kubelet stopped it at its activeDeadlineSeconds: it outlived spec.trialTimeout while no
    // operator recorded that.
    state.exit.timedOut = state.exit.timedOut || pod.reason == "DeadlineExceeded";
    state.containerStarted = terminated->startedAt;
    state.containerFinished = terminated->finishedAt;
    state.node = pod.nodeName;
    state.imageID = primary->imageID;
    return state;
  }
  if (pod.phase == "Running") {
    state.phase = TrialRunState::Phase::kRunning;
    return state;
  }
  if (pod.nodeName.empty()) {
    state.phase = TrialRunState::Phase::kQueued;
    state.heldBack =
        !pod.schedulingGates.empty() || (pod.scheduled && pod.scheduled->status == "False");
    state.message = queuedFor(pod);
    return state;
  }
  state.phase = TrialRunState::Phase::kPending;
  if (primary != nullptr && primary->waiting) {
    state.waitingReason = primary->waiting->reason;
    state.message = joined(primary->waiting->reason, primary->waiting->message);
  }
  return state;
}

namespace {

using Phase = TrialRunState::Phase;

// A rank's state as its trial's: the run is the batch Job.
TrialRunState asTrial(TrialRunState state) {
  state.run = {TrialRun::Carrier::kBatchJob, state.batchJob, state.batchJobUid, ""};
  return state;
}

// The rank that tells how the trial ended, when one does: a rank that ran out of memory, else the
// first that failed, else rank 0 once it finished, else a rank that was lost.
std::optional<TrialRunState> decidingRank(const std::vector<TrialRunState>& ranks,
                                          const api::Spec& spec) {
  const TrialRunState* failed = nullptr;
  for (const auto& state : ranks) {
    if (state.phase != Phase::kFinished || state.exit.exitCode == 0) {
      continue;
    }
    const bool profiling = state.trialName == tuning::kProfileTrialName;
    if (tuning::classify(state.exit, spec.search.metric, profiling).outcome == api::Outcome::kOOM) {
      return asTrial(state);
    }
    if (failed == nullptr || state.containerFinished < failed->containerFinished) {
      failed = &state;
    }
  }
  if (failed != nullptr) {
    return asTrial(*failed);
  }
  const auto rankZero = std::ranges::find(ranks, std::string("0"), &TrialRunState::rank);
  if (rankZero != ranks.end() && rankZero->phase == Phase::kFinished) {
    return asTrial(*rankZero);
  }
  if (const auto lost = std::ranges::find(ranks, Phase::kLost, &TrialRunState::phase);
      lost != ranks.end()) {
    TrialRunState state = asTrial(*lost);
    state.message = "its Pod " + lost->run.name + " was lost: " + lost->message;
    return state;
  }
  return std::nullopt;
}

void keepEarliest(std::optional<Timestamp>& kept, const std::optional<Timestamp>& time) {
  if (time && (!kept || *time < *kept)) {
    kept = time;
  }
}

// The last of the ranks' times; none while a rank has none.
void keepLast(std::optional<Timestamp>& kept, const std::optional<Timestamp>& time) {
  if (!time || (kept && *time > *kept)) {
    kept = time;
  }
}

// A rank waiting for a node makes the trial queued, one waiting for its container pending.
bool waitsMore(const TrialRunState& rank, const TrialRunState& group) {
  return (rank.phase == Phase::kQueued && (group.phase != Phase::kQueued || rank.heldBack)) ||
         (rank.phase == Phase::kPending && group.phase == Phase::kRunning);
}

}  // namespace

TrialRunState combineRanks(const std::vector<TrialRunState>& ranks, const api::Spec& spec) {
  if (ranks.empty()) {
    return {};
  }
  if (auto decided = decidingRank(ranks, spec)) {
    return std::move(*decided);
  }
  const auto rankZero = std::ranges::find(ranks, std::string("0"), &TrialRunState::rank);
  TrialRunState group = asTrial(rankZero != ranks.end() ? *rankZero : ranks.front());
  group.phase = Phase::kRunning;
  group.message.clear();
  group.waitingReason.clear();
  for (const auto& state : ranks) {
    keepEarliest(group.created, state.created);
    keepLast(group.scheduledAt, state.scheduledAt);
    keepLast(group.started, state.started);
    if (waitsMore(state, group)) {
      group.phase = state.phase;
      group.heldBack = state.heldBack;
      group.message = state.run.name + ": " + state.message;
      group.waitingReason = state.waitingReason;
    }
  }
  // The Job controller has yet to make them all: pending, with the scheduling timeout of the
  // first one's creation.
  const int nodes = spec.resources.nodesPerTrial;
  if (std::cmp_less(ranks.size(), nodes)) {
    group.phase = Phase::kPending;
    group.scheduledAt.reset();
    group.message =
        std::to_string(ranks.size()) + " of its " + std::to_string(nodes) + " Pods made so far";
  }
  if (group.phase != Phase::kRunning) {
    group.started.reset();
  }
  if (group.phase == Phase::kQueued) {
    group.scheduledAt.reset();
  }
  return group;
}

bool containerCannotStart(const TrialRunState& state) {
  return std::ranges::find(kCannotStartReasons, state.waitingReason) != kCannotStartReasons.end();
}

std::optional<Timestamp> deadline(const TrialRunState& state, const api::Spec& spec) {
  switch (state.phase) {
    case TrialRunState::Phase::kQueued:
      if (state.created && spec.queueTimeout) {
        return *state.created + spec.queueTimeout->value();
      }
      return std::nullopt;
    case TrialRunState::Phase::kPending:
    case TrialRunState::Phase::kRunning:
      break;
    default:
      return std::nullopt;
  }
  const auto onNode = state.scheduledAt ? state.scheduledAt : state.created;
  if (onNode && (!state.started || containerCannotStart(state))) {
    return *onNode + spec.schedulingTimeout.value();
  }
  if (state.started) {
    return *state.started + spec.trialTimeout.value();
  }
  return std::nullopt;
}

std::optional<std::string> notMeasured(const TrialRunState& state, const api::Spec& spec,
                                       Timestamp now) {
  // Until it starts, or while its container cannot start, a trial on its node has its scheduling
  // timeout for a deadline.
  const auto due = deadline(state, spec);
  if (state.phase != TrialRunState::Phase::kPending ||
      (state.started && !containerCannotStart(state)) || !due || now < *due) {
    return std::nullopt;
  }
  std::string reason = "its container could not start within spec.schedulingTimeout";
  if (!state.message.empty()) {
    reason += ": " + state.message;
  }
  return reason;
}

std::optional<std::string> queueTimedOut(const TrialRunState& state, const api::Spec& spec,
                                         Timestamp now) {
  const auto due = deadline(state, spec);
  if (state.phase != TrialRunState::Phase::kQueued || !due || now < *due) {
    return std::nullopt;
  }
  std::string reason = "queued longer than spec.queueTimeout (" + spec.queueTimeout->text() + ")";
  if (!state.message.empty()) {
    reason += ": " + state.message;
  }
  return reason;
}

bool shouldRelaunch(const TrialRunState& state) {
  if (state.phase != TrialRunState::Phase::kLost &&
      state.phase != TrialRunState::Phase::kNotMeasured) {
    return false;
  }
  return state.preempted ? state.preemptions < kMaxPreemptions
                         : state.relaunchesSpent() < kMaxRelaunches;
}

bool removable(const TrialRunState& state, const api::Spec& spec) {
  return state.phase != TrialRunState::Phase::kFinished || spec.cleanup != api::Cleanup::kKeep;
}

std::optional<TrialResult> resultOf(const TrialRunState& state, const api::Spec& spec,
                                    Timestamp now) {
  using Phase = TrialRunState::Phase;
  const Timestamp started =
      state.containerStarted.value_or(state.started.value_or(state.created.value_or(now)));
  switch (state.phase) {
    case Phase::kFinished: {
      const bool profiling = state.trialName == tuning::kProfileTrialName;
      return tuning::recordExit(
          state.trialName, state.space, state.exit, spec, profiling, formatTime(started),
          state.containerFinished ? secondsBetween(started, *state.containerFinished) : 0);
    }
    case Phase::kLost:
      if (shouldRelaunch(state)) {
        return std::nullopt;
      }
      return TrialResult{
          recordOf(state, api::Outcome::kFailed,
                   state.preempted ? "preempted " + std::to_string(state.preemptions + 1) +
                                         " times, last: " + state.message
                                   : "lost on " + std::to_string(state.relaunchesSpent() + 1) +
                                         " attempts, last: " + state.message,
                   started, 0),
          std::nullopt};
    case Phase::kNotMeasured:
    case Phase::kQueued:
      return std::nullopt;
    case Phase::kPending:
    case Phase::kRunning:
      break;
  }
  const auto due = deadline(state, spec);
  if (!due || now < *due || !state.started || containerCannotStart(state)) {
    return std::nullopt;  // in time, or not measured: notMeasured says so
  }
  tuning::TrialExit exit;
  exit.timedOut = true;
  std::string reason = tuning::classify(exit, spec.search.metric, false).reason;
  if (state.phase == Phase::kPending && !state.message.empty()) {
    reason += "; its container was waiting: " + state.message;
  }
  return TrialResult{
      recordOf(state, api::Outcome::kTimedOut, reason, started, secondsBetween(started, now)),
      std::nullopt};
}

}  // namespace autotune::controller
