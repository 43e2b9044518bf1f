#include "controller/apply/apply.h"

#include <chrono>
#include <set>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/labels.h"
#include "controller/objects/output.h"
#include "controller/objects/trial_pod.h"
#include "k8s/resources.h"
#include "object/read.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

constexpr std::string_view kFieldManager = "autotune-operator";

bool alreadyExists(const k8s::Result<json>& result) {
  return !result && result.error().kind == k8s::ErrorKind::kAlreadyExists;
}

bool failedBut(const k8s::Result<json>& result, k8s::ErrorKind allowed) {
  return !result && result.error().kind != allowed;
}

// The job's identity for a write of its status subresource: the API server keeps everything
// else as it is and checks resourceVersion, so a write from a stale read is a Conflict.
json statusUpdate(const json& metadata, const json& status) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kKind},
          {"metadata",
           {{"name", object::text(metadata, "name")},
            {"namespace", object::text(metadata, "namespace")},
            {"uid", object::text(metadata, "uid")},
            {"resourceVersion", object::text(metadata, "resourceVersion")}}},
          {"status", status}};
}

}  // namespace

Apply::Apply(const k8s::Client& client, Cluster& cluster, const ReconcilerHooks& hooks,
             const Context& context, const CachedAutotuneJob& job)
    : client_(client),
      cluster_(cluster),
      hooks_(hooks),
      context_(context),
      job_(job),
      namespace_(object::text(job.metadata, "namespace")),
      metadata_(job.metadata),
      written_(api::encode(job.status)) {}

runtime::ReconcileResult stoppedBy(const k8s::Error& error) {
  constexpr auto kAfterConflict = std::chrono::seconds(1);
  if (error.kind == k8s::ErrorKind::kConflict) {
    return runtime::ReconcileResult::after(
        std::chrono::duration_cast<runtime::Duration>(kAfterConflict));
  }
  return runtime::ReconcileResult::retry();
}

Refusal refusalOf(const k8s::Error& error) {
  switch (error.kind) {
    case k8s::ErrorKind::kForbidden:
      if (object::exceededQuota(error.message)) {
        return Refusal::kQuota;
      }
      // RBAC: the operator's own rights, which an administrator can mend.
      if (error.message.find("cannot create resource") != std::string::npos) {
        return Refusal::kTransient;
      }
      return Refusal::kForGood;
    case k8s::ErrorKind::kInvalid:
    case k8s::ErrorKind::kBadRequest:
      return Refusal::kForGood;
    default:
      return Refusal::kTransient;
  }
}

k8s::Result<Learned> Apply::write(const api::AutotuneJob& job, const Plan& plan) {
  JustKept kept;
  for (const auto& measurement : plan.measurements) {
    if (keepMeasurement(measurement)) {
      kept.emplace(object::text(object::metadataOf(measurement), "name"),
                   object::member(measurement, "data").size() / 2);
    }
  }
  if (!kept.empty()) {
    forgetBeyondBound(kept);
  }
  if (plan.output) {
    if (auto refused = writeOutput(job, *plan.output)) {
      context_.log.warn("could not write the output", {{"configMap", job.spec.output.configMapName},
                                                       {"reason", refused->reason},
                                                       {"detail", refused->detail}});
      Learned learned;
      learned.outputRefused = std::move(refused);
      return learned;
    }
  }
  if (plan.afterTuning) {
    auto created = client_.create(k8s::kBatchJobs, namespace_, *plan.afterTuning);
    if (failedBut(created, k8s::ErrorKind::kAlreadyExists)) {
      if (refusalOf(created.error()) == Refusal::kForGood) {
        Learned learned;
        learned.afterTuningRefused = created.error().message;
        return learned;
      }
      context_.log.warn("could not create the afterTuning Job",
                        {{"error", k8s::describe(created.error())}});
      return tl::unexpected(created.error());
    }
    if (!created) {
      if (auto held = afterTuningHeld(job, *plan.afterTuning); !held || !held->empty()) {
        return held;
      }
    }
  }
  return writeStatus(plan.status).map([] { return Learned{}; });
}

// A create of the afterTuning Job that found its name taken: by this job's own Job (a reconcile
// cut short after creating it), which is how things should be, or by someone else's, which is
// left alone and not named as the job's.
k8s::Result<Learned> Apply::afterTuningHeld(const api::AutotuneJob& job, const json& afterTuning) {
  const std::string name = object::text(object::metadataOf(afterTuning), "name");
  auto existing = client_.get(k8s::kBatchJobs, namespace_, name);
  if (!existing) {
    context_.log.warn("could not read the afterTuning Job",
                      {{"job", name}, {"error", k8s::describe(existing.error())}});
    return tl::unexpected(existing.error());
  }
  if (const json* controller = object::controllerOf(*existing);
      controller != nullptr && object::text(*controller, "uid") == job.uid()) {
    return Learned{};
  }
  Learned learned;
  learned.afterTuningTaken = holderOf(*existing);
  return learned;
}

std::optional<OutputRefusal> Apply::writeOutput(const api::AutotuneJob& job,
                                                const json& configMap) {
  const std::string& name = job.spec.output.configMapName;
  const auto failed = [](const k8s::Error& error) {
    return OutputRefusal{"OutputWriteFailed", k8s::describe(error)};
  };
  auto created = client_.create(k8s::kConfigMaps, namespace_, configMap);
  if (created) {
    return std::nullopt;
  }
  if (!alreadyExists(created)) {
    return failed(created.error());
  }
  auto existing = client_.get(k8s::kConfigMaps, namespace_, name);
  if (!existing) {
    return failed(existing.error());
  }
  if (!isOutputOf(*existing, job.uid())) {
    return OutputRefusal{kOutputConflict, holderOf(*existing)};
  }
  auto applied = client_.patch(k8s::kConfigMaps, namespace_, name, k8s::PatchType::kApply,
                               configMap, {std::string(kFieldManager), true});
  if (!applied) {
    return failed(applied.error());
  }
  return std::nullopt;
}

Learned Apply::launch(const api::AutotuneJob& job, const Plan& plan) {
  Learned learned;
  std::vector<std::pair<std::string, TrialRun>> launched;
  for (const auto& launch : plan.launches) {
    // The status written a moment ago counts these trials as launched; a new leader reads it and
    // may have recorded and deleted one since. Creating its run now would run it twice.
    if (context_.leadership.stop_requested()) {
      context_.log.info("leadership in doubt: no more trial launches");
      break;
    }
    if (!createRun(launch, learned)) {
      continue;
    }
    if (launch.replaces) {
      report({launch.replaces->event});
      if (hooks_.trialRelaunched) {
        hooks_.trialRelaunched(job, launch.replaces->why);
      }
      remove(launch.replaces->run);
      continue;
    }
    launched.emplace_back(launch.trial, launch.run);
    context_.log.info("trial launched", {{"trial", launch.trial}});
    if (hooks_.trialLaunched) {
      hooks_.trialLaunched(job, launch.trial);
    }
  }
  if (!launched.empty()) {
    report({trialsLaunched(launched)});
    reportFirstLaunch(job);
  }
  return learned;
}

Learned Apply::createSearches(const Plan& plan) {
  Learned learned;
  for (const auto& search : plan.searches) {
    if (context_.leadership.stop_requested()) {
      break;
    }
    const std::string name = object::text(object::metadataOf(search), "name");
    // One there already is read from the cache on the next reconcile: the job's, or someone's.
    auto created = client_.create(kAutotuneJobs, namespace_, search);
    if (failedBut(created, k8s::ErrorKind::kAlreadyExists)) {
      context_.log.warn("could not create a GPU model's search",
                        {{"job", name}, {"error", k8s::describe(created.error())}});
      learned.refusedCreates.push_back({name, refusalOf(created.error()), created.error().message});
    } else if (created) {
      context_.log.info("GPU model's search created", {{"job", name}});
    }
  }
  return learned;
}

bool Apply::createRun(const RunLaunch& launch, Learned& learned) {
  if (launch.run.carrier == TrialRun::Carrier::kPod) {
    return createPod(launch, learned);
  }
  return createBatchJob(launch, learned);
}

// Creates `object` for the run. An object of that name already there is the job's from an earlier
// reconcile the cache has not caught up with (it is returned, not made by this call), or someone
// else's: then the run's name is taken. Nothing when neither created nor the job's.
std::optional<Apply::Made> Apply::create(const k8s::Resource& resource, const json& object,
                                         const RunLaunch& launch, Learned& learned) {
  auto created = client_.create(resource, namespace_, object);
  if (created) {
    return Made{std::move(*created), true};
  }
  const std::string name = object::text(object::metadataOf(object), "name");
  if (!alreadyExists(created)) {
    context_.log.warn("could not launch a trial", {{"trial", launch.trial},
                                                   {"object", resource.plural + "/" + name},
                                                   {"error", k8s::describe(created.error())}});
    learned.refusedCreates.push_back(
        {launch.trial, refusalOf(created.error()), created.error().message});
    return std::nullopt;
  }
  auto existing = client_.get(resource, namespace_, name);
  if (!existing) {
    return std::nullopt;
  }
  if (!object::controlledBy(*existing, object::text(metadata_, "uid"))) {
    learned.namesTaken.insert(launch.run.name);
    return std::nullopt;
  }
  return Made{std::move(*existing), false};
}

bool Apply::createPod(const RunLaunch& launch, Learned& learned) {
  const auto made = create(k8s::kPods, launch.object, launch, learned);
  if (!made || !made->byThisCall) {
    return false;
  }
  cluster_.wrotePod(made->object);
  return true;
}

// A multi-node trial's Service, then its batch Job, which names the Service's UID so that the
// Service is deleted with it and no other of that name.
bool Apply::createBatchJob(const RunLaunch& launch, Learned& learned) {
  const auto service = create(k8s::kServices, launch.service.value_or(json()), launch, learned);
  if (!service) {
    return false;
  }
  json object = launch.object;
  object["metadata"]["annotations"][std::string(api::kServiceUidAnnotation)] =
      object::text(object::metadataOf(service->object), "uid");
  const auto made = create(k8s::kBatchJobs, object, launch, learned);
  if (!made || !made->byThisCall) {
    return false;
  }
  cluster_.wroteBatchJob(made->object);
  return true;
}

runtime::ReconcileResult Apply::finish(const api::AutotuneJob& job, const Plan& plan) {
  cluster_.jobWaits(job_, plan.gpusWaitedFor);
  cluster_.jobWaitsForNode(job_.key, plan.waitsForNode);
  // The finished trials are recorded in the status written before; only now may their runs go,
  // so a crash in between loses nothing.
  for (const auto& run : plan.deletions) {
    remove(run);
  }
  for (const auto& pod : plan.releases) {
    letGo(client_, context_.log, *pod);
  }
  for (const auto& name : plan.nodesToLookUp) {
    lookUpNode(name);
  }
  report(plan.events);
  for (const auto& finished : plan.finished) {
    context_.log.info("trial finished",
                      {{"trial", finished.name},
                       {"outcome", std::string(api::toString(finished.outcome))},
                       {"value", finished.value ? json(*finished.value) : json()}});
    if (hooks_.trialFinished) {
      hooks_.trialFinished(job, finished);
    }
  }
  for (const auto& reused : plan.reused) {
    context_.log.info("trial reused", {{"trial", reused.name}, {"configMap", reused.reusedFrom}});
    if (hooks_.trialReused) {
      hooks_.trialReused(job, reused);
    }
  }
  if (hooks_.trialPending) {
    for (const auto waited : plan.pendingWaits) {
      hooks_.trialPending(waited);
    }
  }
  return plan.retry ? runtime::ReconcileResult::retry()
                    : runtime::ReconcileResult::after(plan.requeueAfter);
}

runtime::ReconcileResult Apply::refused(const Plan& plan) {
  if (auto written = writeStatus(plan.status); !written) {
    return stoppedBy(written.error());
  }
  report(plan.events);
  return {};
}

void Apply::reportException(const Plan& plan) {
  // Whether or not the status took it (writeStatus logs why not), the Event tells it.
  static_cast<void>(writeStatus(plan.status));
  report(plan.events);
}

// Writes `status` when it differs from what the API server holds. A Conflict (the cache was
// behind) stops the reconcile until the newer job is read (stoppedBy).
k8s::Result<void> Apply::writeStatus(const api::Status& status) {
  json encoded = api::encode(status);
  if (encoded == written_) {
    return {};
  }
  auto written = client_.updateStatus(kAutotuneJobs, namespace_, statusUpdate(metadata_, encoded));
  if (!written) {
    // A Conflict is no failure: the job changed since the cache gave it, and the change wakes it.
    if (written.error().kind == k8s::ErrorKind::kConflict) {
      context_.log.debug("the job changed since it was read", {});
    } else {
      context_.log.warn("could not write the status", {{"error", k8s::describe(written.error())}});
    }
    return tl::unexpected(written.error());
  }
  metadata_["resourceVersion"] = object::versionOf(*written);
  written_ = std::move(encoded);
  cluster_.wroteStatus(*written);
  context_.log.debug("status written", {{"phase", std::string(api::toString(status.phase))}});
  return {};
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

// Deletes one of a run's objects, only the one seen (its UID a precondition): another of that
// name, made since by anyone, is left alone. Without a UID seen there is nothing to delete.
bool Apply::removeSeen(const k8s::Resource& resource, const std::string& name,
                       const std::string& uid) {
  if (uid.empty()) {
    return true;
  }
  auto removed =
      client_.remove(resource, namespace_, name, k8s::Propagation::kBackground, std::nullopt, uid);
  if (removed || removed.error().kind == k8s::ErrorKind::kNotFound ||
      removed.error().kind == k8s::ErrorKind::kConflict) {
    return true;
  }
  context_.log.warn(
      "could not delete a trial's object",
      {{"name", name}, {"resource", resource.plural}, {"error", k8s::describe(removed.error())}});
  return false;
}

// A Pod; or a batch Job, whose Pods garbage collection deletes with it, and its Service. Each Pod
// is let go of first: the status written before accounts for it.
void Apply::remove(const TrialRun& run) {
  std::vector<std::string> podKeys;
  for (const auto& pod : podsOf(run)) {
    letGo(client_, context_.log, *pod);
    podKeys.push_back(pod->key);
  }
  const bool removed = run.carrier == TrialRun::Carrier::kPod
                           ? removeSeen(k8s::kPods, run.name, run.uid)
                           : removeSeen(k8s::kBatchJobs, run.name, run.uid) &&
                                 removeSeen(k8s::kServices, run.name, run.serviceUid);
  if (!removed) {
    return;
  }
  // So that the reconciles before the deletion reaches the cache (or garbage collection reaches a
  // Job's Pods) do not delete them again.
  for (const auto& key : podKeys) {
    if (const auto pod = cluster_.pod(key); pod && !pod->deleting) {
      cluster_.deletingPod(*pod);
    }
  }
}

// The run's Pods the cache holds: the Pod of that UID, by its key; or the Pods of the batch Job of
// that UID, among those labelled for the job.
std::vector<Shared<Pod>> Apply::podsOf(const TrialRun& run) const {
  if (run.carrier == TrialRun::Carrier::kPod) {
    const auto pod = cluster_.pod(namespace_ + "/" + run.name);
    return pod && pod->uid == run.uid ? std::vector{pod} : std::vector<Shared<Pod>>{};
  }
  auto pods = cluster_.podsLabelled(namespace_, jobLabelValue(object::text(metadata_, "name")));
  std::erase_if(pods, [&](const auto& pod) {
    return pod->batchJob != run.name || pod->batchJobUid != run.uid;
  });
  return pods;
}

void letGo(const k8s::Client& client, const observability::Logger& log, const Pod& pod) {
  if (!pod.heldForItsResult()) {
    return;
  }
  json finalizers = json::array();
  for (const auto& finalizer : pod.finalizers) {
    if (finalizer != api::kTrialResultFinalizer) {
      finalizers.push_back(finalizer);
    }
  }
  const json patch{
      {"metadata", {{"resourceVersion", pod.resourceVersion}, {"finalizers", finalizers}}}};
  // The cache learns of it from the watch: a Pod being deleted is gone with this patch, and one
  // put back here could outlive the watch's word that it went.
  const auto patched = client.patch(k8s::kPods, pod.ns, pod.name, k8s::PatchType::kMerge, patch);
  // A Pod changed since it was read (Conflict) is let go of by the reconcile its change brings.
  if (!patched && patched.error().kind != k8s::ErrorKind::kNotFound &&
      patched.error().kind != k8s::ErrorKind::kConflict) {
    log.warn("could not let go of a trial Pod",
             {{"pod", pod.key}, {"error", k8s::describe(patched.error())}});
  }
}

void letGoOfOrphans(const k8s::Client& client, const Cluster& cluster,
                    const observability::Logger& log, const std::string& ns,
                    const std::string& jobName) {
  for (const auto& pod : cluster.podsLabelled(ns, jobLabelValue(jobName))) {
    const auto owner = cluster.ownerOf(*pod);
    const auto ownerJob = owner ? cluster.job(ns + "/" + owner->name) : nullptr;
    const bool ownerLives = ownerJob && object::text(ownerJob->metadata, "uid") == owner->uid &&
                            !beingDeleted(*ownerJob);
    if (pod->deleting && !ownerLives) {
      letGo(client, log, *pod);
    }
  }
}

// Creates an Event on the job. Its name derives from what it reports, so a reconcile that runs
// again after a restart does not report the same thing twice.
void Apply::reportFirstLaunch(const api::AutotuneJob& job) {
  const auto created = parseTime(job_.creationTimestamp);
  if (job.status.trials.launched > 0 || !job.status.results.empty() || !created ||
      !hooks_.firstTrialLaunched) {
    return;
  }
  hooks_.firstTrialLaunched(context_.now - *created);
}

void Apply::report(const std::vector<JobEvent>& events) {
  for (const auto& reported : events) {
    json event = eventObject(metadata_, reported, context_.now);
    if (hooks_.sendEvent) {
      hooks_.sendEvent(std::move(event));
      continue;
    }
    auto created = client_.create(k8s::kEvents, namespace_, event);
    if (failedBut(created, k8s::ErrorKind::kAlreadyExists)) {
      context_.log.warn("could not record an Event",
                        {{"reason", reported.reason}, {"error", k8s::describe(created.error())}});
    }
  }
}

}  // namespace autotune::controller
