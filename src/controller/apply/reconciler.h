#pragma once
// The AutotuneJob reconcile, level-triggered and idempotent, in three steps:
// observe (the job and its trial Pods from the cache, into a Snapshot), plan (a pure function of
// the snapshot and the engine's decision, giving a Plan) and apply (the plan's effects, in an
// order that makes a crash at any point harmless). The results list plus the spec is the whole
// memory, and Pod names are deterministic: killed at any point, the next reconcile makes the
// same decisions.

#include <string>

#include "controller/apply/apply.h"
#include "controller/cache/cluster.h"
#include "controller/decision/recall.h"
#include "k8s/client.h"
#include "runtime/manager.h"

namespace autotune::controller {

class Reconciler {
 public:
  Reconciler(const k8s::Client& client, Cluster& cluster, ReconcilerHooks hooks = {});

  // One reconcile of the job `key` ("namespace/name"). One that throws is reported on the job
  // (condition Reconciled=False with the message, a Warning Event) and ends as a failure that
  // carries the exception.
  runtime::ReconcileResult reconcile(const std::string& key, const Context& context);

 private:
  runtime::ReconcileResult run(const std::string& key, const Context& context);
  runtime::ReconcileResult runPerModel(const CachedAutotuneJob& job, Apply& apply,
                                       const Context& context);
  runtime::ReconcileResult reportException(const std::string& key, const Context& context,
                                           std::string_view what);
  Recalled recallConfirmed(Snapshot observed) const;
  Shared<MeasurementObject> measurementNow(const Shared<MeasurementObject>& cached) const;

  const k8s::Client& client_;
  Cluster& cluster_;
  ReconcilerHooks hooks_;
};

}  // namespace autotune::controller
