#pragma once
// The second step of a reconcile: the snapshot (observe.h) and the engine's decision
// on it become a Plan, a value that says everything the reconcile is to do. Pure, and made as a
// chain of small steps, each taking the plan so far to the next: record what ended, relaunch
// what was lost, launch what the engine wants, summarise the status, and pace (whether the status
// is written now or a little later). apply.h carries a plan out.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job.h"
#include "controller/decision/events.h"
#include "controller/decision/observe.h"
#include "controller/objects/trial_run.h"
#include "tuning/engine.h"

namespace autotune::controller {

// What carrying out a plan taught the reconcile that the plan could not know: the plan is made
// again knowing it, and written.
struct Learned {
  std::set<std::string> namesTaken;  // runs whose names objects the job does not own hold
  std::optional<OutputRefusal> outputRefused;
  // The creates of these trials' runs were refused (those trials are not in flight); of a job of
  // several GPU models, `trial` names the search's AutotuneJob.
  std::vector<RefusedCreate> refusedCreates;
  // The afterTuning Job's name is held by a Job this job does not control: whose it is.
  std::optional<std::string> afterTuningTaken;
  // The API server refused the afterTuning Job for good (refusalOf): its words.
  std::optional<std::string> afterTuningRefused;

  bool empty() const {
    return namesTaken.empty() && !outputRefused && refusedCreates.empty() && !afterTuningTaken &&
           !afterTuningRefused;
  }
};

// How many trials the job may start now, and what holds it back.
struct Slots {
  int byParallelism = 0;
  int byGpus = 0;
  bool schedulable = false;  // some node could hold a trial once idle
};
Slots slotsOf(const Snapshot& snapshot);

// What the engine is asked: what it launches with the free slots, and what it wants with room for
// spec.parallelism, the GPUs not counted (tuning::Decision::wanted).
tuning::EngineInput question(const Snapshot& snapshot);

// A trial's run to create.
struct RunLaunch {
  // A relaunch replaces a run that was lost or not measured: that run is deleted once this one
  // exists, and the Event says why.
  struct Replacing {
    TrialRun run;
    Relaunch why = Relaunch::kLost;
    JobEvent event;
  };

  std::string trial;
  TrialRun run;
  nlohmann::json object;                  // the Pod, or the batch Job
  std::optional<nlohmann::json> service;  // a batch Job's, created first
  std::optional<Replacing> replaces;
};

struct Plan {
  api::Status status;                         // what the job's status is to be
  std::optional<nlohmann::json> output;       // the output ConfigMap, before the status
  std::optional<nlohmann::json> afterTuning;  // the afterTuning Job, after the output
  std::vector<RunLaunch> launches;            // after the status
  std::vector<TrialRun> deletions;            // once the status is written
  // Pods to let go of (api::kTrialResultFinalizer) once the status is written; the runs deleted
  // are let go of as they are deleted.
  std::vector<Shared<Pod>> releases;
  NodeNames nodesToLookUp;                 // nodes the Node cache lacks, to ask the API about
  std::vector<JobEvent> events;            // once the status is written
  std::vector<api::TrialRecord> finished;  // newly recorded, for metrics
  std::vector<api::TrialRecord> reused;    // newly taken from kept measurements, for metrics
  // The measurement ConfigMaps of the trials that ended (measurements.h), kept before the status
  // is written.
  std::vector<nlohmann::json> measurements;
  std::vector<std::chrono::duration<double>> pendingWaits;  // of those, each run's wait to start
  // GPUs the job waits for, held back from younger jobs (waiting_jobs.h).
  int gpusWaitedFor = 0;
  // Trials it wants now wait for room (GPUs, a quota), with or without GPUs held for them.
  bool waitsForRoom = false;
  // No node watched can hold a trial of it (Unschedulable).
  bool waitsForNode = false;
  std::optional<std::chrono::milliseconds> requeueAfter;
  // A create waits (a quota, the server failing): look again with the work queue's backoff.
  bool retry = false;
  // Of a job that tunes for several GPU models: the AutotuneJobs of its models' searches to
  // create, after the status (models.h).
  std::vector<nlohmann::json> searches;
};

// The plan for a valid job given the engine's decision on question(snapshot), and what applying
// an earlier plan of this reconcile taught.
Plan plan(const Snapshot& snapshot, const tuning::Decision& decision, const Learned& learned = {});

// The search is over and its output ConfigMap `configMap` could not be written: the status says
// why (OutputWritten and Running False) without the final phase, and the write is retried; the
// Event only when the status did not say it yet.
void awaitOutput(Plan& plan, const OutputRefusal& refusal, const std::string& configMap,
                 Timestamp now, std::int64_t generation);

// The plan for a job whose spec is invalid: Failed, naming every error.
Plan refuse(const CachedAutotuneJob& job, const api::FieldErrors& errors, Timestamp now);

// The plan after a reconcile threw: the status with Reconciled=False and the message, and a
// Warning Event.
Plan reconcileThrew(const CachedAutotuneJob& job, const std::string& message, Timestamp now);

}  // namespace autotune::controller
