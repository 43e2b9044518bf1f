#pragma once
// What carries one attempt of a trial on the cluster: a Pod, or for a multi-node trial an Indexed
// batch Job with the headless Service of the same name that gives its Pods their host names.
// Single- and multi-node trials go through the same fields and the same code by this value; only
// making and deleting the objects tells the two apart.

#include <string>
#include <string_view>

#include "api/job.h"

namespace autotune::controller {

struct TrialRun {
  enum class Carrier { kPod, kBatchJob };

  Carrier carrier = Carrier::kPod;
  std::string name;  // the Pod's, or the batch Job's and its Service's
  // Of the objects as seen, when they were: every deletion is conditional on them, so that an
  // object of the same name that is not this run's is never deleted.
  std::string uid;
  std::string serviceUid;

  // "Pod p" or "Job j", for what the job says of it.
  std::string describe() const;

  friend bool operator==(const TrialRun&, const TrialRun&) = default;
};

// The run of a trial's attempt for `job`: a Pod while spec.resources.nodesPerTrial is 1, else a
// batch Job. Names are deterministic, so that a create repeated after a crash is AlreadyExists.
TrialRun trialRunOf(const api::AutotuneJob& job, std::string_view trial, int attempt);

}  // namespace autotune::controller
