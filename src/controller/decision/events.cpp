#include "controller/decision/events.h"

#include <map>

#include "api/labels.h"
#include "api/text.h"
#include "controller/objects/conditions.h"
#include "controller/objects/trial_pod.h"
#include "object/read.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

// A failed trial's reason in its Event: enough to tell what ended it.
constexpr std::size_t kReasonInEventBytes = 512;
constexpr std::string_view kReportingComponent = "autotune-operator";

std::string outcomeReason(api::Outcome outcome) {
  switch (outcome) {
    case api::Outcome::kSucceeded:
      return "TrialSucceeded";
    case api::Outcome::kOOM:
      return "TrialOOM";
    default:
      return "TrialFailed";
  }
}

std::string metricText(api::Metric metric, double value) {
  return std::string(api::toString(metric)) + " " + tuning::formatMetricValue(value);
}

}  // namespace

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

JobEvent trialsLaunched(const std::vector<std::pair<std::string, TrialRun>>& launched) {
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(launched.size());
  for (const auto& [trial, run] : launched) {
    items.emplace_back(trial, run.describe());
  }
  return aboutTrials("TrialLaunched", "Normal", "launched", items);
}

std::vector<JobEvent> trialsEnded(const std::vector<api::TrialRecord>& recorded,
                                  api::Metric metric) {
  std::map<api::Outcome, std::vector<std::pair<std::string, std::string>>> byOutcome;
  for (const auto& record : recorded) {
    std::string detail;
    if (record.value) {
      detail = metricText(metric, *record.value);
    } else if (!record.reason.empty()) {
      detail = tuning::tail(record.reason, kReasonInEventBytes);
    }
    byOutcome[record.outcome].emplace_back(record.name, std::move(detail));
  }
  std::vector<JobEvent> events;
  events.reserve(byOutcome.size());
  for (const auto& [outcome, trials] : byOutcome) {
    events.push_back(aboutTrials(outcomeReason(outcome),
                                 outcome == api::Outcome::kSucceeded ? "Normal" : "Warning",
                                 "ended " + std::string(api::toString(outcome)), trials));
  }
  return events;
}

JobEvent trialRelaunched(const std::string& trial, const TrialRun& replaced, Relaunch why,
                         const std::string& because) {
  const std::string_view happened = why == Relaunch::kLost        ? " was lost ("
                                    : why == Relaunch::kPreempted ? " was preempted ("
                                                                  : " was not measured (";
  return {"TrialRelaunched", "Warning", trial + replaced.name,
          "Trial " + trial + std::string(happened) + because + "); launched again"};
}

JobEvent quotaExceeded(const std::string& serverMessage) {
  return {"QuotaExceeded", "Warning", "quota " + object::exceededQuota(serverMessage).value_or(""),
          "A trial waits: its create was refused by a ResourceQuota: " + serverMessage};
}

JobEvent launchRefused(const std::string& message) {
  return {"LaunchRefused", "Warning", "", message};
}

JobEvent afterTuningNameTaken(const std::string& name, const std::string& holder) {
  return {"AfterTuningNameTaken", "Warning", "",
          "The afterTuning Job was not created: Job " + name + " exists and is not this job's (" +
              holder + "); it is left alone. The tuned config is in the output ConfigMap."};
}

JobEvent afterTuningRefused(const std::string& serverMessage) {
  return {"AfterTuningFailed", "Warning", "",
          "The afterTuning Job was refused: " + serverMessage +
              ". The tuned config is in the output ConfigMap."};
}

JobEvent trialsReused(const std::vector<api::TrialRecord>& reused, api::Metric metric) {
  std::vector<std::pair<std::string, std::string>> items;
  items.reserve(reused.size());
  for (const auto& record : reused) {
    const std::string outcome = record.value ? metricText(metric, *record.value)
                                             : std::string(api::toString(record.outcome));
    items.emplace_back(record.name, outcome + " from ConfigMap " + record.reusedFrom);
  }
  return aboutTrials("TrialReused", "Normal", "reused", items);
}

JobEvent mixedGpuModels(const std::set<std::string>& models) {
  std::string named;
  for (const auto& model : models) {
    named += (named.empty() ? "" : ", ") + model;
  }
  return {"MixedGpuModels", "Warning", named,
          "the trials ran on GPUs of " + std::to_string(models.size()) + " models (" + named +
              "): the best config on one is not the best on another, and the best of this search "
              "may be neither's; set spec.gpuModels to tune for one"};
}

JobEvent foreignPod(const Pod& pod) {
  const std::string controller =
      !pod.ownerJobUid.empty() ? "AutotuneJob " + pod.ownerJobName + " of UID " + pod.ownerJobUid
      : !pod.batchJob.empty()  ? "Job " + pod.batchJob + ", which is not a trial of this job's"
                               : "none";
  return {"ForeignPod", "Warning", pod.name,
          "Pod " + pod.name + " carries this job's label " + std::string(api::kJobLabel) +
              " but is not one of its trials (its controller: " + controller +
              "): it is not read, counted or deleted"};
}

JobEvent measurementIgnored(const std::string& message) {
  return {"MeasurementIgnored", "Warning", message,
          "A kept measurement was ignored and its trial runs: " + message};
}

JobEvent measurementNotKept(const std::vector<std::string>& trials, const std::string& why) {
  std::string named;
  for (const auto& trial : trials) {
    named += (named.empty() ? "" : ", ") + trial;
  }
  const std::string what = trials.size() == 1 ? "The measurement of trial " + named + " was"
                                              : "The measurements of trials " + named + " were";
  return {"MeasurementNotKept", "Warning", named, what + " not kept for reuse: " + why};
}

JobEvent measurementNotWritten(const std::vector<std::string>& trials, const std::string& configMap,
                               const std::string& serverError) {
  return measurementNotKept(trials, "ConfigMap " + configMap + ": " + serverError);
}

JobEvent measurementNameTaken(const std::vector<std::string>& trials, const std::string& configMap,
                              NotOurs why, const std::string& holder) {
  const std::string notOurs =
      why == NotOurs::kNotAMeasurement ? "is not a measurement" : "bears no seal of this operator";
  return measurementNotKept(trials, "ConfigMap " + configMap + " exists and " + notOurs + " (" +
                                        holder + "); it is left alone: delete it to keep these");
}

JobEvent localQueueNotFound(const std::string& message) {
  return {std::string(queued::kLocalQueueNotFound), "Warning", "", message};
}

JobEvent queueTimedOut(const std::string& trial, const std::string& message) {
  return {"QueueTimeout", "Warning", trial, message};
}

JobEvent bestImproved(const api::BestTrial& best, api::Metric metric) {
  return {"BestImproved", "Normal", best.trial,
          "Best so far: " + best.trial + " with " + metricText(metric, best.value)};
}

JobEvent searchCompleted(const api::BestTrial& best, const std::string& message,
                         const std::string& configMap) {
  return {std::string(kCompletedReason), "Normal", "",
          "Best trial " + best.trial + "; " + message + "; ConfigMap " + configMap};
}

JobEvent searchFailed(const std::string& message) {
  return {std::string(kSearchFailedReason), "Warning", "", message};
}

JobEvent trialNotMeasured(const std::string& trial, const std::string& message) {
  return {"TrialNotMeasured", "Warning", trial, message};
}

JobEvent invalidSpec(const std::string& message) { return {"InvalidSpec", "Warning", "", message}; }

JobEvent specWarning(std::int64_t generation, const api::FieldErrors& warnings) {
  return {"SpecWarning", "Warning", "generation " + std::to_string(generation),
          listed(warnings, kEventMessageBytes)};
}

JobEvent outputNotWritten(std::string_view reason, const std::string& message) {
  return {std::string(reason), "Warning", "", message};
}

JobEvent reconcileException(const std::string& message) {
  return {"ReconcileException", "Warning", message, message};
}

nlohmann::json eventObject(const nlohmann::json& jobMetadata, const JobEvent& reported,
                           Timestamp now) {
  const std::string jobName = object::text(jobMetadata, "name");
  const std::string ns = object::text(jobMetadata, "namespace");
  const std::string uid = object::text(jobMetadata, "uid");
  const std::string stamp = formatTime(now);
  return {{"apiVersion", "v1"},
          {"kind", "Event"},
          {"metadata",
           {{"name", jobName.substr(0, 200) + "." +
                         tuning::fnv1aHex(uid + reported.reason + reported.subject)},
            {"namespace", ns}}},
          {"involvedObject",
           {{"apiVersion", api::kApiVersion},
            {"kind", api::kKind},
            {"name", jobName},
            {"namespace", ns},
            {"uid", uid}}},
          {"reason", reported.reason},
          {"message", api::headOf(reported.message, kEventMessageBytes)},
          {"type", reported.type},
          {"source", {{"component", kReportingComponent}}},
          {"reportingComponent", kReportingComponent},
          {"firstTimestamp", stamp},
          {"lastTimestamp", stamp},
          {"count", 1}};
}

}  // namespace autotune::controller
