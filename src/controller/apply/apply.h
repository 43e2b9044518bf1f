#pragma once
// The one step of a reconcile with effects: a Plan carried out against the API
// server in the order that makes a crash at any point harmless: the output before the final
// status; the status (with new results, and counting the trials about to start) before any run
// is created or deleted; Events last. What each write returns goes into the cache at once. Apply
// performs and reports what it learned; it decides nothing and words no message.

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "api/job.h"
#include "controller/cache/cluster.h"
#include "controller/decision/plan.h"
#include "k8s/client.h"
#include "observability/log.h"
#include "runtime/manager.h"

namespace autotune::controller {

inline const k8s::Resource kAutotuneJobs{"autotune.io", "v1alpha1", "autotunejobs", true};

// What one reconcile runs with: its logger (carrying the job and the reconcile's ID), the time it
// reads the world at, and the token stopped once this replica may no longer write
// (runtime::Manager::leadership).
struct Context {
  observability::Logger log;
  Timestamp now;
  std::stop_token leadership;
};

// Told as things happen, for metrics; each may be left empty.
struct ReconcilerHooks {
  std::function<void(const api::AutotuneJob& job, const std::string& trial)> trialLaunched;
  std::function<void(const api::AutotuneJob& job, Relaunch why)> trialRelaunched;
  std::function<void(const api::AutotuneJob& job, const api::TrialRecord& record)> trialFinished;
  // A trial's result taken from a kept measurement (TrialRecord::reusedFrom).
  std::function<void(const api::AutotuneJob& job, const api::TrialRecord& record)> trialReused;
  // How long a finished trial's run waited for a node and its container's start.
  std::function<void(std::chrono::duration<double> waited)> trialPending;
  // How long the job waited from its creation to the launch of its first trial.
  std::function<void(std::chrono::duration<double> sinceCreation)> firstTrialLaunched;
  std::function<void(const std::string& ns, const std::string& name)> jobGone;
  // Takes the reconcile's Events (eventObject) to post them off its path (EventSender); when
  // empty, the reconcile posts each itself.
  std::function<void(nlohmann::json event)> sendEvent;
};

// How a reconcile that the API server stopped is looked at again. After a Conflict it read the job
// as it was before another write, whose watch event wakes it once the cache holds it; a look a
// second on guards against a lost event, with no backoff: nothing failed. After anything else,
// with the work queue's backoff.
runtime::ReconcileResult stoppedBy(const k8s::Error& error);

// How the plan takes a create the API server refused with this error (Refusal).
Refusal refusalOf(const k8s::Error& error);

// Takes api::kTrialResultFinalizer off the Pod, as the cache last saw it (its resourceVersion a
// precondition: one changed since is left to the reconcile its change brings), once the written
// status accounts for it or nothing ever will.
void letGo(const k8s::Client& client, const observability::Logger& log, const Pod& pod);
// Lets go of the Pods labelled for a job that is gone or being deleted that are being deleted and
// that no live job of the cache owns: those garbage collection deletes after their AutotuneJob.
void letGoOfOrphans(const k8s::Client& client, const Cluster& cluster,
                    const observability::Logger& log, const std::string& ns,
                    const std::string& jobName);

// One reconcile's effects on one job, each step only after the one before went through.
class Apply {
 public:
  // `job` as the reconcile read it: the status it holds is what the first write compares with,
  // and its resourceVersion what that write is conditional on.
  Apply(const k8s::Client& client, Cluster& cluster, const ReconcilerHooks& hooks,
        const Context& context, const CachedAutotuneJob& job);

  // The output and the afterTuning Job when the search is over, then the status. The status
  // write is conditional on the resourceVersion read, so a reconcile that read a stale job stops
  // here, before it can launch anything twice. Returns what it learned (the output refused: then
  // nothing else is written), or the error that stopped it (stoppedBy).
  k8s::Result<Learned> write(const api::AutotuneJob& job, const Plan& plan);
  // Creates the plan's runs, after write(). Learns the names taken by objects the job does not
  // own.
  Learned launch(const api::AutotuneJob& job, const Plan& plan);
  // Creates the AutotuneJobs of a job's GPU models' searches (models.h), after write(). Learns
  // the creates the API server refused.
  Learned createSearches(const Plan& plan);
  // Deletes what the recorded status no longer needs, then the Events and the metrics.
  runtime::ReconcileResult finish(const api::AutotuneJob& job, const Plan& plan);

  // The plan of an invalid job: its status and Event.
  runtime::ReconcileResult refused(const Plan& plan);
  // What a reconcile that threw leaves on its job (reconcileThrew): its status, and its Event
  // whether or not the status took it.
  void reportException(const Plan& plan);

 private:
  // Creates the output ConfigMap, or applies it over one this job controls. Anyone else's is left
  // alone: server-side apply with force would take it over, and garbage collection would then
  // delete it with the job.
  k8s::Result<Learned> afterTuningHeld(const api::AutotuneJob& job,
                                       const nlohmann::json& afterTuning);
  std::optional<OutputRefusal> writeOutput(const api::AutotuneJob& job,
                                           const nlohmann::json& configMap);
  // Creates a measurement ConfigMap, or writes it over the operator's own of that name (the same
  // measurements, written again after a crash, or edited into something unusable), keys added by
  // hand and all. Anything that keeps it from being written is reported, and the job goes on.
  // Whether it was written.
  bool keepMeasurement(const nlohmann::json& unsealed);
  k8s::Result<nlohmann::json> writeKept(const nlohmann::json& configMap);
  void forgetBeyondBound(const JustKept& justKept);
  k8s::Result<void> writeStatus(const api::Status& status);
  // Returns false when the run was not created by this call; a name taken, or a create refused,
  // goes into `learned`.
  bool createRun(const RunLaunch& launch, Learned& learned);
  bool createPod(const RunLaunch& launch, Learned& learned);
  bool createBatchJob(const RunLaunch& launch, Learned& learned);
  struct Made {
    nlohmann::json object;
    bool byThisCall = false;  // else it was there already, the job's
  };
  std::optional<Made> create(const k8s::Resource& resource, const nlohmann::json& object,
                             const RunLaunch& launch, Learned& learned);
  void remove(const TrialRun& run);
  std::vector<Shared<Pod>> podsOf(const TrialRun& run) const;
  bool removeSeen(const k8s::Resource& resource, const std::string& name, const std::string& uid);
  // Asks the API server about a node the Node cache lacks: Cluster::missingNodes.
  void lookUpNode(const std::string& name);
  void report(const std::vector<JobEvent>& events);
  // Trials were just launched: the first of the job's, when its status counted none before.
  void reportFirstLaunch(const api::AutotuneJob& job);

  const k8s::Client& client_;
  Cluster& cluster_;
  const ReconcilerHooks& hooks_;
  const Context& context_;
  const CachedAutotuneJob& job_;
  const std::string namespace_;
  nlohmann::json metadata_;  // the job's, with the resourceVersion of the last write
  nlohmann::json written_;   // the status the API server holds, encoded
};

}  // namespace autotune::controller
