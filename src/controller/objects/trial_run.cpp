#include "controller/objects/trial_run.h"

#include "controller/objects/trial_pod.h"

namespace autotune::controller {

std::string TrialRun::describe() const {
  return (carrier == Carrier::kPod ? "Pod " : "Job ") + name;
}

TrialRun trialRunOf(const api::AutotuneJob& job, std::string_view trial, int attempt) {
  if (job.spec.resources.nodesPerTrial > 1) {
    return {TrialRun::Carrier::kBatchJob, trialBatchJobName(job.name(), trial, attempt), "", ""};
  }
  return {TrialRun::Carrier::kPod, trialPodName(job.name(), trial, attempt), "", ""};
}

}  // namespace autotune::controller
