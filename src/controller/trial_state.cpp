#include "controller/trial_state.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "controller/json_fields.h"
#include "controller/trial_pod.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

// The kubelet keeps at most this much of a termination message.
constexpr std::size_t kMessageBytes = 4096;

// Pod status reasons of a Pod stopped from outside: kubelet eviction, node shutdown, a node
// that stopped reporting, preemption.
constexpr std::array<std::string_view, 6> kLostReasons = {"Evicted",  "NodeLost",     "Terminated",
                                                          "Shutdown", "NodeShutdown", "Preempting"};

std::optional<int> digits(std::string_view text, std::size_t position, std::size_t count) {
  if (position + count > text.size()) {
    return std::nullopt;
  }
  int value = 0;
  const char* first = text.data() + position;
  const auto [end, error] = std::from_chars(first, first + count, value);
  if (error != std::errc() || end != first + count || *first == '-' || *first == '+') {
    return std::nullopt;
  }
  return value;
}

std::optional<Timestamp> timeAt(const json& object, std::string_view key) {
  return parseTime(text(object, key));
}

const json* condition(const json& status, std::string_view type) {
  for (const auto& entry : member(status, "conditions")) {
    if (text(entry, "type") == type) {
      return &entry;
    }
  }
  return nullptr;
}

std::string joined(std::string_view reason, std::string_view message) {
  if (reason.empty() || message.empty()) {
    return std::string(reason.empty() ? message : reason);
  }
  return std::string(reason) + ": " + std::string(message);
}

// The primary container's status: spec.primaryContainer, else the Pod's first container.
const json& primaryStatus(const json& pod, const api::Spec& spec) {
  std::string name = spec.primaryContainer;
  if (name.empty()) {
    const json& containers = member(member(pod, "spec"), "containers");
    if (containers.is_array() && !containers.empty()) {
      name = text(containers.front(), "name");
    }
  }
  for (const auto& status : member(member(pod, "status"), "containerStatuses")) {
    if (text(status, "name") == name) {
      return status;
    }
  }
  return missing();
}

// The container ended before anyone asked the Pod to go: deletionTimestamp is when the grace
// period of the deletion ends.
bool endedBeforeDeletion(const json& metadata, const std::optional<Timestamp>& finished) {
  const auto deletion = timeAt(metadata, "deletionTimestamp");
  const json& grace = member(metadata, "deletionGracePeriodSeconds");
  if (!deletion || !finished || !grace.is_number_integer()) {
    return false;
  }
  // Within a year either way, so that the arithmetic cannot overflow on a value no API server sets.
  constexpr std::int64_t kYear = 365LL * 24 * 3600;
  const std::int64_t seconds = std::clamp<std::int64_t>(grace.get<std::int64_t>(), 0, kYear);
  return *finished < *deletion - std::chrono::seconds(seconds);
}

// Why the Pod is lost, if it is: something outside the trial stopped it or is about to.
std::optional<std::string> lostReason(const json& pod, const json& terminated,
                                      const std::optional<NodeNames>& nodes) {
  const json& metadata = member(pod, "metadata");
  const json& status = member(pod, "status");
  const std::string phase = text(status, "phase");
  if (phase == "Unknown") {
    return joined("node not reporting", text(status, "message"));
  }
  if (const json* disruption = condition(status, "DisruptionTarget");
      disruption != nullptr && text(*disruption, "status") == "True") {
    return joined(text(*disruption, "reason"), text(*disruption, "message"));
  }
  const std::string reason = text(status, "reason");
  if (std::ranges::find(kLostReasons, reason) != kLostReasons.end()) {
    return joined(reason, text(status, "message"));
  }
  if (text(terminated, "reason") == "ContainerStatusUnknown") {
    return joined("ContainerStatusUnknown", text(terminated, "message"));
  }
  const std::string node = text(member(pod, "spec"), "nodeName");
  if (nodes && !node.empty() && !nodes->contains(node)) {
    return "node " + node + " is gone";
  }
  if (member(metadata, "deletionTimestamp").is_string() &&
      !endedBeforeDeletion(metadata, timeAt(terminated, "finishedAt"))) {
    return std::string("deleted before the trial ended");
  }
  if (terminated.is_null() && (phase == "Succeeded" || phase == "Failed")) {
    return joined(phase + " without running the trial", joined(reason, text(status, "message")));
  }
  return std::nullopt;
}

tuning::TrialExit trialExit(const json& terminated) {
  tuning::TrialExit exit;
  const json& code = member(terminated, "exitCode");
  exit.exitCode = code.is_number_integer() ? code.get<int>() : -1;
  if (const json& signal = member(terminated, "signal");
      signal.is_number_integer() && signal.get<int>() != 0) {
    exit.signal = signal.get<int>();
  }
  const std::string reason = text(terminated, "reason");
  exit.oomKilled = reason == "OOMKilled";
  std::string message = text(terminated, "message");
  if (exit.exitCode == 0) {
    if (!message.empty()) {
      exit.metrics = std::move(message);
    }
    return exit;
  }
  if (message.empty() && reason != "Error") {
    message = reason;
  }
  exit.message = tuning::tail(message, kMessageBytes);
  return exit;
}

int attemptOf(const json& annotations) {
  const std::string value = text(annotations, kAttemptAnnotation);
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
          formatTime(start), seconds};
}

}  // namespace

std::optional<Timestamp> parseTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS
  constexpr std::size_t kSecondsEnd = 19;
  if (text.size() < kSecondsEnd + 1 || text[4] != '-' || text[7] != '-' ||
      (text[10] != 'T' && text[10] != 't') || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  const auto year = digits(text, 0, 4);
  const auto month = digits(text, 5, 2);
  const auto day = digits(text, 8, 2);
  const auto hour = digits(text, 11, 2);
  const auto minute = digits(text, 14, 2);
  const auto second = digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || *hour > 23 || *minute > 59 ||
      *second > 59) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year(*year),
                                         std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) {
    return std::nullopt;
  }
  std::size_t position = kSecondsEnd;
  std::chrono::nanoseconds fraction{0};
  if (text[position] == '.') {
    ++position;
    const std::size_t start = position;
    std::int64_t scale = 1'000'000'000;
    while (position < text.size() && text[position] >= '0' && text[position] <= '9') {
      scale /= 10;
      fraction += std::chrono::nanoseconds((text[position] - '0') * scale);
      ++position;
    }
    if (position == start) {
      return std::nullopt;
    }
  }
  std::chrono::minutes offset{0};
  const std::string_view zone = text.substr(position);
  if (zone == "Z" || zone == "z") {
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    const auto hours = digits(zone, 1, 2);
    const auto minutes = digits(zone, 4, 2);
    if (!hours || !minutes || *hours > 23 || *minutes > 59) {
      return std::nullopt;
    }
    offset = std::chrono::hours(*hours) + std::chrono::minutes(*minutes);
    if (zone[0] == '-') {
      offset = -offset;
    }
  } else {
    return std::nullopt;
  }
  const auto local = std::chrono::sys_days(date) + std::chrono::hours(*hour) +
                     std::chrono::minutes(*minute) + std::chrono::seconds(*second) - offset;
  // A nanosecond clock spans the years 1678 to 2261; anything beyond is not a time to act on.
  constexpr auto kRange =
      std::chrono::duration_cast<std::chrono::seconds>(Timestamp::duration::max()) -
      std::chrono::days(1);
  if (local.time_since_epoch() > kRange || local.time_since_epoch() < -kRange) {
    return std::nullopt;
  }
  return std::chrono::time_point_cast<Timestamp::duration>(local) +
         std::chrono::duration_cast<Timestamp::duration>(fraction);
}

std::string formatTime(Timestamp time) {
  const auto seconds = std::chrono::floor<std::chrono::seconds>(time);
  const auto days = std::chrono::floor<std::chrono::days>(seconds);
  const std::chrono::year_month_day date(days);
  const std::chrono::hh_mm_ss clock(seconds - days);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(time - seconds).count();
  std::array<char, 40> buffer{};
  const int length = std::snprintf(
      buffer.data(), buffer.size(), "%04d-%02u-%02uT%02d:%02d:%02d", static_cast<int>(date.year()),
      static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
      static_cast<int>(clock.hours().count()), static_cast<int>(clock.minutes().count()),
      static_cast<int>(clock.seconds().count()));
  std::string result(buffer.data(), static_cast<std::size_t>(length));
  if (millis != 0) {
    std::snprintf(buffer.data(), buffer.size(), ".%03d", static_cast<int>(millis));
    result += buffer.data();
  }
  return result + "Z";
}

tl::expected<TrialPodState, std::string> observe(const json& pod, const api::Spec& spec,
                                                 const std::optional<NodeNames>& nodes) {
  const json& metadata = member(pod, "metadata");
  const json& status = member(pod, "status");
  TrialPodState state;
  state.podName = text(metadata, "name");
  state.trialName = text(member(metadata, "annotations"), kTrialNameAnnotation);
  if (state.trialName.empty()) {
    return tl::make_unexpected("pod " + state.podName + " has no " +
                               std::string(kTrialNameAnnotation) + " annotation");
  }
  state.space = text(member(metadata, "labels"), kSpaceLabel);
  state.attempt = attemptOf(member(metadata, "annotations"));
  state.created = timeAt(metadata, "creationTimestamp");
  state.started = timeAt(status, "startTime");
  if (const json* scheduled = condition(status, "PodScheduled")) {
    state.scheduled = text(*scheduled, "status") == "True";
    state.unschedulable =
        text(*scheduled, "status") == "False" && text(*scheduled, "reason") == "Unschedulable";
    if (state.unschedulable) {
      state.message = text(*scheduled, "message");
    }
  }
  state.scheduled = state.scheduled || !text(member(pod, "spec"), "nodeName").empty();

  const json& containerState = member(primaryStatus(pod, spec), "state");
  const json& terminated = member(containerState, "terminated");
  const bool ended = terminated.is_object();
  const bool endedCleanly = ended && member(terminated, "exitCode") == 0;
  if (!endedCleanly) {
    if (auto reason = lostReason(pod, terminated, nodes)) {
      state.phase = TrialPodState::Phase::kLost;
      state.message = std::move(*reason);
      return state;
    }
  }
  if (ended) {
    state.phase = TrialPodState::Phase::kFinished;
    state.exit = trialExit(terminated);
    state.containerStarted = timeAt(terminated, "startedAt");
    state.containerFinished = timeAt(terminated, "finishedAt");
    return state;
  }
  if (text(status, "phase") == "Running") {
    state.phase = TrialPodState::Phase::kRunning;
    return state;
  }
  state.phase = TrialPodState::Phase::kPending;
  if (const json& waiting = member(containerState, "waiting"); waiting.is_object()) {
    state.message = joined(text(waiting, "reason"), text(waiting, "message"));
  }
  return state;
}

std::optional<Timestamp> deadline(const TrialPodState& state, const api::Spec& spec) {
  if (state.phase != TrialPodState::Phase::kPending &&
      state.phase != TrialPodState::Phase::kRunning) {
    return std::nullopt;
  }
  if (state.started) {
    return *state.started + spec.trialTimeout.value();
  }
  if (state.created) {
    return *state.created + spec.schedulingTimeout.value();
  }
  return std::nullopt;
}

bool shouldRelaunch(const TrialPodState& state) {
  return state.phase == TrialPodState::Phase::kLost && state.attempt < kMaxRelaunches;
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
    case Phase::kPending:
    case Phase::kRunning:
      break;
  }
  const auto due = deadline(state, spec);
  if (!due || now < *due) {
    return std::nullopt;
  }
  if (!state.started) {
    std::string reason = "not scheduled within spec.schedulingTimeout";
    if (!state.message.empty()) {
      reason += ": " + state.message;
    }
    return TrialConclusion{recordOf(state, api::Outcome::kUnschedulable, reason, started, 0),
                           std::nullopt};
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
