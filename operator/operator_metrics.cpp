#include "operator_metrics.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/resources.h"
#include "object/read.h"
#include "tuning/naming.h"

namespace autotune::wiring {
namespace {

using nlohmann::json;

std::string outcomeLabel(api::Outcome outcome) { return std::string(api::toString(outcome)); }

std::string relaunchLabel(controller::Relaunch why) {
  switch (why) {
    case controller::Relaunch::kLost:
      return "lost";
    case controller::Relaunch::kPreempted:
      return "preempted";
    case controller::Relaunch::kNotMeasured:
      break;
  }
  return "not_measured";
}

// Gauges over the whole cluster view: jobs by phase and GPU slots.
void publishClusterGauges(const controller::Cluster& cluster, observability::Metrics& metrics) {
  const auto phases = cluster.jobsByPhase();
  for (const auto phase : observability::kJobPhases) {
    const auto found = phases.find(phase);
    metrics.jobsInPhase(phase, found == phases.end() ? 0 : found->second);
  }
  const auto capacity = cluster.capacity();
  metrics.gpuSlots(capacity.used(), capacity.total());
}

// The GPU model the job's best ran on: its result's, or of a job that tunes for several, its
// primary search's. The status is anyone's to write who may write the job's: the caller bounds it
// as a label value.
std::string gpuModelOfBest(const controller::CachedAutotuneJob& job) {
  const api::Status& status = job.status;
  if (const auto ran =
          std::ranges::find(status.results, status.best->trial, &api::TrialRecord::name);
      ran != status.results.end()) {
    return ran->gpuModel;
  }
  const api::ModelSearch* primary =
      job.decoded ? api::primarySearch(job.decoded->job.spec, status) : nullptr;
  return primary != nullptr ? primary->gpuModel : "";
}

// A job's per-job gauges, from its status as the cache holds it.
observability::JobFigures figuresOf(const controller::CachedAutotuneJob& job) {
  const api::Status& status = job.status;
  const std::string_view key = job.key;
  const auto slash = key.find('/');
  observability::JobFigures figures;
  figures.ns = std::string(key.substr(0, slash));
  figures.name = std::string(key.substr(slash + 1));
  figures.phase = std::string(api::toString(status.phase));
  // A job that tunes for several GPU models adds up its searches' trials, which each report
  // their own: counted twice, a sum over jobs would lie.
  if (status.gpuModels.empty()) {
    const api::TrialCounts& trials = status.trials;
    figures.trials = {{"launched", trials.launched},
                      {"pending", trials.pending},
                      {"queued", trials.queued},
                      {"running", trials.running},
                      {"succeeded", trials.succeeded},
                      {"failed", trials.failed},
                      {"oom", trials.oom},
                      {"timedOut", trials.timedOut},
                      {"pruned", trials.pruned},
                      {"awaitingAdmission", trials.awaitingAdmission}};
  }
  if (status.best) {
    figures.best = {std::string(api::toString(status.best->metric)), status.best->value,
                    tuning::boundedName(gpuModelOfBest(job), api::kMaxRecordedGpuModel)};
  }
  return figures;
}

}  // namespace

// What the reconciler reports becomes metrics.
controller::ReconcilerHooks reconcilerHooks(observability::Metrics& metrics) {
  controller::ReconcilerHooks hooks;
  hooks.trialLaunched = [&metrics](const api::AutotuneJob& job, const std::string& /*trial*/) {
    metrics.trialLaunched(job.namespaceName(), job.name());
  };
  hooks.trialRelaunched = [&metrics](const api::AutotuneJob& job, controller::Relaunch why) {
    metrics.trialRelaunched(job.namespaceName(), job.name(), relaunchLabel(why));
  };
  hooks.trialPending = [&metrics](std::chrono::duration<double> waited) {
    metrics.trialPending(waited);
  };
  hooks.firstTrialLaunched = [&metrics](std::chrono::duration<double> sinceCreation) {
    metrics.firstTrialLaunched(sinceCreation);
  };
  hooks.trialFinished = [&metrics](const api::AutotuneJob& job, const api::TrialRecord& record) {
    metrics.trialFinished(job.namespaceName(), job.name(), outcomeLabel(record.outcome),
                          observability::Seconds(record.durationSeconds),
                          job.spec.resources.gpusPerTrial);
  };
  hooks.trialReused = [&metrics](const api::AutotuneJob& job, const api::TrialRecord& record) {
    metrics.trialReused(job.namespaceName(), job.name(), outcomeLabel(record.outcome),
                        observability::Seconds(record.durationSeconds),
                        job.spec.resources.gpusPerTrial);
  };
  hooks.jobGone = [&metrics](const std::string& ns, const std::string& name) {
    metrics.forgetJob(ns, name);
  };
  return hooks;
}

runtime::ManagerHooks managerHooks(observability::Metrics& metrics,
                                   const observability::Logger& log,
                                   const runtime::Manager& manager,
                                   const controller::Cluster& cluster) {
  runtime::ManagerHooks managerHooks;
  managerHooks.reconciled = [&metrics, log, &manager, &cluster](
                                const std::string& key, const runtime::ReconcileResult& result,
                                runtime::Duration took) {
    metrics.reconciled(result.exception      ? observability::ReconcileOutcome::kException
                       : result.failed       ? observability::ReconcileOutcome::kError
                       : result.requeueAfter ? observability::ReconcileOutcome::kRequeue
                                             : observability::ReconcileOutcome::kSuccess,
                       std::chrono::duration_cast<observability::Seconds>(took));
    metrics.workqueueDepth(manager.queue().len());
    publishClusterGauges(cluster, metrics);
    if (result.exception) {
      log.error("reconcile threw; retried with backoff",
                {{"job", key}, {"error", *result.exception}});
    } else {
      log.debug("reconciled", {{"job", key}, {"failed", result.failed}});
    }
  };
  managerHooks.watchRestarted = [&metrics, log](const runtime::WatchTarget& target,
                                                runtime::RestartReason reason) {
    metrics.watchRestarted(target.resource.plural, runtime::toString(reason));
    log.info("watch restarted", {{"resource", target.resource.plural},
                                 {"reason", std::string(runtime::toString(reason))}});
  };
  managerHooks.leadership = [&metrics, log](bool leading) {
    metrics.leading(leading);
    log.info(leading ? "leading: reconciling" : "not leading: reconciles stopped");
  };
  return managerHooks;
}

controller::EventSenderHooks eventSenderHooks(observability::Metrics& metrics,
                                              const observability::Logger& log,
                                              const controller::Cluster& cluster) {
  controller::EventSenderHooks hooks;
  // An Event about a job deleted meanwhile would be refused with its namespace, or read by no one.
  hooks.exists = [&cluster](const json& involved) {
    const auto job =
        cluster.job(object::text(involved, "namespace") + "/" + object::text(involved, "name"));
    return job && object::text(job->metadata, "uid") == object::text(involved, "uid");
  };
  hooks.failed = [log](const std::string& reason, const k8s::Error& error) {
    log.warn("could not record an Event", {{"reason", reason}, {"error", k8s::describe(error)}});
  };
  hooks.dropped = [&metrics](std::size_t count) { metrics.eventsDropped(count); };
  return hooks;
}

void declareWatches(observability::Metrics& metrics, bool kueue) {
  std::vector<std::string> plurals = {"autotunejobs", "pods", "jobs", "nodes", "configmaps"};
  if (kueue) {
    plurals.insert(plurals.end(), {k8s::kWorkloads.plural, k8s::kLocalQueues.plural});
  }
  for (const auto& plural : plurals) {
    for (const auto reason : {runtime::RestartReason::kExpired, runtime::RestartReason::kGone,
                              runtime::RestartReason::kDropped, runtime::RestartReason::kListFailed,
                              runtime::RestartReason::kWatchFailed}) {
      metrics.watchDeclared(plural, runtime::toString(reason));
    }
  }
}

void readJobFiguresFrom(const controller::Cluster& cluster, observability::Metrics& metrics) {
  metrics.readJobsFrom([&cluster] {
    std::vector<observability::JobFigures> figures;
    for (const auto& job : cluster.jobs()) {
      figures.push_back(figuresOf(*job));
    }
    return figures;
  });
}

}  // namespace autotune::wiring
