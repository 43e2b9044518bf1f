#include "controller/reconciler.h"

#include <utility>

#include "api/text.h"
#include "controller/plan.h"
#include "tuning/engine.h"

namespace autotune::controller {
namespace {

constexpr std::size_t kExceptionMessageBytes = 1024;

}  // namespace

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
  if (!job) {
    if (hooks_.jobGone) {
      const auto slash = key.find('/');
      hooks_.jobGone(key.substr(0, slash), key.substr(slash + 1));
    }
    return {};
  }
  Apply apply(client_, cluster_, hooks_, context, *job);
  if (!job->decoded) {
    return apply.refused(refuse(*job, job->decoded.error(), context.now));
  }
  Snapshot snapshot = observe(cluster_, *job, context.now);
  for (const auto& unreadable : snapshot.unreadable) {
    context.log.warn("a trial Pod cannot be read", {{"error", unreadable}});
  }
  const tuning::Decision decision = tuning::decide(question(snapshot));
  Plan planned = plan(snapshot, decision);
  if (!apply.write(snapshot, planned)) {
    return runtime::ReconcileResult::retry();
  }
  if (auto taken = apply.launch(snapshot, planned); !taken.empty()) {
    snapshot.podNamesTaken.merge(taken);
    planned = plan(snapshot, decision);
    if (!apply.write(snapshot, planned)) {
      return runtime::ReconcileResult::retry();
    }
  }
  return apply.finish(snapshot, planned);
}

// A reconcile that threw is the job's problem alone: the job says so in a condition and a
// Warning Event, and the manager retries it with backoff. Nothing here may throw in turn.
runtime::ReconcileResult Reconciler::reportException(const std::string& key, const Context& context,
                                                     std::string_view what) {
  const std::string message = "the reconcile failed: " + api::headOf(what, kExceptionMessageBytes);
  try {
    if (const auto job = cluster_.job(key)) {
      Apply(client_, cluster_, hooks_, context, *job).reportException(message);
    }
  } catch (const std::exception& error) {
    context.log.warn("could not report the exception on the job",
                     {{"error", api::headOf(error.what(), kExceptionMessageBytes)}});
  }
  return runtime::ReconcileResult::threw(message);
}

}  // namespace autotune::controller
