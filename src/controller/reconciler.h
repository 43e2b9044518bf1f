#pragma once
// The AutotuneJob reconcile (DESIGN §5): level-triggered and idempotent. Each call reads the job
// fresh from the API server and its trial Pods from the cache, records what finished in
// status.results before deleting any Pod, asks the engine what to launch next within the job's
// parallelism and the free GPU slots, and when the search is over writes the output ConfigMap and
// the final status. Killed at any point, the next call makes the same decisions: the results list
// plus the spec is the whole memory, and Pod names are deterministic.

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "k8s/client.h"
#include "k8s/resources.h"
#include "runtime/informer.h"
#include "runtime/manager.h"

namespace autotune::controller {

inline const k8s::Resource kAutotuneJobs{"autotune.io", "v1alpha1", "autotunejobs", true};

// What the reconciler reads from the manager's caches: one store of jobs and one of trial Pods
// (those labelled autotune.io/job) per watched namespace, or one each for all namespaces.
struct Caches {
  std::vector<const runtime::Store*> jobs;
  std::vector<const runtime::Store*> pods;
  const runtime::Store* nodes = nullptr;

  std::vector<nlohmann::json> allJobs() const;
  std::vector<nlohmann::json> allPods() const;
  std::vector<nlohmann::json> podsWithLabel(const std::string& label, const std::string& value,
                                            const std::string& ns) const;
};

// Told as things happen, for metrics and logs; each may be left empty.
struct ReconcilerHooks {
  std::function<void(const api::AutotuneJob& job, const std::string& trial)> trialLaunched;
  std::function<void(const api::AutotuneJob& job, const api::TrialRecord& record)> trialFinished;
  // How long a finished trial's Pod waited for a node and its container's start.
  std::function<void(std::chrono::duration<double> waited)> trialPending;
  std::function<void(const api::AutotuneJob& job, const api::Status& status)> statusWritten;
  std::function<void(const std::string& ns, const std::string& name)> jobGone;
  std::function<void(const std::string& key, const std::string& message)> warning;
};

class Reconciler {
 public:
  using Now = std::function<std::chrono::system_clock::time_point()>;

  Reconciler(
      const k8s::Client& client, Caches caches, ReconcilerHooks hooks = {},
      Now now = [] { return std::chrono::system_clock::now(); });

  // One reconcile of the job `key` ("namespace/name"). One that throws is reported on the job
  // (condition Reconciled=False with the message, a Warning Event) and ends as a failure that
  // carries the exception.
  runtime::ReconcileResult reconcile(const std::string& key);

 private:
  class Pass;

  runtime::ReconcileResult reportException(const std::string& key, std::string_view what) const;

  const k8s::Client& client_;
  Caches caches_;
  ReconcilerHooks hooks_;
  Now now_;
};

// The job a trial Pod belongs to ("namespace/name" of its controlling AutotuneJob), if any.
std::vector<std::string> jobKeysOfPod(const nlohmann::json& pod);

}  // namespace autotune::controller
