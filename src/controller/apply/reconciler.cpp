#include "controller/apply/reconciler.h"

#include <memory>
#include <set>
#include <utility>

#include "api/text.h"
#include "controller/decision/models.h"
#include "controller/decision/observe.h"
#include "controller/decision/plan.h"
#include "controller/decision/recall.h"
#include "k8s/resources.h"
#include "object/read.h"
#include "tuning/engine.h"

namespace autotune::controller {
Reconciler::Reconciler(const k8s::Client& client, Cluster& cluster, ReconcilerHooks hooks)
    : client_(client), cluster_(cluster), hooks_(std::move(hooks)) {}

runtime::ReconcileResult Reconciler::reconcile(const std::string& key, const Context& context) {
  try {
    return run(key, context);
  } catch (const std::exception& error) {
    return reportException(key, context, error.what());
  }
}

runtime::ReconcileResult Reconciler::run(const std::string& key, const Context& context) {
  const auto job = cluster_.job(key);
  // A job being deleted launches and writes nothing more: its Pods go with it, and each is let
  // go of as garbage collection deletes it.
  if (!job || beingDeleted(*job)) {
    const auto slash = key.find('/');
    letGoOfOrphans(client_, cluster_, context.log, key.substr(0, slash), key.substr(slash + 1));
    if (!job && hooks_.jobGone) {
      hooks_.jobGone(key.substr(0, slash), key.substr(slash + 1));
    }
    return {};
  }
  Apply apply(client_, cluster_, hooks_, context, *job);
  if (!job->decoded) {
    return apply.refused(refuse(*job, job->decoded.error(), context.now));
  }
  if (api::searchesPerModel(job->decoded->job.spec)) {
    return runPerModel(*job, apply, context);
  }
  Snapshot observed = observe(cluster_, *job, context.now);
  for (const auto& unreadable : observed.unreadable) {
    context.log.warn("a trial Pod cannot be read", {{"error", unreadable}});
  }
  std::erase_if(observed.foreignPods,
                [this](const auto& pod) { return !cluster_.noticeForeignPod(pod->uid); });
  const Recalled recalled = recallConfirmed(std::move(observed));
  const Snapshot& snapshot = recalled.snapshot;
  const tuning::Decision& decision = recalled.decision;
  Plan planned = plan(snapshot, decision);
  auto learned = apply.write(snapshot.job, planned);
  if (learned && learned->empty()) {
    learned = apply.launch(snapshot.job, planned);
  }
  if (!learned) {
    return stoppedBy(learned.error());
  }
  // What apply learned, the plan could not know: made again knowing it, it is written, and its
  // runs were launched already.
  if (!learned->empty()) {
    planned = plan(snapshot, decision, *learned);
    if (auto rewritten = apply.write(snapshot.job, planned); !rewritten) {
      return stoppedBy(rewritten.error());
    }
  }
  const auto result = apply.finish(snapshot.job, planned);
  // An output not written is tried again with the work queue's backoff.
  return learned->outputRefused ? runtime::ReconcileResult::retry() : result;
}

// A job that tunes for several GPU models: its status and output from its models' searches,
// then the searches it lacks created.
runtime::ReconcileResult Reconciler::runPerModel(const CachedAutotuneJob& job, Apply& apply,
                                                 const Context& context) {
  const ModelsSnapshot snapshot = observeModels(cluster_, job, context.now);
  Learned learned;  // over the whole reconcile: each write and create may teach something
  Plan planned = planModels(snapshot);
  auto written = apply.write(snapshot.job, planned);
  if (written && written->outputRefused) {
    learned.outputRefused = written->outputRefused;
    planned = planModels(snapshot, learned);
    written = apply.write(snapshot.job, planned);
  }
  if (!written) {
    return stoppedBy(written.error());
  }
  if (auto refused = apply.createSearches(planned); !refused.refusedCreates.empty()) {
    learned.refusedCreates = std::move(refused.refusedCreates);
    planned = planModels(snapshot, learned);
    planned.searches.clear();
    if (auto rewritten = apply.write(snapshot.job, planned); !rewritten) {
      return stoppedBy(rewritten.error());
    }
  }
  const auto result = apply.finish(snapshot.job, planned);
  return learned.outputRefused ? runtime::ReconcileResult::retry() : result;
}

// A reconcile that threw is the job's problem alone: the job says so in a condition and a
// Warning Event, and the manager retries it with backoff. Nothing here may throw in turn.
runtime::ReconcileResult Reconciler::reportException(const std::string& key, const Context& context,
                                                     std::string_view what) {
  const std::string message = "the reconcile failed: " + api::headOf(what, kEventMessageBytes);
  try {
    if (const auto job = cluster_.job(key)) {
      Apply(client_, cluster_, hooks_, context, *job)
          .reportException(reconcileThrew(*job, message, context.now));
    }
  } catch (const std::exception& error) {
    context.log.warn("could not report the exception on the job",
                     {{"error", api::headOf(error.what(), kEventMessageBytes)}});
  }
  return runtime::ReconcileResult::threw(message);
}

// What recall takes, as the API server holds it now: taking a kept measurement stands for a whole
// trial, so an edit or a deletion the watch has not delivered yet must count. One read for each
// ConfigMap taken from, none for the rest; should any have changed, the job recalls again with the
// server's copies.
Recalled Reconciler::recallConfirmed(Snapshot observed) const {
  if (!observed.recallable) {
    return recall(std::move(observed));
  }
  std::set<std::string> confirmed;
  for (;;) {
    Recalled recalled = recall(observed);
    bool changed = false;
    for (const auto& taken : recalled.taken) {
      if (!confirmed.insert(taken->name).second) {
        continue;
      }
      if (auto now = measurementNow(taken); now != taken) {
        changed = true;
        auto& byName = observed.recallable->byName;
        for (auto held = byName.begin(); held != byName.end();) {
          if (held->second != taken) {
            ++held;
          } else if (now) {
            (held++)->second = now;
          } else {
            held = byName.erase(held);
          }
        }
      }
    }
    if (!changed) {
      return recalled;
    }
  }
}

// A kept measurement as the API server holds it now: the cache's copy when the server's is the
// same version, or when the read fails other than NotFound; none when it is gone or unreadable.
Shared<MeasurementObject> Reconciler::measurementNow(
    const Shared<MeasurementObject>& cached) const {
  const auto current = client_.get(k8s::kConfigMaps, cached->ns, cached->name);
  if (!current) {
    return current.error().kind == k8s::ErrorKind::kNotFound ? nullptr : cached;
  }
  if (object::text(object::metadataOf(*current), "resourceVersion") == cached->resourceVersion) {
    return cached;
  }
  auto decoded = decodeMeasurementObject(*current, cluster_.measurementPolicy().seal);
  return decoded ? std::make_shared<const MeasurementObject>(std::move(*decoded)) : nullptr;
}

}  // namespace autotune::controller
