#include "controller/apply.h"

#include <utility>

#include "api/codec.h"
#include "api/text.h"
#include "controller/output.h"
#include "controller/trial_pod.h"
#include "k8s/object.h"
#include "k8s/resources.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

constexpr std::string_view kFieldManager = "autotune-operator";
constexpr std::size_t kEventMessageBytes = 1024;

bool alreadyExists(const k8s::Result<json>& result) {
  return !result && result.error().kind == k8s::ErrorKind::kAlreadyExists;
}

// The job's identity for a write of its status subresource: the API server keeps everything
// else as it is and checks resourceVersion, so a write from a stale read is a Conflict.
json statusUpdate(const json& metadata, const json& status) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kKind},
          {"metadata",
           {{"name", k8s::text(metadata, "name")},
            {"namespace", k8s::text(metadata, "namespace")},
            {"uid", k8s::text(metadata, "uid")},
            {"resourceVersion", k8s::text(metadata, "resourceVersion")}}},
          {"status", status}};
}

}  // namespace

Apply::Apply(const k8s::Client& client, Cluster& cluster, const ReconcilerHooks& hooks,
             const Context& context, const Job& job)
    : client_(client),
      cluster_(cluster),
      hooks_(hooks),
      context_(context),
      job_(job),
      multiNode_(job.decoded && job.decoded->job.spec.resources.nodesPerTrial > 1),
      metadata_(job.metadata),
      written_(api::encode(job.status)) {}

bool Apply::write(const Snapshot& snapshot, const Plan& plan) {
  const api::AutotuneJob& job = snapshot.job;
  if (plan.output) {
    if (const auto refused = writeOutput(job, *plan.output)) {
      context_.log.warn("could not write the output", {{"configMap", job.spec.output.configMapName},
                                                       {"reason", refused->reason},
                                                       {"error", refused->message}});
      const OutputFailure failure = outputNotWritten(snapshot, *plan.output, *refused);
      if (writeStatus(failure.status, &job) && failure.event) {
        report(*failure.event);
      }
      return false;
    }
  }
  if (plan.afterTuning) {
    auto created = client_.create(k8s::kBatchJobs, job.namespaceName(), *plan.afterTuning);
    if (!created && !alreadyExists(created)) {
      context_.log.warn("could not create the afterTuning Job",
                        {{"error", k8s::describe(created.error())}});
      return false;
    }
  }
  return writeStatus(plan.status, &job);
}

std::optional<OutputRefusal> Apply::writeOutput(const api::AutotuneJob& job, const Output& output) {
  const std::string& name = job.spec.output.configMapName;
  const auto failed = [](const k8s::Error& error) {
    return OutputRefusal{"OutputWriteFailed", k8s::describe(error)};
  };
  auto created = client_.create(k8s::kConfigMaps, job.namespaceName(), output.configMap);
  if (created) {
    return std::nullopt;
  }
  if (!alreadyExists(created)) {
    return failed(created.error());
  }
  auto existing = client_.get(k8s::kConfigMaps, job.namespaceName(), name);
  if (!existing) {
    return failed(existing.error());
  }
  if (!isOutputOf(*existing, job.uid())) {
    return OutputRefusal{"OutputConflict", "it exists and is not this job's output (" +
                                               holderOf(*existing) +
                                               "), so it is left as it is; delete it, or create "
                                               "the job again with another "
                                               "spec.output.configMapName"};
  }
  auto applied = client_.patch(k8s::kConfigMaps, job.namespaceName(), name, k8s::PatchType::kApply,
                               output.configMap, {std::string(kFieldManager), true});
  if (!applied) {
    return failed(applied.error());
  }
  return std::nullopt;
}

std::set<std::string> Apply::launch(const Snapshot& snapshot, const Plan& plan) {
  const api::AutotuneJob& job = snapshot.job;
  std::set<std::string> taken;
  std::vector<std::pair<std::string, std::string>> launched;
  for (const auto& launch : plan.launches) {
    // The status written a moment ago counts these trials as launched; a new leader reads it and
    // may have recorded and deleted one since. Creating its Pod now would run it twice.
    if (context_.leadership.stop_requested()) {
      context_.log.info("leadership in doubt: no more trial launches");
      break;
    }
    const std::string podName = k8s::text(k8s::metadataOf(launch.pod), "name");
    if (launch.service) {
      if (!createTrialJob(launch)) {
        continue;  // not created, or there already
      }
    } else if (auto created = client_.create(k8s::kPods, job.namespaceName(), launch.pod);
               created) {
      cluster_.wrotePod(*created);
    } else if (!alreadyExists(created)) {
      context_.log.warn("could not launch a trial",
                        {{"trial", launch.trial}, {"error", k8s::describe(created.error())}});
      continue;
    } else {
      // Ours from an earlier reconcile the cache has not caught up with, or someone else's.
      auto existing = client_.get(k8s::kPods, job.namespaceName(), podName);
      if (existing && !k8s::controlledBy(*existing, job.uid())) {
        taken.insert(podName);
      }
      continue;
    }
    if (!launch.replaces.empty()) {
      report({"TrialRelaunched", "Warning", launch.trial + launch.replaces,
              "Trial " + launch.trial +
                  (launch.relaunch == Relaunch::kLost ? " was lost (" : " was not measured (") +
                  launch.relaunchedBecause + "); launched again"});
      if (hooks_.trialRelaunched) {
        hooks_.trialRelaunched(job, launch.relaunch);
      }
      remove(launch.replaces);
      continue;
    }
    launched.emplace_back(launch.trial, (launch.service ? "Job " : "Pod ") + podName);
    context_.log.info("trial launched", {{"trial", launch.trial}});
    if (hooks_.trialLaunched) {
      hooks_.trialLaunched(job, launch.trial);
    }
  }
  if (!launched.empty()) {
    report(aboutTrials("TrialLaunched", "Normal", "launched", launched));
  }
  return taken;
}

// A multi-node trial's Service, then its batch Job. A Job of that name already there is left as
// it is: when it is not this job's, its Pods do not name this job, so the trial is never seen
// running and runs again under another name.
bool Apply::createTrialJob(const PodLaunch& launch) {
  const std::string ns = k8s::text(metadata_, "namespace");
  const std::string name = k8s::text(k8s::metadataOf(launch.pod), "name");
  auto service = client_.create(k8s::kServices, ns, *launch.service);
  if (!service && !alreadyExists(service)) {
    context_.log.warn("could not create a multi-node trial's Service",
                      {{"trial", launch.trial}, {"error", k8s::describe(service.error())}});
    return false;
  }
  auto created = client_.create(k8s::kBatchJobs, ns, launch.pod);
  if (!created) {
    if (!alreadyExists(created)) {
      context_.log.warn("could not launch a trial",
                        {{"trial", launch.trial}, {"error", k8s::describe(created.error())}});
    }
    return false;
  }
  cluster_.createdTrialJob(ns + "/" + name, context_.now);
  return true;
}

runtime::ReconcileResult Apply::finish(const Snapshot& snapshot, const Plan& plan) {
  // The finished trials are recorded in the status written before; only now may their Pods go,
  // so a crash in between loses nothing.
  for (const auto& name : plan.deletions) {
    remove(name);
  }
  for (const auto& name : plan.nodesToLookUp) {
    lookUpNode(name);
  }
  for (const auto& event : plan.events) {
    report(event);
  }
  for (const auto& finished : plan.finished) {
    context_.log.info("trial finished",
                      {{"trial", finished.name},
                       {"outcome", std::string(api::toString(finished.outcome))},
                       {"value", finished.value ? json(*finished.value) : json()}});
    if (hooks_.trialFinished) {
      hooks_.trialFinished(snapshot.job, finished);
    }
  }
  if (hooks_.trialPending) {
    for (const auto waited : plan.pendingWaits) {
      hooks_.trialPending(waited);
    }
  }
  return runtime::ReconcileResult::after(plan.requeueAfter);
}

runtime::ReconcileResult Apply::refused(const Plan& plan) {
  if (!writeStatus(plan.status, nullptr)) {
    return runtime::ReconcileResult::retry();
  }
  for (const auto& event : plan.events) {
    report(event);
  }
  return {};
}

void Apply::reportException(const std::string& message) {
  writeStatus(reconcileThrew(job_, message, context_.now), nullptr);
  report({"ReconcileException", "Warning", message, message});
}

// Writes `status` when it differs from what the API server holds. A Conflict (the cache was
// behind) fails the reconcile, which is retried on a fresher read.
bool Apply::writeStatus(const api::Status& status, const api::AutotuneJob* job) {
  json encoded = api::encode(status);
  if (encoded == written_) {
    return true;
  }
  auto written = client_.updateStatus(kAutotuneJobs, k8s::text(metadata_, "namespace"),
                                      statusUpdate(metadata_, encoded));
  if (!written) {
    context_.log.warn("could not write the status", {{"error", k8s::describe(written.error())}});
    return false;
  }
  metadata_["resourceVersion"] = k8s::versionOf(*written);
  written_ = std::move(encoded);
  cluster_.wroteStatus(*written, context_.now);
  if (job != nullptr && hooks_.statusWritten) {
    hooks_.statusWritten(*job, status);
  }
  context_.log.debug("status written", {{"phase", std::string(api::toString(status.phase))}});
  return true;
}

void Apply::lookUpNode(const std::string& name) {
  auto node = client_.get(k8s::kNodes, "", name);
  if (node || node.error().kind == k8s::ErrorKind::kNotFound) {
    cluster_.nodeLookedUp(name, node.has_value(), context_.now);
    return;
  }
  context_.log.warn("could not look up a node the Node cache lacks",
                    {{"node", name}, {"error", k8s::describe(node.error())}});
}

void Apply::remove(const std::string& name) {
  const std::string ns = k8s::text(metadata_, "namespace");
  if (multiNode_) {
    removeTrialJob(name);
    return;
  }
  auto removed = client_.remove(k8s::kPods, ns, name);
  if (!removed && removed.error().kind != k8s::ErrorKind::kNotFound) {
    context_.log.warn("could not delete a Pod",
                      {{"pod", name}, {"error", k8s::describe(removed.error())}});
    return;
  }
  if (const auto cached = cluster_.pod(ns + "/" + name)) {
    cluster_.deletingPod(*cached);
  }
}

// A multi-node trial's batch Job, whose Pods garbage collection deletes with it, and its Service.
void Apply::removeTrialJob(const std::string& name) {
  const std::string ns = k8s::text(metadata_, "namespace");
  for (const auto* resource : {&k8s::kBatchJobs, &k8s::kServices}) {
    auto removed = client_.remove(*resource, ns, name, k8s::Propagation::kBackground);
    if (!removed && removed.error().kind != k8s::ErrorKind::kNotFound) {
      context_.log.warn("could not delete a multi-node trial",
                        {{"name", name},
                         {"resource", resource->plural},
                         {"error", k8s::describe(removed.error())}});
      return;
    }
  }
  cluster_.deletedTrialJob(ns + "/" + name);
  // So that the reconciles before garbage collection reaches them do not delete the Job again.
  for (const auto& pod : cluster_.podsLabelled(ns, jobLabelValue(k8s::text(metadata_, "name")))) {
    if (pod->trialJob == name && !pod->deleting) {
      cluster_.deletingPod(*pod);
    }
  }
}

// Creates an Event on the job. Its name derives from what it reports, so a reconcile that runs
// again after a restart does not report the same thing twice.
void Apply::report(const JobEvent& reported) {
  const std::string jobName = k8s::text(metadata_, "name");
  const std::string ns = k8s::text(metadata_, "namespace");
  const std::string uid = k8s::text(metadata_, "uid");
  const std::string now = formatTime(context_.now);
  const json event = {{"apiVersion", "v1"},
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
                      {"source", {{"component", kFieldManager}}},
                      {"reportingComponent", kFieldManager},
                      {"firstTimestamp", now},
                      {"lastTimestamp", now},
                      {"count", 1}};
  auto created = client_.create(k8s::kEvents, ns, event);
  if (!created && !alreadyExists(created)) {
    context_.log.warn("could not record an Event",
                      {{"reason", reported.reason}, {"error", k8s::describe(created.error())}});
  }
}

}  // namespace autotune::controller
