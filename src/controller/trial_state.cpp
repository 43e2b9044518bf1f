#include "controller/trial_state.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <utility>

#include "controller/trial_pod.h"
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

// Why the Pod is lost, if it is: something outside the trial stopped it or is about to.
std::optional<std::string> lostReason(const Pod& pod, const ContainerStatus::Terminated* terminated,
                                      const NodeNames& goneNodes) {
  if (pod.phase == "Unknown") {
    return joined("node not reporting", pod.message);
  }
  if (pod.disruption && pod.disruption->status == "True") {
    return joined(pod.disruption->reason, pod.disruption->message);
  }
  if (std::ranges::find(kLostReasons, pod.reason) != kLostReasons.end()) {
    return joined(pod.reason, pod.message);
  }
  if (terminated != nullptr && terminated->reason == "ContainerStatusUnknown") {
    return joined("ContainerStatusUnknown", terminated->message);
  }
  if (goneNodes.contains(pod.nodeName)) {
    return "node " + pod.nodeName + " is gone";
  }
  if (pod.deleting &&
      !endedBeforeDeletion(pod, terminated != nullptr ? terminated->finishedAt : std::nullopt)) {
    return std::string("deleted before the trial ended");
  }
  if (terminated == nullptr && pod.finished()) {
    return joined(pod.phase + " without running the trial", joined(pod.reason, pod.message));
  }
  return std::nullopt;
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

int attemptOf(const std::string& value) {
  int attempt = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), attempt);
  return error == std::errc() && end == value.data() + value.size() && attempt > 0 ? attempt : 0;
}

double secondsBetween(Timestamp from, Timestamp to) {
  return std::max(0.0, std::chrono::duration<double>(to - from).count());
}

api::TrialRecord recordOf(const TrialPodState& state, api::Outcome outcome, std::string_view reason,
                          Timestamp start, double seconds) {
  return {state.trialName,   state.space, outcome, std::nullopt, tuning::boundedReason(reason),
          formatTime(start), seconds,     {}};
}

}  // namespace

tl::expected<TrialPodState, std::string> observe(const Pod& pod, const api::Spec& spec,
                                                 const NodeNames& goneNodes) {
  TrialPodState state;
  state.podName = pod.name;
  state.trialName = pod.trialName;
  if (state.trialName.empty()) {
    return tl::make_unexpected("pod " + state.podName + " has no " +
                               std::string(kTrialNameAnnotation) + " annotation");
  }
  state.space = pod.space;
  state.trialJob = pod.trialJob;
  state.rank = pod.completionIndex;
  state.attempt = attemptOf(pod.attemptText);
  state.created = pod.created;
  state.started = pod.started;
  if (pod.scheduled) {
    state.scheduled = pod.scheduled->status == "True";
    state.unschedulable =
        pod.scheduled->status == "False" && pod.scheduled->reason == "Unschedulable";
    if (state.unschedulable) {
      state.message = pod.scheduled->message;
    }
  }
  state.scheduled = state.scheduled || !pod.nodeName.empty();

  const ContainerStatus* primary = primaryStatus(pod, spec);
  const ContainerStatus::Terminated* terminated =
      primary != nullptr && primary->terminated ? &*primary->terminated : nullptr;
  const bool endedCleanly = terminated != nullptr && terminated->exitCode == 0;
  if (!endedCleanly) {
    if (auto reason = lostReason(pod, terminated, goneNodes)) {
      state.phase = TrialPodState::Phase::kLost;
      state.message = std::move(*reason);
      return state;
    }
  }
  if (terminated != nullptr) {
    state.phase = TrialPodState::Phase::kFinished;
    state.exit = trialExit(*terminated);
    state.containerStarted = terminated->startedAt;
    state.containerFinished = terminated->finishedAt;
    return state;
  }
  if (pod.phase == "Running") {
    state.phase = TrialPodState::Phase::kRunning;
    return state;
  }
  state.phase = TrialPodState::Phase::kPending;
  if (primary != nullptr && primary->waiting) {
    state.waitingReason = primary->waiting->reason;
    state.message = joined(primary->waiting->reason, primary->waiting->message);
  }
  return state;
}

TrialPodState combineRanks(const std::vector<TrialPodState>& ranks, const api::Spec& spec) {
  using Phase = TrialPodState::Phase;
  if (ranks.empty()) {
    return {};
  }
  const auto renamed = [&](TrialPodState state) {
    state.podName = state.trialJob;
    return state;
  };
  const auto endedBadly = [](const TrialPodState& state) {
    return state.phase == Phase::kFinished && state.exit.exitCode != 0;
  };
  const TrialPodState* failed = nullptr;
  for (const auto& state : ranks) {
    if (!endedBadly(state)) {
      continue;
    }
    const bool profiling = state.trialName == tuning::kProfileTrialName;
    if (tuning::classify(state.exit, spec.search.metric, profiling).outcome == api::Outcome::kOOM) {
      return renamed(state);
    }
    if (failed == nullptr || state.containerFinished < failed->containerFinished) {
      failed = &state;
    }
  }
  if (failed != nullptr) {
    return renamed(*failed);
  }
  const auto rankZero = std::ranges::find(ranks, std::string("0"), &TrialPodState::rank);
  if (rankZero != ranks.end() && rankZero->phase == Phase::kFinished) {
    return renamed(*rankZero);
  }
  if (const auto lost = std::ranges::find(ranks, Phase::kLost, &TrialPodState::phase);
      lost != ranks.end()) {
    TrialPodState state = renamed(*lost);
    state.message = "its Pod " + lost->podName + " was lost: " + lost->message;
    return state;
  }
  TrialPodState group = renamed(rankZero != ranks.end() ? *rankZero : ranks.front());
  group.phase = Phase::kRunning;
  group.scheduled = true;
  group.message.clear();
  group.waitingReason.clear();
  const auto earliest = [](std::optional<Timestamp>& kept, const std::optional<Timestamp>& time) {
    if (time && (!kept || *time < *kept)) {
      kept = time;
    }
  };
  for (const auto& state : ranks) {
    earliest(group.created, state.created);
    group.scheduled = group.scheduled && state.scheduled;
    group.unschedulable = group.unschedulable || state.unschedulable;
    if (group.message.empty() && !state.message.empty()) {
      group.message = state.podName + ": " + state.message;
      group.waitingReason = state.waitingReason;
    }
    if (state.phase == Phase::kPending) {
      group.phase = Phase::kPending;
    }
    if (!state.started || (group.started && *state.started > *group.started)) {
      group.started = state.started;  // the last to start; none while one has not
    }
  }
  const int nodes = spec.resources.nodesPerTrial;
  if (std::cmp_less(ranks.size(), nodes)) {
    group.phase = Phase::kPending;
    group.started.reset();
    if (group.message.empty()) {
      group.message = std::to_string(ranks.size()) + " of its " + std::to_string(nodes) +
                      " Pods created so far";
    }
  }
  if (group.phase == Phase::kPending) {
    group.started.reset();
  }
  return group;
}

bool containerCannotStart(const TrialPodState& state) {
  return std::ranges::find(kCannotStartReasons, state.waitingReason) != kCannotStartReasons.end();
}

std::optional<Timestamp> deadline(const TrialPodState& state, const api::Spec& spec) {
  if (state.phase != TrialPodState::Phase::kPending &&
      state.phase != TrialPodState::Phase::kRunning) {
    return std::nullopt;
  }
  if (state.created && (!state.started || containerCannotStart(state))) {
    return *state.created + spec.schedulingTimeout.value();
  }
  if (state.started) {
    return *state.started + spec.trialTimeout.value();
  }
  return std::nullopt;
}

std::optional<std::string> notMeasured(const TrialPodState& state, const api::Spec& spec,
                                       Timestamp now) {
  // Until it starts, or while its container cannot start, a pending trial's deadline is its
  // scheduling timeout.
  const auto due = deadline(state, spec);
  if (state.phase != TrialPodState::Phase::kPending ||
      (state.started && !containerCannotStart(state)) || !due || now < *due) {
    return std::nullopt;
  }
  std::string reason = state.scheduled ? "its container could not start" : "not scheduled";
  reason += " within spec.schedulingTimeout";
  if (!state.message.empty()) {
    reason += ": " + state.message;
  }
  return reason;
}

bool shouldRelaunch(const TrialPodState& state) {
  return (state.phase == TrialPodState::Phase::kLost ||
          state.phase == TrialPodState::Phase::kNotMeasured) &&
         state.attempt < kMaxRelaunches;
}

std::optional<TrialConclusion> conclude(const TrialPodState& state, const api::Spec& spec,
                                        Timestamp now) {
  using Phase = TrialPodState::Phase;
  const Timestamp started =
      state.containerStarted.value_or(state.started.value_or(state.created.value_or(now)));
  switch (state.phase) {
    case Phase::kFinished: {
      const bool profiling = state.trialName == tuning::kProfileTrialName;
      const tuning::Classification result =
          tuning::classify(state.exit, spec.search.metric, profiling);
      api::TrialRecord record =
          recordOf(state, result.outcome, result.reason, started,
                   state.containerFinished ? secondsBetween(started, *state.containerFinished) : 0);
      record.value = result.value;
      record.metrics = tuning::recordedMetrics(state.exit, result);
      return TrialConclusion{std::move(record), result.measured};
    }
    case Phase::kLost:
      if (shouldRelaunch(state)) {
        return std::nullopt;
      }
      return TrialConclusion{recordOf(state, api::Outcome::kFailed,
                                      "lost on " + std::to_string(state.attempt + 1) +
                                          " attempts, last: " + state.message,
                                      started, 0),
                             std::nullopt};
    case Phase::kNotMeasured:
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
  return TrialConclusion{
      recordOf(state, api::Outcome::kTimedOut, reason, started, secondsBetween(started, now)),
      std::nullopt};
}

}  // namespace autotune::controller
