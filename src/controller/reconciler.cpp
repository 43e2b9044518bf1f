#include "controller/reconciler.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "api/codec.h"
#include "api/text.h"
#include "controller/gpu_slots.h"
#include "controller/output.h"
#include "controller/trial_pod.h"
#include "controller/trial_state.h"
#include "tuning/engine.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using runtime::metadataOf;
using Timestamp = std::chrono::system_clock::time_point;

constexpr std::string_view kFieldManager = "autotune-operator";
// False, with the exception, while the job's reconciles throw; True again once one succeeds.
constexpr std::string_view kReconciledCondition = "Reconciled";
// False while the search is over and its output ConfigMap could not be written.
constexpr std::string_view kOutputCondition = "OutputWritten";
constexpr auto kMinRequeue = std::chrono::seconds(1);
constexpr auto kUnschedulableRecheck = std::chrono::seconds(30);
constexpr std::size_t kEventMessageBytes = 1024;
constexpr std::size_t kConditionMessageBytes = 32768;  // metav1.Condition's bound
constexpr std::size_t kExceptionMessageBytes = 1024;

std::pair<std::string, std::string> splitKey(const std::string& key) {
  const auto slash = key.find('/');
  if (slash == std::string::npos) {
    return {"", key};
  }
  return {key.substr(0, slash), key.substr(slash + 1)};
}

bool ownedBy(const json& object, const std::string& uid) {
  const json owners = metadataOf(object).value("ownerReferences", json::array());
  return std::any_of(owners.begin(), owners.end(), [&uid](const json& owner) {
    return owner.value("uid", "") == uid && owner.value("controller", false);
  });
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
void setCondition(std::vector<api::Condition>& conditions, const std::string& type, bool value,
                  const std::string& reason, const std::string& text, const std::string& now,
                  std::int64_t generation) {
  const std::string status = value ? "True" : "False";
  const std::string message = api::headOf(text, kConditionMessageBytes);
  auto found = std::find_if(conditions.begin(), conditions.end(),
                            [&](const api::Condition& c) { return c.type == type; });
  if (found == conditions.end()) {
    conditions.push_back({type, status, reason, message, now, generation});
    return;
  }
  if (found->status != status) {
    found->lastTransitionTime = now;
  }
  found->status = status;
  found->reason = reason;
  found->message = message;
  found->observedGeneration = generation;
}

bool isTerminal(api::Phase phase) {
  return phase == api::Phase::kSucceeded || phase == api::Phase::kFailed;
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

std::string hex(std::uint64_t value) {
  std::array<char, 17> text{};
  std::snprintf(text.data(), text.size(), "%016llx", static_cast<unsigned long long>(value));
  return text.data();
}

// What an Event on a job reports.
struct JobEvent {
  std::string reason;
  std::string type;     // Normal or Warning
  std::string subject;  // what it is about (a trial), which with the reason names it
  std::string message;
};

// Creates an Event on the job whose metadata is given. Its name is derived from what it
// reports, so a reconcile that runs again after a restart does not report the same thing twice.
// Returns why it could not be created, if it could not.
std::optional<std::string> recordEvent(const k8s::Client& client, const json& jobMetadata,
                                       const JobEvent& reported, const std::string& now) {
  const std::string jobName = jobMetadata.value("name", "");
  const std::string ns = jobMetadata.value("namespace", "");
  const std::string uid = jobMetadata.value("uid", "");
  const std::string name =
      jobName.substr(0, 200) + "." + hex(tuning::fnv1a(uid + reported.reason + reported.subject));
  const json event = {{"apiVersion", "v1"},
                      {"kind", "Event"},
                      {"metadata", {{"name", name}, {"namespace", ns}}},
                      {"involvedObject",
                       {{"apiVersion", api::kApiVersion},
                        {"kind", api::kKind},
                        {"name", jobName},
                        {"namespace", ns},
                        {"uid", uid}}},
                      {"reason", reported.reason},
                      {"message", api::headOf(reported.message, kEventMessageBytes)},
                      {"type", reported.type},
                      {"source", {{"component", kFieldManager}}},
                      {"reportingComponent", kFieldManager},
                      {"firstTimestamp", now},
                      {"lastTimestamp", now},
                      {"count", 1}};
  auto created = client.create(k8s::kEvents, ns, event);
  if (!created && created.error().kind != k8s::ErrorKind::kAlreadyExists) {
    return "event " + reported.reason + ": " + k8s::describe(created.error());
  }
  return std::nullopt;
}

// A trial still in flight, as its newest Pod shows it.
struct InFlight {
  TrialPodState state;
  json pod;
};

std::vector<json> listAll(const std::vector<const runtime::Store*>& stores) {
  std::vector<json> objects;
  for (const auto* store : stores) {
    for (auto& object : store->list()) {
      objects.push_back(std::move(object));
    }
  }
  return objects;
}

}  // namespace

std::vector<json> Caches::allJobs() const { return listAll(jobs); }

std::vector<json> Caches::allPods() const { return listAll(pods); }

std::vector<json> Caches::podsWithLabel(const std::string& label, const std::string& value,
                                        const std::string& ns) const {
  std::vector<json> found;
  for (const auto* store : pods) {
    for (auto& pod : store->withLabel(label, value, ns)) {
      found.push_back(std::move(pod));
    }
  }
  return found;
}

std::vector<std::string> jobKeysOfPod(const json& pod) {
  const auto& metadata = metadataOf(pod);
  for (const auto& owner : metadata.value("ownerReferences", json::array())) {
    if (owner.value("kind", "") == api::kKind && owner.value("controller", false)) {
      return {metadata.value("namespace", "") + "/" + owner.value("name", "")};
    }
  }
  return {};
}

// One reconcile of one job: everything it reads and decides, so each step is a small method.
class Reconciler::Pass {
 public:
  Pass(const Reconciler& owner, std::string key)
      : client_(owner.client_),
        caches_(owner.caches_),
        hooks_(owner.hooks_),
        key_(std::move(key)),
        nodes_(owner.caches_.nodes->list()),
        now_(owner.now_()),
        nowText_(formatTime(now_)) {}

  runtime::ReconcileResult run() {
    const auto [ns, name] = splitKey(key_);
    auto fetched = client_.get(kAutotuneJobs, ns, name);
    if (!fetched) {
      if (fetched.error().kind == k8s::ErrorKind::kNotFound) {
        if (hooks_.jobGone) {
          hooks_.jobGone(ns, name);
        }
        return {};
      }
      return failed("read the job: " + k8s::describe(fetched.error()));
    }
    object_ = std::move(*fetched);
    generation_ = metadataOf(object_).value("generation", std::int64_t{0});
    auto decoded = api::decode(object_);
    if (!decoded) {
      return refuse(decoded.error());
    }
    job_ = std::move(decoded->job);
    if (job_.status.observedGeneration != generation_) {
      reportWarnings(decoded->warnings);
    }
    clearReconcileException();
    if (isTerminal(job_.status.phase)) {
      observePods();
      deletePods(finishedPods_);
      return {};
    }
    return search();
  }

 private:
  // --- the search ---------------------------------------------------------------------------

  runtime::ReconcileResult search() {
    observePods();
    for (const auto& record : newRecords_) {
      job_.status.results.push_back(record);
    }
    const GpuCapacity capacity = gpuCapacity(nodes_, caches_.allPods());
    const tuning::Decision decision = tuning::decide(question(capacity));
    relaunchLost(decision);
    const bool schedulable = fitsSomeNode(capacity, job_.spec.resources.gpusPerTrial);
    if (decision.state == tuning::Decision::State::kContinue && schedulable) {
      launch(decision);
    }
    runtime::ReconcileResult result =
        decision.state != tuning::Decision::State::kContinue && inFlight_.empty()
            ? conclude(decision)
            : progress(decision, capacity, schedulable);
    if (result.failed) {
      return result;
    }
    // The finished trials are recorded in the status written above; only now may their Pods go,
    // so a crash in between loses nothing.
    for (const auto& record : newRecords_) {
      announceFinished(record);
    }
    for (const auto waited : pendingWaits_) {
      hooks_.trialPending(waited);
    }
    deletePods(finishedPods_);
    return result;
  }

  runtime::ReconcileResult progress(const tuning::Decision& decision, const GpuCapacity& capacity,
                                    bool schedulable) {
    updateProgress(decision, capacity, schedulable);
    if (!writeStatus()) {
      return failed("write the status");
    }
    return runtime::ReconcileResult::after(nextDeadline(schedulable));
  }

  // Reads the job's trial Pods: results of finished ones, trials still in flight, and Pods
  // that are no longer needed.
  void observePods() {
    std::set<std::string> recorded;
    for (const auto& record : job_.status.results) {
      recorded.insert(record.name);
    }
    NodeNames nodes;
    for (const auto& node : nodes_) {
      nodes.insert(metadataOf(node).value("name", ""));
    }
    std::map<std::string, InFlight> newest;
    for (const auto& pod : trialPods()) {
      auto state = observe(pod, job_.spec, nodes);
      if (!state) {
        warn(state.error());
        continue;
      }
      if (recorded.contains(state->trialName) || isTerminal(job_.status.phase)) {
        if (removable(*state) && !metadataOf(pod).contains("deletionTimestamp")) {
          finishedPods_.push_back(state->podName);
        }
        continue;
      }
      auto [entry, inserted] = newest.try_emplace(state->trialName, InFlight{*state, pod});
      if (!inserted && entry->second.state.attempt < state->attempt) {
        finishedPods_.push_back(entry->second.state.podName);
        entry->second = {*state, pod};
      } else if (!inserted) {
        finishedPods_.push_back(state->podName);
      }
    }
    std::vector<std::pair<TrialPodState, TrialConclusion>> concluded;
    for (auto& [trial, flight] : newest) {
      if (auto conclusion = controller::conclude(flight.state, job_.spec, now_)) {
        concluded.emplace_back(flight.state, std::move(*conclusion));
      } else {
        inFlight_.push_back(std::move(flight));
      }
    }
    // In the order the trials started, so that a restart records them the same way.
    std::sort(concluded.begin(), concluded.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.record.startTime, a.second.record.name) <
             std::tie(b.second.record.startTime, b.second.record.name);
    });
    for (auto& [state, conclusion] : concluded) {
      if (hooks_.trialPending && state.created && state.containerStarted) {
        pendingWaits_.emplace_back(*state.containerStarted - *state.created);
      }
      newRecords_.push_back(conclusion.record);
      if (conclusion.measured) {
        job_.status.model = conclusion.measured;
      }
      if (removable(state)) {
        finishedPods_.push_back(state.podName);
      }
    }
  }

  // A Pod of an ended trial goes when it still runs (past its deadline) or was lost; one that
  // finished goes unless spec.cleanup is Keep.
  bool removable(const TrialPodState& state) const {
    return state.phase != TrialPodState::Phase::kFinished ||
           job_.spec.cleanup != api::Cleanup::kKeep;
  }

  std::vector<json> trialPods() const {
    std::vector<json> pods;
    for (auto& pod : caches_.podsWithLabel(std::string(kJobLabel), jobLabelValue(job_.name()),
                                           job_.namespaceName())) {
      if (ownedBy(pod, job_.uid())) {
        pods.push_back(std::move(pod));
      }
    }
    return pods;
  }

  tuning::EngineInput question(const GpuCapacity& capacity) {
    tuning::EngineInput input;
    input.spec = job_.spec;
    input.jobUid = job_.uid();
    input.measured = job_.status.model;
    input.gpuMemoryBytes = job_.spec.resources.gpuMemory
                               ? std::optional<std::int64_t>(job_.spec.resources.gpuMemory->value())
                               : gpuMemoryBytes(capacity, job_.spec.resources.gpusPerTrial);
    input.finished = job_.status.results;
    for (const auto& flight : inFlight_) {
      input.inFlight.push_back(flight.state.trialName);
    }
    const int lost =
        static_cast<int>(std::count_if(inFlight_.begin(), inFlight_.end(),
                                       [](const InFlight& f) { return shouldRelaunch(f.state); }));
    slotsByParallelism_ = job_.spec.parallelism - static_cast<int>(inFlight_.size());
    slotsByGpus_ =
        freeSlotsFor(capacity, job_.spec.resources.gpusPerTrial) - lost - slotsHeldForOlderJobs();
    input.freeSlots = std::max(0, std::min(slotsByParallelism_, slotsByGpus_));
    return input;
  }

  // First come, first served: GPU slots an older job is waiting for are not handed to this one.
  int slotsHeldForOlderJobs() const {
    const auto ownAge = std::make_pair(metadataOf(object_).value("creationTimestamp", ""), key_);
    const int own = job_.spec.resources.gpusPerTrial;
    int held = 0;
    for (const auto& other : caches_.allJobs()) {
      const auto& metadata = metadataOf(other);
      if (std::make_pair(metadata.value("creationTimestamp", ""), runtime::keyOf(other)) >=
          ownAge) {
        continue;
      }
      const json status = other.value("status", json::object());
      const json spec = other.value("spec", json::object());
      for (const auto& condition : status.value("conditions", json::array())) {
        if (condition.value("type", "") != "Running" ||
            condition.value("reason", "") != "WaitingForGPUs") {
          continue;
        }
        const json trials = status.value("trials", json::object());
        const int waiting =
            spec.value("parallelism", 1) - trials.value("pending", 0) - trials.value("running", 0);
        const int gpus = spec.value("resources", json::object()).value("gpusPerTrial", 1);
        held += (std::max(0, waiting) * gpus + own - 1) / own;
      }
    }
    return held;
  }

  void launch(const tuning::Decision& decision) {
    for (const auto& trial : decision.launch) {
      const json pod = trialPod(job_, trial);
      auto created = client_.create(k8s::kPods, job_.namespaceName(), pod);
      if (!created && created.error().kind != k8s::ErrorKind::kAlreadyExists) {
        warn("launch " + trial.name + ": " + k8s::describe(created.error()));
        continue;
      }
      if (!created && heldByAnother(pod["metadata"]["name"], trial)) {
        continue;
      }
      TrialPodState state;
      state.phase = TrialPodState::Phase::kPending;
      state.trialName = trial.name;
      state.podName = pod["metadata"]["name"];
      state.created = now_;
      inFlight_.push_back({state, pod});
      if (created) {
        record("TrialLaunched", "Normal", trial.name,
               "Launched trial " + trial.name + " as Pod " + state.podName);
        if (hooks_.trialLaunched) {
          hooks_.trialLaunched(job_, trial.name);
        }
      }
    }
  }

  // Whether the Pod name of a trial is taken by a Pod this job does not own (one left behind by
  // `kubectl delete --cascade=orphan` of an earlier job of the same name). Such a Pod is neither
  // adopted nor deleted: the trial is recorded Failed, saying so, and the search moves on.
  bool heldByAnother(const std::string& podName, const tuning::Trial& trial) {
    auto existing = client_.get(k8s::kPods, job_.namespaceName(), podName);
    if (!existing || ownedBy(*existing, job_.uid())) {
      return false;
    }
    api::TrialRecord record;
    record.name = trial.name;
    record.space = trial.space;
    record.outcome = api::Outcome::kFailed;
    record.reason = "Pod " + podName +
                    " exists and is not this job's; it is neither adopted nor deleted: delete it "
                    "to run this trial";
    record.startTime = nowText_;
    job_.status.results.push_back(record);
    newRecords_.push_back(std::move(record));
    return true;
  }

  // Trials whose Pods were evicted or lost with their node run again, as a new attempt.
  void relaunchLost(const tuning::Decision& decision) {
    for (auto& flight : inFlight_) {
      if (!shouldRelaunch(flight.state)) {
        continue;
      }
      const auto trial =
          std::find_if(decision.trials.begin(), decision.trials.end(),
                       [&](const tuning::Trial& t) { return t.name == flight.state.trialName; });
      if (trial == decision.trials.end()) {
        continue;
      }
      auto created = client_.create(k8s::kPods, job_.namespaceName(),
                                    trialPod(job_, *trial, flight.state.attempt + 1));
      if (!created && created.error().kind != k8s::ErrorKind::kAlreadyExists) {
        warn("relaunch " + trial->name + ": " + k8s::describe(created.error()));
        continue;
      }
      record("TrialRelaunched", "Warning", trial->name + std::to_string(flight.state.attempt),
             "Trial " + trial->name + " was lost (" + flight.state.message + "); launched again");
      deletePods({flight.state.podName});
      flight.state.phase = TrialPodState::Phase::kPending;
    }
  }

  void updateProgress(const tuning::Decision& decision, const GpuCapacity& capacity,
                      bool schedulable) {
    api::Status& status = job_.status;
    fillCommon(decision);
    bool profiling = false;
    int pending = 0;
    int running = 0;
    std::string unschedulable;
    for (const auto& flight : inFlight_) {
      profiling |= flight.state.trialName == tuning::kProfileTrialName;
      if (flight.state.phase == TrialPodState::Phase::kRunning) {
        ++running;
      } else {
        ++pending;
        if (flight.state.unschedulable) {
          unschedulable = flight.state.podName + ": " + flight.state.message;
        }
      }
    }
    status.trials.pending = pending;
    status.trials.running = running;
    if (profiling) {
      status.phase = api::Phase::kProfiling;
    } else if (!inFlight_.empty() || !status.results.empty()) {
      status.phase = api::Phase::kRunning;
    } else {
      status.phase = api::Phase::kPending;
    }

    const int gpus = job_.spec.resources.gpusPerTrial;
    if (!schedulable) {
      int largest = 0;
      for (const auto& node : capacity.nodes) {
        largest = std::max(largest, node.allocatable);
      }
      status.message =
          "no schedulable node has " + std::to_string(gpus) +
          " allocatable nvidia.com/gpu (spec.resources.gpusPerTrial); the largest has " +
          std::to_string(largest);
      setRunning(false, "Unschedulable", status.message);
    } else if (!unschedulable.empty()) {
      status.message = "a trial cannot be scheduled: " + unschedulable;
      setRunning(inFlight_.size() > static_cast<std::size_t>(pending), "Unschedulable",
                 status.message);
    } else if (wantedMoreSlots(decision)) {
      status.message = "waiting for free nvidia.com/gpu slots";
      setRunning(true, "WaitingForGPUs", status.message);
    } else {
      status.message = decision.message;
      setRunning(true, "Searching", "trials in flight: " + std::to_string(inFlight_.size()));
    }
  }

  // Whether the engine was held back by GPU slots rather than by parallelism or its own plan.
  bool wantedMoreSlots(const tuning::Decision& decision) const {
    return decision.state == tuning::Decision::State::kContinue &&
           slotsByGpus_ < slotsByParallelism_ &&
           static_cast<int>(decision.launch.size()) >= std::max(0, slotsByGpus_);
  }

  void setRunning(bool value, const std::string& reason, const std::string& message) {
    setCondition(job_.status.conditions, "Running", value, reason, message, nowText_, generation_);
  }

  // Status fields every outcome shares.
  void fillCommon(const tuning::Decision& decision) {
    api::Status& status = job_.status;
    status.observedGeneration = generation_;
    if (status.startTime.empty()) {
      status.startTime = nowText_;
    }
    setCondition(status.conditions, "SpecValid", true, "Valid", "the spec is valid", nowText_,
                 generation_);
    api::TrialCounts counts;
    for (const auto& record : status.results) {
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
    counts.launched = static_cast<int>(status.results.size() + inFlight_.size());
    counts.pruned = static_cast<int>(decision.pruned.size());
    status.trials = counts;
    status.spaces = tuning::summarizeSpaces(status.results, job_.spec.search.metric);
    const std::string previousBest = status.best ? status.best->trial : "";
    if (decision.best && decision.bestValue) {
      status.best = tuning::bestTrial(*decision.best, *decision.bestValue, job_.spec.search.metric,
                                      tuning::baselineValue(status.results));
      if (status.best->trial != previousBest) {
        record("BestImproved", "Normal", status.best->trial,
               "Best so far: " + status.best->trial + " with " +
                   std::string(api::toString(job_.spec.search.metric)) + " " +
                   tuning::formatMetricValue(status.best->value));
      }
    }
  }

  std::optional<runtime::Duration> nextDeadline(bool schedulable) const {
    if (!schedulable) {
      return std::chrono::duration_cast<runtime::Duration>(kUnschedulableRecheck);
    }
    std::optional<Timestamp> soonest;
    for (const auto& flight : inFlight_) {
      if (const auto due = deadline(flight.state, job_.spec);
          due && (!soonest || *due < *soonest)) {
        soonest = due;
      }
    }
    if (!soonest) {
      return std::nullopt;
    }
    return std::chrono::duration_cast<runtime::Duration>(
        std::max<std::chrono::system_clock::duration>(
            *soonest - now_ + std::chrono::milliseconds(100), kMinRequeue));
  }

  // --- the end of the search ------------------------------------------------------------------

  runtime::ReconcileResult conclude(const tuning::Decision& decision) {
    fillCommon(decision);
    api::Status& status = job_.status;
    status.trials.pending = 0;
    status.trials.running = 0;
    status.message = decision.message;
    const bool succeeded =
        decision.state == tuning::Decision::State::kSucceeded && decision.best.has_value();
    if (succeeded) {
      if (const auto error = writeOutput(decision)) {
        return outputNotWritten(*error);
      }
      setCondition(status.conditions, std::string(kOutputCondition), true, "Written",
                   "ConfigMap " + job_.spec.output.configMapName, nowText_, generation_);
      if (job_.spec.afterTuning && !startAfterTuning(*decision.best)) {
        return failed("create the afterTuning Job");
      }
    }
    status.phase = succeeded ? api::Phase::kSucceeded : api::Phase::kFailed;
    status.completionTime = nowText_;
    setRunning(false, succeeded ? "Completed" : "Failed", decision.message);
    setCondition(status.conditions, succeeded ? "Complete" : "Failed", true,
                 succeeded ? "SearchCompleted" : "SearchFailed", decision.message, nowText_,
                 generation_);
    if (!writeStatus()) {
      return failed("write the final status");
    }
    if (succeeded) {
      record("Completed", "Normal", "",
             "Best trial " + status.best->trial + "; " + decision.message + "; ConfigMap " +
                 job_.spec.output.configMapName);
    } else {
      record("SearchFailed", "Warning", "", decision.message);
    }
    return {};
  }

  // The error of the API server when the ConfigMap could not be applied.
  std::optional<std::string> writeOutput(const tuning::Decision& decision) {
    const double elapsed =
        std::chrono::duration<double>(now_ - parseTime(job_.status.startTime).value_or(now_))
            .count();
    const json configMap = outputConfigMap(job_, *decision.best, decision.trials, elapsed);
    auto applied =
        client_.patch(k8s::kConfigMaps, job_.namespaceName(), job_.spec.output.configMapName,
                      k8s::PatchType::kApply, configMap, {std::string(kFieldManager), true});
    if (!applied) {
      warn("ConfigMap " + job_.spec.output.configMapName + ": " + k8s::describe(applied.error()));
      return k8s::describe(applied.error());
    }
    return std::nullopt;
  }

  // The search is over but its output is not written: the job says so, once per cause, and the
  // write is retried with backoff. Results and the best stay in the status meanwhile.
  runtime::ReconcileResult outputNotWritten(const std::string& error) {
    const std::string message = api::headOf(
        "ConfigMap " + job_.spec.output.configMapName + " could not be written: " + error,
        kEventMessageBytes);
    const auto& conditions = job_.status.conditions;
    const bool toldAlready = std::ranges::any_of(conditions, [&](const api::Condition& c) {
      return c.type == kOutputCondition && c.status == "False" && c.message == message;
    });
    setCondition(job_.status.conditions, std::string(kOutputCondition), false, "OutputWriteFailed",
                 message, nowText_, generation_);
    if (!writeStatus()) {
      return failed("write the status");
    }
    if (!toldAlready) {
      record("OutputWriteFailed", "Warning", "", message);
    }
    return runtime::ReconcileResult::retry();
  }

  // DeepSpeed's `--autotuning run`: the user's Job, with the optimal config mounted.
  bool startAfterTuning(const tuning::Trial& best) {
    auto created =
        client_.create(k8s::kBatchJobs, job_.namespaceName(), afterTuningJob(job_, best));
    if (!created && created.error().kind != k8s::ErrorKind::kAlreadyExists) {
      warn("afterTuning Job: " + k8s::describe(created.error()));
      return false;
    }
    job_.status.afterTuningJob = afterTuningJobName(job_.name());
    return true;
  }

  // A reconcile that gets this far after one that threw says so in the job's next status write.
  void clearReconcileException() {
    const auto& conditions = job_.status.conditions;
    const bool threwBefore = std::any_of(conditions.begin(), conditions.end(), [](const auto& c) {
      return c.type == kReconciledCondition && c.status == "False";
    });
    if (threwBefore) {
      setCondition(job_.status.conditions, std::string(kReconciledCondition), true, "Recovered",
                   "the reconcile succeeds again", nowText_, generation_);
    }
  }

  // What decoding noticed in DeepSpeed's autotuning section: told once per generation of the spec.
  void reportWarnings(const api::FieldErrors& warnings) {
    if (warnings.empty()) {
      return;
    }
    const std::string message = listed(warnings, kEventMessageBytes);
    record("SpecWarning", "Warning", "generation " + std::to_string(generation_), message);
  }

  // --- an invalid spec ------------------------------------------------------------------------

  runtime::ReconcileResult refuse(const api::FieldErrors& errors) {
    const std::string message = listed(errors, kConditionMessageBytes);
    api::Status status =
        api::decodeStatus(object_.value("status", json::object())).value_or(api::Status{});
    status.phase = api::Phase::kFailed;
    status.observedGeneration = generation_;
    status.message = message;
    setCondition(status.conditions, "SpecValid", false, "InvalidSpec", message, nowText_,
                 generation_);
    setCondition(status.conditions, "Failed", true, "InvalidSpec", message, nowText_, generation_);
    job_.metadata = metadataOf(object_);
    job_.status = std::move(status);
    if (!writeStatus()) {
      return failed("write the status of an invalid job");
    }
    record("InvalidSpec", "Warning", "", message);
    return {};
  }

  // --- writes ---------------------------------------------------------------------------------

  // Writes job_.status when it differs from what the server holds; a Conflict fails the pass,
  // which is retried on a fresh read.
  bool writeStatus() {
    const json encoded = api::encode(job_.status);
    if (object_.value("status", json::object()) == encoded) {
      return true;
    }
    json updated = object_;
    updated["status"] = encoded;
    auto written = client_.updateStatus(kAutotuneJobs, job_.namespaceName(), updated);
    if (!written) {
      warn("status: " + k8s::describe(written.error()));
      return false;
    }
    object_ = std::move(*written);
    if (hooks_.statusWritten) {
      hooks_.statusWritten(job_, job_.status);
    }
    return true;
  }

  void deletePods(const std::vector<std::string>& names) {
    for (const auto& name : names) {
      auto removed = client_.remove(k8s::kPods, job_.namespaceName(), name);
      if (!removed && removed.error().kind != k8s::ErrorKind::kNotFound) {
        warn("delete Pod " + name + ": " + k8s::describe(removed.error()));
      }
    }
  }

  void announceFinished(const api::TrialRecord& finished) {
    std::string message =
        "Trial " + finished.name + " ended " + std::string(api::toString(finished.outcome));
    if (finished.value) {
      message += " with " + std::string(api::toString(job_.spec.search.metric)) + " " +
                 tuning::formatMetricValue(*finished.value);
    } else if (!finished.reason.empty()) {
      message += ": " + tuning::tail(finished.reason, 512);
    }
    record(eventReasonFor(finished.outcome),
           finished.outcome == api::Outcome::kSucceeded ? "Normal" : "Warning", finished.name,
           message);
    if (hooks_.trialFinished) {
      hooks_.trialFinished(job_, finished);
    }
  }

  void record(const std::string& reason, const std::string& type, const std::string& subject,
              const std::string& message) {
    if (auto failure =
            recordEvent(client_, job_.metadata, {reason, type, subject, message}, nowText_)) {
      warn(*failure);
    }
  }

  void warn(const std::string& message) const {
    if (hooks_.warning) {
      hooks_.warning(key_, message);
    }
  }

  runtime::ReconcileResult failed(const std::string& what) const {
    warn("could not " + what);
    return runtime::ReconcileResult::retry();
  }

  const k8s::Client& client_;
  const Caches& caches_;
  const ReconcilerHooks& hooks_;
  std::string key_;
  std::vector<json> nodes_;  // read once: both the Pods' states and the GPU slots need them
  Timestamp now_;
  std::string nowText_;
  json object_;
  std::int64_t generation_ = 0;
  api::AutotuneJob job_;
  std::vector<InFlight> inFlight_;
  std::vector<api::TrialRecord> newRecords_;
  std::vector<std::string> finishedPods_;
  std::vector<std::chrono::duration<double>> pendingWaits_;
  int slotsByParallelism_ = 0;
  int slotsByGpus_ = 0;
};

Reconciler::Reconciler(const k8s::Client& client, Caches caches, ReconcilerHooks hooks, Now now)
    : client_(client), caches_(std::move(caches)), hooks_(std::move(hooks)), now_(std::move(now)) {}

runtime::ReconcileResult Reconciler::reconcile(const std::string& key) {
  try {
    return Pass(*this, key).run();
  } catch (const std::exception& error) {
    return reportException(key, error.what());
  }
}

// A reconcile that threw is the job's problem alone: the job says so in a condition and a
// Warning Event, and the manager retries it with backoff. Nothing here may throw in turn.
runtime::ReconcileResult Reconciler::reportException(const std::string& key,
                                                     std::string_view what) const {
  const std::string message = "the reconcile failed: " + api::headOf(what, kExceptionMessageBytes);
  try {
    const auto [ns, name] = splitKey(key);
    auto fetched = client_.get(kAutotuneJobs, ns, name);
    if (fetched) {
      json object = std::move(*fetched);
      const json metadata = metadataOf(object);
      api::Status status =
          api::decodeStatus(object.value("status", json::object())).value_or(api::Status{});
      const std::string now = formatTime(now_());
      setCondition(status.conditions, std::string(kReconciledCondition), false,
                   "ReconcileException", message, now, metadata.value("generation", 0));
      object["status"] = api::encode(status);
      const auto written = client_.updateStatus(kAutotuneJobs, ns, object);
      const auto eventFailure =
          recordEvent(client_, metadata, {"ReconcileException", "Warning", message, message}, now);
      if (!written && hooks_.warning) {
        hooks_.warning(key, "status: " + k8s::describe(written.error()));
      }
      if (eventFailure && hooks_.warning) {
        hooks_.warning(key, *eventFailure);
      }
    }
  } catch (const std::exception& error) {
    if (hooks_.warning) {
      hooks_.warning(key, "could not report the exception on the job: " +
                              api::headOf(error.what(), kExceptionMessageBytes));
    }
  }
  return runtime::ReconcileResult::threw(message);
}

}  // namespace autotune::controller
