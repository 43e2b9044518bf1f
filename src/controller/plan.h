#pragma once
// The two pure steps of a reconcile (DESIGN §5): `observe` reads one job and its trial Pods from
// the cache into a Snapshot; `plan` turns the snapshot and the engine's decision into a Plan, a
// value that says everything the reconcile is to do. Neither talks to the API server: apply.h
// carries a plan out.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/job.h"
#include "controller/cluster.h"
#include "controller/gpu_slots.h"
#include "controller/trial_state.h"
#include "runtime/clock.h"
#include "tuning/engine.h"

namespace autotune::controller {

// A trial that ended since the status was last written.
struct Concluded {
  TrialPodState state;
  TrialConclusion conclusion;
};

// One valid job and its trial Pods, as the cache held them at `now`.
struct Snapshot {
  Timestamp now;
  std::string key;
  std::int64_t generation = 0;
  api::AutotuneJob job;  // metadata, spec and the status as written
  api::FieldErrors warnings;
  std::optional<Timestamp> statusWrittenAt;  // by this process, if it has
  std::vector<TrialPodState> inFlight;       // the newest Pod of each trial still running
  std::vector<Concluded> concluded;          // in the order the trials started
  std::vector<std::string> stalePods;        // of recorded or superseded trials, to delete
  // Names of trial Pods taken by Pods this job does not own (left by an earlier job of the same
  // name, or anyone's): such a trial is recorded Failed, never adopted.
  std::set<std::string> podNamesTaken;
  std::vector<std::string> unreadable;  // why some trial Pods could not be read
  MissingNodes missingNodes;            // nodes of its trial Pods that the Node cache lacks
  GpuCapacity capacity;
  int slotsHeldForOlderJobs = 0;
};

Snapshot observe(const Cluster& cluster, const Job& job, Timestamp now);

// How many trials the job may start now, and what holds it back.
struct Slots {
  int byParallelism = 0;
  int byGpus = 0;
  bool schedulable = false;  // some node could hold a trial once idle

  int free() const;
};
Slots slotsOf(const Snapshot& snapshot);

// What the engine is asked.
tuning::EngineInput question(const Snapshot& snapshot);

// What an Event on a job reports. Its name derives from the job, the reason and the subject, so
// the same report made twice (a reconcile run again after a restart) is one Event.
struct JobEvent {
  std::string reason;
  std::string type;     // Normal or Warning
  std::string subject;  // what it is about (a trial), which with the reason names it
  std::string message;
};

// One Event about several trials that one reconcile saw alike (launched, or ended Succeeded, OOM
// or Failed), so that a job's Events stay readable in `kubectl describe` at any parallelism:
// "Launched trial a as Pod p" for one, "3 trials: a (Pod p); b (Pod q); c (Pod r)" for more. Each
// item is a trial's name and what to say of it.
JobEvent aboutTrials(const std::string& reason, const std::string& type, const std::string& verb,
                     const std::vector<std::pair<std::string, std::string>>& trials);

// Why a trial runs again: its Pod was lost (evicted, its node gone, deleted while running), or it
// was not measured (never started, or its Pod vanished unseen).
enum class Relaunch { kLost, kNotMeasured };

struct PodLaunch {
  std::string trial;
  nlohmann::json pod;                     // a multi-node trial's batch Job
  std::optional<nlohmann::json> service;  // a multi-node trial's, created first
  // A relaunch: the Pod (or batch Job) to delete once its successor exists, what happened to it,
  // and whether that makes it lost or not measured.
  std::string replaces;
  std::string relaunchedBecause;
  Relaunch relaunch = Relaunch::kLost;
};

// The output ConfigMap of a search that is over, and the status to write while it cannot be
// written: results and the best, without the final phase.
struct Output {
  nlohmann::json configMap;
  api::Status statusUntilWritten;
};

struct Plan {
  api::Status status;                         // what the job's status is to be
  std::vector<PodLaunch> launches;            // before the status
  std::optional<Output> output;               // before the final status
  std::optional<nlohmann::json> afterTuning;  // the afterTuning Job, after the output
  // Pods to delete once the status is written; a multi-node job's batch Jobs, with their Pods
  // and Services.
  std::vector<std::string> deletions;
  NodeNames nodesToLookUp;                 // nodes the Node cache lacks, to ask the API about
  std::vector<JobEvent> events;            // once the status is written
  std::vector<api::TrialRecord> finished;  // newly recorded, for metrics
  std::vector<std::chrono::duration<double>> pendingWaits;  // of those, each Pod's wait to start
  std::optional<runtime::Duration> requeueAfter;
};

// The plan for a valid job given the engine's decision on question(snapshot).
Plan plan(const Snapshot& snapshot, const tuning::Decision& decision);

// The plan for a job whose spec is invalid: Failed, naming every error.
Plan refuse(const Job& job, const api::FieldErrors& errors, Timestamp now);

// Why the output ConfigMap was not written: `reason` is OutputWriteFailed (the API refused or
// failed) or OutputConflict (a ConfigMap of that name is not this job's).
struct OutputRefusal {
  std::string reason;
  std::string message;
};

// The search is over but its output ConfigMap could not be written: the status says so
// (OutputWritten=False) and the write is retried; results and the best stay. The Event, only
// when the status did not already say the same.
struct OutputFailure {
  api::Status status;
  std::optional<JobEvent> event;
};
OutputFailure outputNotWritten(const Snapshot& snapshot, const Output& output,
                               const OutputRefusal& refusal);

// The status after a reconcile threw: Reconciled=False with the message.
api::Status reconcileThrew(const Job& job, const std::string& message, Timestamp now);

}  // namespace autotune::controller
