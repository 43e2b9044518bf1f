#include "controller/plan.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "api/text.h"
#include "controller/output.h"
#include "controller/trial_pod.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

// False, with the exception, while the job's reconciles throw; True again once one succeeds.
constexpr std::string_view kReconciledCondition = "Reconciled";
// False while the search is over and its output ConfigMap could not be written.
constexpr std::string_view kOutputCondition = "OutputWritten";
constexpr auto kMinRequeue = std::chrono::seconds(1);
// How often a job that waits (for a node that can hold its trials, or for free GPUs) looks again,
// besides the wake-ups Node and Pod changes give it.
constexpr auto kWaitingRecheck = std::chrono::seconds(30);
// How long a status write that would only move trials between pending and running waits for the
// next write that records something, so that Pods starting cost no write each.
constexpr auto kLiveCountsInterval = std::chrono::seconds(30);
// How long a trial that ended waits for others of its job to end, to be recorded with them.
constexpr auto kConclusionBatch = std::chrono::seconds(5);
constexpr std::size_t kEventMessageBytes = 1024;
constexpr std::size_t kConditionMessageBytes = 32768;  // metav1.Condition's bound

bool multiNode(const api::Spec& spec) { return spec.resources.nodesPerTrial > 1; }

// What a trial's attempt runs as: its Pod, or a multi-node trial's batch Job.
std::string trialObjectName(const api::AutotuneJob& job, const std::string& trial, int attempt) {
  return multiNode(job.spec) ? trialJobName(job.name(), trial, attempt)
                             : trialPodName(job.name(), trial, attempt);
}

bool isTerminal(api::Phase phase) {
  return phase == api::Phase::kSucceeded || phase == api::Phase::kFailed;
}

// "path: reason; path: reason", as many as fit in maxBytes, then how many more there are.
std::string listed(const api::FieldErrors& errors, std::size_t maxBytes) {
  constexpr std::size_t kRoomForTheCount = 32;
  std::string message;
  std::size_t shown = 0;
  for (const auto& error : errors) {
    const std::string item = api::format(error);
    if (message.size() + item.size() + 2 > maxBytes - kRoomForTheCount) {
      break;
    }
    message += (message.empty() ? "" : "; ") + item;
    ++shown;
  }
  if (shown < errors.size()) {
    message += (message.empty() ? "" : "; ") + std::string("and ") +
               std::to_string(errors.size() - shown) + " more";
  }
  return api::headOf(message, maxBytes);
}

// Sets a metav1.Condition, keeping its transition time when its status does not change.
void setCondition(api::Status& status, std::string_view type, bool value, const std::string& reason,
                  const std::string& text, Timestamp now, std::int64_t generation) {
  const std::string state = value ? "True" : "False";
  const std::string message = api::headOf(text, kConditionMessageBytes);
  auto& conditions = status.conditions;
  auto found = std::ranges::find(conditions, type, &api::Condition::type);
  if (found == conditions.end()) {
    conditions.push_back({std::string(type), state, reason, message, formatTime(now), generation});
    return;
  }
  if (found->status != state) {
    found->lastTransitionTime = formatTime(now);
  }
  found->status = state;
  found->reason = reason;
  found->message = message;
  found->observedGeneration = generation;
}

bool conditionIs(const api::Status& status, std::string_view type, std::string_view state) {
  return std::ranges::any_of(status.conditions, [&](const api::Condition& c) {
    return c.type == type && c.status == state;
  });
}

std::string eventReasonFor(api::Outcome outcome) {
  switch (outcome) {
    case api::Outcome::kSucceeded:
      return "TrialSucceeded";
    case api::Outcome::kOOM:
      return "TrialOOM";
    default:
      return "TrialFailed";
  }
}

// A Pod of an ended trial goes when it still runs (past its deadline) or was lost; one that
// finished goes unless spec.cleanup is Keep.
bool removable(const TrialPodState& state, const api::Spec& spec) {
  return state.phase != TrialPodState::Phase::kFinished || spec.cleanup != api::Cleanup::kKeep;
}

// --- observe --------------------------------------------------------------------------------

// Trials the written status counts in flight whose Pods are nowhere: deleted before any
// reconcile saw them go, or never created (the API refused the create). Not measured, and nothing
// says it was the config's doing: they run again as their next attempt, never under a Pod name
// already used. A multi-node trial's batch Job that this process created, whose Pods the Job
// controller has yet to make, is pending rather than gone, until its scheduling timeout.
void addVanished(const Cluster& cluster, const api::AutotuneJob& job, Timestamp now,
                 const std::set<std::string>& recorded,
                 std::map<std::string, TrialPodState>& newest) {
  for (const auto& launched : job.status.inFlight) {
    if (recorded.contains(launched.name) || newest.contains(launched.name)) {
      continue;
    }
    TrialPodState state;
    state.phase = TrialPodState::Phase::kNotMeasured;
    state.trialName = launched.name;
    state.attempt = launched.attempt;
    state.podName = trialObjectName(job, launched.name, launched.attempt);
    const bool multi = multiNode(job.spec);
    state.message =
        (multi ? "its Job " : "its Pod ") + state.podName + " is gone: deleted, or never created";
    state.created =
        multi ? cluster.trialJobCreated(job.namespaceName() + "/" + state.podName) : std::nullopt;
    if (state.created) {
      state.phase = TrialPodState::Phase::kPending;
      state.message = "its Pods are not created yet";
      if (auto why = notMeasured(state, job.spec, now)) {
        state.phase = TrialPodState::Phase::kNotMeasured;
        state.message = std::move(*why);
      }
    }
    newest.emplace(launched.name, std::move(state));
  }
}

// A trial's Pods, each as observed, or a multi-node trial's Pods as one state (combineRanks).
struct Observed {
  TrialPodState state;
  bool deleting = false;  // all its Pods are being deleted
};

void observePods(const Cluster& cluster, Snapshot& snapshot) {
  const api::AutotuneJob& job = snapshot.job;
  std::set<std::string> recorded;
  for (const auto& record : job.status.results) {
    recorded.insert(record.name);
  }
  const bool terminal = isTerminal(job.status.phase);
  const auto pods = cluster.podsLabelled(job.namespaceName(), jobLabelValue(job.name()));
  NodeNames bound;
  for (const auto& pod : pods) {
    if (!pod->nodeName.empty() && pod->ownerJobUid == job.uid()) {
      bound.insert(pod->nodeName);
    }
  }
  snapshot.missingNodes = cluster.missingNodes(bound, snapshot.now);
  std::vector<Observed> observed;
  std::map<std::string, Observed> groups;  // by batch Job
  std::map<std::string, std::vector<TrialPodState>> ranks;
  for (const auto& pod : pods) {
    if (pod->ownerJobUid != job.uid()) {
      snapshot.podNamesTaken.insert(pod->trialJob.empty() ? pod->name : pod->trialJob);
      continue;
    }
    auto state = observe(*pod, job.spec, snapshot.missingNodes.gone);
    if (!state) {
      snapshot.unreadable.push_back(state.error());
    } else if (pod->trialJob.empty()) {
      observed.push_back({std::move(*state), pod->deleting});
    } else {
      auto& group = groups.try_emplace(pod->trialJob, Observed{{}, pod->deleting}).first->second;
      group.deleting = group.deleting && pod->deleting;
      ranks[pod->trialJob].push_back(std::move(*state));
    }
  }
  for (auto& [name, group] : groups) {
    group.state = combineRanks(ranks[name], job.spec);
    observed.push_back(std::move(group));
  }
  std::map<std::string, TrialPodState> newest;
  for (auto& [state, deleting] : observed) {
    if (auto why = notMeasured(state, job.spec, snapshot.now)) {
      state.phase = TrialPodState::Phase::kNotMeasured;
      state.message = std::move(*why);
    }
    if (recorded.contains(state.trialName) || terminal) {
      if (removable(state, job.spec) && !deleting) {
        snapshot.stalePods.push_back(state.podName);
      }
      continue;
    }
    auto [entry, inserted] = newest.try_emplace(state.trialName, state);
    if (!inserted && entry->second.attempt < state.attempt) {
      snapshot.stalePods.push_back(entry->second.podName);
      entry->second = std::move(state);
    } else if (!inserted) {
      snapshot.stalePods.push_back(state.podName);
    }
  }
  if (!terminal) {
    addVanished(cluster, job, snapshot.now, recorded, newest);
  }
  for (auto& [trial, state] : newest) {
    if (auto conclusion = conclude(state, job.spec, snapshot.now)) {
      snapshot.concluded.push_back({std::move(state), std::move(*conclusion)});
    } else {
      snapshot.inFlight.push_back(std::move(state));
    }
  }
  // In the order the trials started, so that a restart records them the same way.
  std::ranges::sort(snapshot.concluded, [](const Concluded& a, const Concluded& b) {
    return std::tie(a.conclusion.record.startTime, a.conclusion.record.name) <
           std::tie(b.conclusion.record.startTime, b.conclusion.record.name);
  });
}

// --- plan -----------------------------------------------------------------------------------

// One plan in the making: the status changes step by step, and what is to be done accumulates.
class Planner {
 public:
  Planner(const Snapshot& snapshot, const tuning::Decision& decision)
      : snapshot_(snapshot),
        decision_(decision),
        spec_(snapshot.job.spec),
        slots_(slotsOf(snapshot)) {
    plan_.status = snapshot.job.status;
    inFlight_ = snapshot.inFlight;
  }

  Plan make() && {
    decide();
    awaitMissingNodes();
    return std::move(plan_);
  }

 private:
  api::Status& status() { return plan_.status; }

  void decide() {
    if (holdsConclusions()) {
      return;
    }
    recordConcluded();
    if (isTerminal(status().phase)) {
      plan_.status = snapshot_.job.status;
      return;
    }
    relaunchLost();
    if (const auto unmeasured = std::ranges::find_if(inFlight_, exhaustedUnmeasured);
        unmeasured != inFlight_.end()) {
      failNotMeasured(*unmeasured);
      return;
    }
    if (decision_.state == tuning::Decision::State::kContinue && slots_.schedulable) {
      launch();
    }
    if (decision_.state != tuning::Decision::State::kContinue && inFlight_.empty()) {
      conclude();
    } else {
      progress();
    }
  }

  // Trials on a node the Node cache lacks run on while the API server is asked about it.
  void awaitMissingNodes() {
    if (snapshot_.missingNodes.awaited.empty() || isTerminal(status().phase)) {
      return;
    }
    plan_.nodesToLookUp = snapshot_.missingNodes.toLookUp;
    requeueWithin(kNodeRecheck);
  }

  // Trials that ended while others of the job run on, and whose results start nothing new, wait
  // a little for those that end about the same time: one status write and one Event then record
  // them all. Nothing is lost meanwhile: their Pods stay until the status holds them.
  bool holdsConclusions() {
    if (snapshot_.concluded.empty() || isTerminal(status().phase) || inFlight_.empty() ||
        decision_.state != tuning::Decision::State::kContinue || !decision_.launch.empty() ||
        std::ranges::any_of(inFlight_, shouldRelaunch) ||
        std::ranges::any_of(inFlight_, exhaustedUnmeasured)) {
      return false;
    }
    std::optional<Timestamp> earliest;
    for (const auto& [state, conclusion] : snapshot_.concluded) {
      // An end after now means the node's clock runs ahead: waiting on it could last that long.
      if (!state.containerFinished || *state.containerFinished > snapshot_.now) {
        return false;
      }
      earliest = std::min(earliest.value_or(*state.containerFinished), *state.containerFinished);
    }
    const Timestamp due = *earliest + kConclusionBatch;
    if (snapshot_.now >= due) {
      return false;
    }
    plan_.deletions = snapshot_.stalePods;
    requeueWithin(due - snapshot_.now);
    return true;
  }

  void recordConcluded() {
    for (const auto& [state, conclusion] : snapshot_.concluded) {
      if (state.created && state.containerStarted) {
        plan_.pendingWaits.emplace_back(*state.containerStarted - *state.created);
      }
      status().results.push_back(conclusion.record);
      plan_.finished.push_back(conclusion.record);
      if (conclusion.measured) {
        status().model = conclusion.measured;
      }
      if (removable(state, spec_)) {
        plan_.deletions.push_back(state.podName);
      }
    }
    for (const auto& name : snapshot_.stalePods) {
      plan_.deletions.push_back(name);
    }
  }

  // Trials whose Pods were evicted or lost with their node, or never started, run again as a new
  // attempt.
  void relaunchLost() {
    for (auto& state : inFlight_) {
      if (!shouldRelaunch(state)) {
        continue;
      }
      const auto trial = std::ranges::find(decision_.trials, state.trialName, &tuning::Trial::name);
      if (trial == decision_.trials.end()) {
        continue;
      }
      PodLaunch relaunch = launchOf(*trial, state.attempt + 1);
      relaunch.replaces = state.podName;
      relaunch.relaunchedBecause = state.message;
      relaunch.relaunch =
          state.phase == TrialPodState::Phase::kLost ? Relaunch::kLost : Relaunch::kNotMeasured;
      plan_.launches.push_back(std::move(relaunch));
      state = pendingAttempt(trial->name, state.attempt + 1);
    }
  }

  // What runs a trial's attempt: its Pod, or a multi-node trial's batch Job and Service.
  PodLaunch launchOf(const tuning::Trial& trial, int attempt) const {
    if (!multiNode(spec_)) {
      return {trial.name, trialPod(snapshot_.job, trial, attempt), std::nullopt, "", "", {}};
    }
    return {trial.name,
            trialJob(snapshot_.job, trial, attempt),
            trialService(snapshot_.job, trial, attempt),
            "",
            "",
            {}};
  }

  // The Pod of a trial's attempt as created now, before any watch reports it.
  TrialPodState pendingAttempt(const std::string& trial, int attempt) const {
    TrialPodState state;
    state.trialName = trial;
    state.attempt = attempt;
    state.podName = trialObjectName(snapshot_.job, trial, attempt);
    state.created = snapshot_.now;
    return state;
  }

  static bool exhaustedUnmeasured(const TrialPodState& state) {
    return state.phase == TrialPodState::Phase::kNotMeasured && !shouldRelaunch(state);
  }

  // A trial that never started on any of its attempts: nothing is known of its config, and the
  // search cannot go on without it. The job fails, saying why; its results stay.
  void failNotMeasured(const TrialPodState& state) {
    fillCommon();
    api::Status& written = status();
    written.message = "trial " + state.trialName + " was not measured in " +
                      std::to_string(state.attempt + 1) + " attempts, the last " + state.message +
                      "; nothing is known of its config, so the search cannot go on: remove the "
                      "cause and create the job again";
    written.phase = api::Phase::kFailed;
    written.completionTime = formatTime(snapshot_.now);
    written.trials.pending = 0;
    written.trials.running = 0;
    written.inFlight.clear();
    setRunning(false, "Failed", written.message);
    setCondition(written, "Failed", true, "TrialNotMeasured", written.message, snapshot_.now,
                 snapshot_.generation);
    plan_.events.push_back({"TrialNotMeasured", "Warning", state.trialName, written.message});
    plan_.deletions.push_back(state.podName);
  }

  void launch() {
    for (const auto& trial : decision_.launch) {
      const std::string podName = trialObjectName(snapshot_.job, trial.name, 0);
      if (snapshot_.podNamesTaken.contains(podName)) {
        recordTaken(trial, podName);
        continue;
      }
      plan_.launches.push_back(launchOf(trial, 0));
      inFlight_.push_back(pendingAttempt(trial.name, 0));
    }
  }

  // A trial whose Pod name a Pod this job does not own holds is neither adopted nor deleted: it is
  // recorded Failed, saying so, and the search moves on.
  void recordTaken(const tuning::Trial& trial, const std::string& podName) {
    api::TrialRecord record;
    record.name = trial.name;
    record.space = trial.space;
    record.outcome = api::Outcome::kFailed;
    record.reason = (multiNode(spec_) ? "Job " : "Pod ") + podName +
                    " exists and is not this job's; it is neither adopted nor deleted: delete it "
                    "to run this trial";
    record.startTime = formatTime(snapshot_.now);
    status().results.push_back(record);
    plan_.finished.push_back(std::move(record));
  }

  void progress() {
    fillCommon();
    bool profiling = false;
    int pending = 0;
    int running = 0;
    std::string unschedulable;
    std::string cannotStart;
    for (const auto& state : inFlight_) {
      profiling |= state.trialName == tuning::kProfileTrialName;
      if (state.phase == TrialPodState::Phase::kRunning) {
        ++running;
      } else {
        ++pending;
        if (state.unschedulable) {
          unschedulable = state.podName + ": " + state.message;
        } else if (containerCannotStart(state)) {
          cannotStart = state.podName + ": " + state.message;
        }
      }
    }
    status().trials.pending = pending;
    status().trials.running = running;
    if (profiling) {
      status().phase = api::Phase::kProfiling;
    } else if (!inFlight_.empty() || !status().results.empty()) {
      status().phase = api::Phase::kRunning;
    } else {
      status().phase = api::Phase::kPending;
    }

    if (!slots_.schedulable) {
      status().message = unschedulableBecause();
      setRunning(false, "Unschedulable", status().message);
      plan_.requeueAfter = std::chrono::duration_cast<runtime::Duration>(kWaitingRecheck);
      return;
    }
    if (!unschedulable.empty()) {
      status().message = "a trial cannot be scheduled: " + unschedulable;
      setRunning(inFlight_.size() > static_cast<std::size_t>(pending), "Unschedulable",
                 status().message);
    } else if (!cannotStart.empty()) {
      status().message = "a trial's container cannot start: " + cannotStart;
      setRunning(inFlight_.size() > static_cast<std::size_t>(pending), "ContainerCannotStart",
                 status().message);
    } else if (wantedMoreSlots()) {
      status().message = "waiting for free nvidia.com/gpu slots";
      setRunning(true, "WaitingForGPUs", status().message);
    } else {
      status().message = decision_.message;
      setRunning(true, "Searching", "trials in flight: " + std::to_string(inFlight_.size()));
    }
    plan_.requeueAfter = nextDeadline();
    if (wantedMoreSlots()) {
      requeueWithin(kWaitingRecheck);
    }
    holdBackLiveCounts();
  }

  std::string unschedulableBecause() const {
    const int gpus = spec_.resources.gpusPerTrial;
    const int nodes = spec_.resources.nodesPerTrial;
    if (nodes > 1) {
      const auto enough = std::ranges::count_if(
          snapshot_.capacity.nodes,
          [&](const NodeGpus& node) { return node.allocatable >= gpus / nodes; });
      return "fewer than " + std::to_string(nodes) +
             " schedulable nodes (spec.resources.nodesPerTrial) have " +
             std::to_string(gpus / nodes) +
             " allocatable nvidia.com/gpu (spec.resources.gpusPerTrial / nodesPerTrial); " +
             std::to_string(enough) + " have";
    }
    int largest = 0;
    for (const auto& node : snapshot_.capacity.nodes) {
      largest = std::max(largest, node.allocatable);
    }
    return "no schedulable node has " + std::to_string(gpus) +
           " allocatable nvidia.com/gpu (spec.resources.gpusPerTrial); the largest has " +
           std::to_string(largest);
  }

  void requeueWithin(std::chrono::system_clock::duration limit) {
    const auto within = std::chrono::duration_cast<runtime::Duration>(
        std::max<std::chrono::system_clock::duration>(limit, kMinRequeue));
    plan_.requeueAfter = std::min(plan_.requeueAfter.value_or(within), within);
  }

  // Keeps the written pending and running counts while they are all that changed and the last
  // status write is recent; the reconcile due when the interval ends writes them.
  void holdBackLiveCounts() {
    const api::Status& written = snapshot_.job.status;
    if (!snapshot_.statusWrittenAt || status().trials == written.trials) {
      return;
    }
    const auto due = *snapshot_.statusWrittenAt + kLiveCountsInterval;
    const api::TrialCounts live = status().trials;
    status().trials.pending = written.trials.pending;
    status().trials.running = written.trials.running;
    if (snapshot_.now >= due || status() != written) {
      status().trials = live;
      return;
    }
    requeueWithin(due - snapshot_.now);
  }

  // Whether the engine was held back by GPU slots rather than by parallelism or its own plan.
  bool wantedMoreSlots() const {
    return decision_.state == tuning::Decision::State::kContinue &&
           slots_.byGpus < slots_.byParallelism &&
           static_cast<int>(decision_.launch.size()) >= std::max(0, slots_.byGpus);
  }

  void setRunning(bool value, const std::string& reason, const std::string& message) {
    setCondition(status(), "Running", value, reason, message, snapshot_.now, snapshot_.generation);
  }

  // Status fields every outcome shares.
  void fillCommon() {
    api::Status& written = status();
    written.observedGeneration = snapshot_.generation;
    if (written.startTime.empty()) {
      written.startTime = formatTime(snapshot_.now);
    }
    setCondition(written, "SpecValid", true, "Valid", "the spec is valid", snapshot_.now,
                 snapshot_.generation);
    if (conditionIs(written, kReconciledCondition, "False")) {
      setCondition(written, kReconciledCondition, true, "Recovered", "the reconcile succeeds again",
                   snapshot_.now, snapshot_.generation);
    }
    if (snapshot_.job.status.observedGeneration != snapshot_.generation &&
        !snapshot_.warnings.empty()) {
      plan_.events.push_back({"SpecWarning", "Warning",
                              "generation " + std::to_string(snapshot_.generation),
                              listed(snapshot_.warnings, kEventMessageBytes)});
    }
    api::TrialCounts counts;
    for (const auto& record : written.results) {
      switch (record.outcome) {
        case api::Outcome::kSucceeded:
          ++counts.succeeded;
          break;
        case api::Outcome::kOOM:
          ++counts.oom;
          break;
        case api::Outcome::kTimedOut:
          ++counts.timedOut;
          break;
        default:
          ++counts.failed;
      }
    }
    counts.launched = static_cast<int>(written.results.size() + inFlight_.size());
    written.inFlight.clear();
    for (const auto& state : inFlight_) {
      written.inFlight.push_back({state.trialName, state.attempt});
    }
    counts.pruned = static_cast<int>(decision_.pruned.size());
    written.trials = counts;
    written.spaces = tuning::summarizeSpaces(written.results, spec_.search.metric);
    announceFinished();
    const std::string previousBest = written.best ? written.best->trial : "";
    if (decision_.best && decision_.bestValue) {
      written.best = tuning::bestTrial(*decision_.best, *decision_.bestValue, spec_.search.metric,
                                       tuning::baselineValue(written.results), spec_.resources);
      if (written.best->trial != previousBest) {
        plan_.events.push_back({"BestImproved", "Normal", written.best->trial,
                                "Best so far: " + written.best->trial + " with " +
                                    std::string(api::toString(spec_.search.metric)) + " " +
                                    tuning::formatMetricValue(written.best->value)});
      }
    }
  }

  // One Event per outcome for the trials this reconcile records.
  void announceFinished() {
    std::map<api::Outcome, std::vector<std::pair<std::string, std::string>>> byOutcome;
    for (const auto& finished : plan_.finished) {
      std::string detail;
      if (finished.value) {
        detail = std::string(api::toString(spec_.search.metric)) + " " +
                 tuning::formatMetricValue(*finished.value);
      } else if (!finished.reason.empty()) {
        detail = tuning::tail(finished.reason, 512);
      }
      byOutcome[finished.outcome].emplace_back(finished.name, std::move(detail));
    }
    for (const auto& [outcome, trials] : byOutcome) {
      plan_.events.push_back(aboutTrials(eventReasonFor(outcome),
                                         outcome == api::Outcome::kSucceeded ? "Normal" : "Warning",
                                         "ended " + std::string(api::toString(outcome)), trials));
    }
  }

  std::optional<runtime::Duration> nextDeadline() const {
    std::optional<Timestamp> soonest;
    for (const auto& state : inFlight_) {
      if (const auto due = deadline(state, spec_); due && (!soonest || *due < *soonest)) {
        soonest = due;
      }
    }
    if (!soonest) {
      return std::nullopt;
    }
    return std::chrono::duration_cast<runtime::Duration>(
        std::max<std::chrono::system_clock::duration>(
            *soonest - snapshot_.now + std::chrono::milliseconds(100), kMinRequeue));
  }

  // The end of the search: the output, then the final status.
  void conclude() {
    fillCommon();
    api::Status& written = status();
    written.trials.pending = 0;
    written.trials.running = 0;
    written.message = decision_.message;
    const bool succeeded =
        decision_.state == tuning::Decision::State::kSucceeded && decision_.best.has_value();
    const std::string& configMap = spec_.output.configMapName;
    if (succeeded) {
      const double elapsed =
          std::chrono::duration<double>(snapshot_.now -
                                        parseTime(written.startTime).value_or(snapshot_.now))
              .count();
      api::AutotuneJob recorded = snapshot_.job;
      recorded.status = written;  // with the trials this reconcile records
      plan_.output =
          Output{outputConfigMap(recorded, *decision_.best, decision_.trials, elapsed), written};
      setCondition(written, kOutputCondition, true, "Written", "ConfigMap " + configMap,
                   snapshot_.now, snapshot_.generation);
      if (spec_.afterTuning) {
        plan_.afterTuning = afterTuningJob(snapshot_.job, *decision_.best);
        written.afterTuningJob = afterTuningJobName(snapshot_.job.name());
      }
    }
    written.phase = succeeded ? api::Phase::kSucceeded : api::Phase::kFailed;
    written.completionTime = formatTime(snapshot_.now);
    setRunning(false, succeeded ? "Completed" : "Failed", decision_.message);
    setCondition(written, succeeded ? "Complete" : "Failed", true,
                 succeeded ? "SearchCompleted" : "SearchFailed", decision_.message, snapshot_.now,
                 snapshot_.generation);
    if (succeeded) {
      plan_.events.push_back({"Completed", "Normal", "",
                              "Best trial " + written.best->trial + "; " + decision_.message +
                                  "; ConfigMap " + configMap});
    } else {
      plan_.events.push_back({"SearchFailed", "Warning", "", decision_.message});
    }
  }

  const Snapshot& snapshot_;
  const tuning::Decision& decision_;
  const api::Spec& spec_;
  const Slots slots_;
  std::vector<TrialPodState> inFlight_;  // after this plan's launches
  Plan plan_;
};

}  // namespace

Snapshot observe(const Cluster& cluster, const Job& job, Timestamp now) {
  Snapshot snapshot;
  snapshot.now = now;
  snapshot.key = job.key;
  snapshot.generation = job.generation;
  snapshot.job = job.decoded->job;
  snapshot.job.status = job.status;
  snapshot.warnings = job.decoded->warnings;
  snapshot.statusWrittenAt = cluster.statusWrittenAt(job.key);
  observePods(cluster, snapshot);
  snapshot.capacity = cluster.capacity();
  snapshot.slotsHeldForOlderJobs =
      cluster.slotsHeldForOlderJobs(job, snapshot.job.spec.resources.gpusPerTrial);
  return snapshot;
}

int Slots::free() const { return std::max(0, std::min(byParallelism, byGpus)); }

Slots slotsOf(const Snapshot& snapshot) {
  const api::Resources& resources = snapshot.job.spec.resources;
  const TrialShape shape{resources.gpusPerTrial, resources.nodesPerTrial};
  const int lost = static_cast<int>(std::ranges::count_if(snapshot.inFlight, shouldRelaunch));
  Slots slots;
  slots.byParallelism = snapshot.job.spec.parallelism - static_cast<int>(snapshot.inFlight.size());
  slots.byGpus = freeSlotsFor(snapshot.capacity, shape) - lost - snapshot.slotsHeldForOlderJobs;
  slots.schedulable = fitsSomeNodes(snapshot.capacity, shape);
  return slots;
}

tuning::EngineInput question(const Snapshot& snapshot) {
  const api::Spec& spec = snapshot.job.spec;
  tuning::EngineInput input;
  input.spec = spec;
  input.jobUid = snapshot.job.uid();
  input.measured = snapshot.job.status.model;
  for (const auto& concluded : snapshot.concluded) {
    if (concluded.conclusion.measured) {
      input.measured = concluded.conclusion.measured;
    }
  }
  input.gpuMemoryBytes = gpuMemoryBytes(
      snapshot.capacity, TrialShape{spec.resources.gpusPerTrial, spec.resources.nodesPerTrial});
  input.finished = snapshot.job.status.results;
  for (const auto& concluded : snapshot.concluded) {
    input.finished.push_back(concluded.conclusion.record);
  }
  for (const auto& state : snapshot.inFlight) {
    input.inFlight.push_back(state.trialName);
  }
  input.freeSlots = slotsOf(snapshot).free();
  return input;
}

JobEvent aboutTrials(const std::string& reason, const std::string& type, const std::string& verb,
                     const std::vector<std::pair<std::string, std::string>>& trials) {
  std::string subject;
  for (const auto& [name, detail] : trials) {
    subject += name + ",";
  }
  if (trials.size() == 1) {
    const auto& [name, detail] = trials.front();
    const bool object = detail.starts_with("Pod ") || detail.starts_with("Job ");
    const std::string joint = object ? " as " : ": ";
    return {reason, type, subject,
            "Trial " + name + " " + verb + (detail.empty() ? "" : joint + detail)};
  }
  std::string message = std::to_string(trials.size()) + " trials " + verb + ":";
  for (const auto& [name, detail] : trials) {
    message += " " + name + (detail.empty() ? "" : " (" + detail + ")") + ";";
  }
  message.pop_back();
  return {reason, type, tuning::fnv1aHex(subject), message};
}

Plan plan(const Snapshot& snapshot, const tuning::Decision& decision) {
  return Planner(snapshot, decision).make();
}

Plan refuse(const Job& job, const api::FieldErrors& errors, Timestamp now) {
  const std::string message = listed(errors, kConditionMessageBytes);
  Plan refused;
  api::Status& status = refused.status;
  status = job.status;
  status.phase = api::Phase::kFailed;
  status.observedGeneration = job.generation;
  status.message = message;
  setCondition(status, "SpecValid", false, "InvalidSpec", message, now, job.generation);
  setCondition(status, "Failed", true, "InvalidSpec", message, now, job.generation);
  refused.events.push_back({"InvalidSpec", "Warning", "", message});
  return refused;
}

OutputFailure outputNotWritten(const Snapshot& snapshot, const Output& output,
                               const OutputRefusal& refusal) {
  const std::string& name = snapshot.job.spec.output.configMapName;
  const std::string message = api::headOf(
      "ConfigMap " + name + " could not be written: " + refusal.message, kEventMessageBytes);
  api::Status status = output.statusUntilWritten;
  const bool toldAlready = std::ranges::any_of(status.conditions, [&](const api::Condition& c) {
    return c.type == kOutputCondition && c.status == "False" && c.message == message;
  });
  setCondition(status, kOutputCondition, false, refusal.reason, message, snapshot.now,
               snapshot.generation);
  OutputFailure failure{std::move(status), std::nullopt};
  if (!toldAlready) {
    failure.event = JobEvent{refusal.reason, "Warning", "", message};
  }
  return failure;
}

api::Status reconcileThrew(const Job& job, const std::string& message, Timestamp now) {
  api::Status status = job.status;
  setCondition(status, kReconciledCondition, false, "ReconcileException", message, now,
               job.generation);
  return status;
}

}  // namespace autotune::controller
