#pragma once
// What the controller reports on a job as Kubernetes Events, and every Event's words. An Event's
// name derives from the job, its reason and its subject, so that the same report made twice (a
// reconcile run again after a restart) is one Event.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/job.h"
#include "controller/objects/objects.h"
#include "controller/objects/trial_run.h"

namespace autotune::controller {

// An Event's message is cut to this.
inline constexpr std::size_t kEventMessageBytes = 1024;
// The reasons of a job's last Event: its search ended.
inline constexpr std::string_view kCompletedReason = "Completed";
inline constexpr std::string_view kSearchFailedReason = "SearchFailed";

struct JobEvent {
  std::string reason;
  std::string type;     // Normal or Warning
  std::string subject;  // what it is about (a trial), which with the reason names it
  std::string message;
};

// One Event about several trials that one reconcile saw alike (launched, or ended Succeeded, OOM
// or Failed), so that a job's Events stay readable in `kubectl describe` at any parallelism:
// "Trial a launched as Pod p" for one, "3 trials launched: a (Pod p); b (Pod q); c (Pod r)" for
// more. Each item is a trial's name and what to say of it.
JobEvent aboutTrials(const std::string& reason, const std::string& type, const std::string& verb,
                     const std::vector<std::pair<std::string, std::string>>& trials);

// Trials whose runs were created, each with its run.
JobEvent trialsLaunched(const std::vector<std::pair<std::string, TrialRun>>& launched);

// One Event per outcome (TrialSucceeded, TrialOOM, TrialFailed) for the trials recorded together.
std::vector<JobEvent> trialsEnded(const std::vector<api::TrialRecord>& recorded,
                                  api::Metric metric);

// Why a trial runs again: its run was lost (evicted, its node gone, deleted while running), it
// was not measured (never started, or its run vanished unseen), or it was preempted (by a higher
// priority, a drain or a queueing system: this spends none of its relaunches).
enum class Relaunch { kLost, kNotMeasured, kPreempted };
JobEvent trialRelaunched(const std::string& trial, const TrialRun& replaced, Relaunch why,
                         const std::string& because);

// A create refused by a ResourceQuota, once per quota named in `serverMessage`.
JobEvent quotaExceeded(const std::string& serverMessage);
// A create refused for good (Pod Security, a policy, a webhook, an invalid object).
JobEvent launchRefused(const std::string& message);
JobEvent queueTimedOut(const std::string& trial, const std::string& message);
// The afterTuning Job was not created: a Job of its name exists and is not this job's (`holder`
// says whose it is).
JobEvent afterTuningNameTaken(const std::string& name, const std::string& holder);
// The API server refused the afterTuning Job for good: `serverMessage` says why.
JobEvent afterTuningRefused(const std::string& serverMessage);
// Trials whose results were taken from measurements kept before (recall.h): "Trial a reused:
// OOM (from ConfigMap m)".
JobEvent trialsReused(const std::vector<api::TrialRecord>& reused, api::Metric metric);
// A Pod labelled for the job that is not one of its trials (Snapshot::foreignPods).
JobEvent foreignPod(const Pod& pod);
// The job's trials ran on GPUs of several models (`models`, at least two), without spec.gpuModels.
JobEvent mixedGpuModels(const std::set<std::string>& models);
// A kept measurement that could have stood for a trial and cannot: the trial runs.
JobEvent measurementIgnored(const std::string& message);
// Finished trials' measurements could not be kept (the API refused them, or one is too large).
JobEvent measurementNotKept(const std::vector<std::string>& trials, const std::string& why);
// The API server did not take the measurements' ConfigMap `configMap`: `serverError` says why.
JobEvent measurementNotWritten(const std::vector<std::string>& trials, const std::string& configMap,
                               const std::string& serverError);
// Why a ConfigMap at a measurement's name is not the operator's to write over.
enum class NotOurs { kNotAMeasurement, kUnsealed };
// Finished trials' measurements were not kept: a ConfigMap that is not the operator's (`why`),
// made by `holder` (holderOf), holds their ConfigMap's name `configMap`, and is left alone.
JobEvent measurementNameTaken(const std::vector<std::string>& trials, const std::string& configMap,
                              NotOurs why, const std::string& holder);
// spec.queueName names a Kueue LocalQueue its namespace does not have.
JobEvent localQueueNotFound(const std::string& message);

JobEvent bestImproved(const api::BestTrial& best, api::Metric metric);
JobEvent searchCompleted(const api::BestTrial& best, const std::string& message,
                         const std::string& configMap);
JobEvent searchFailed(const std::string& message);
JobEvent trialNotMeasured(const std::string& trial, const std::string& message);
JobEvent invalidSpec(const std::string& message);
JobEvent specWarning(std::int64_t generation, const api::FieldErrors& warnings);
JobEvent outputNotWritten(std::string_view reason, const std::string& message);
JobEvent reconcileException(const std::string& message);

// The core/v1 Event reporting `reported` on the job with `metadata`, stamped `now`.
nlohmann::json eventObject(const nlohmann::json& jobMetadata, const JobEvent& reported,
                           Timestamp now);

}  // namespace autotune::controller
