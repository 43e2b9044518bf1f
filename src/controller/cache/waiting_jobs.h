#pragma once
// The jobs waiting for GPU slots, oldest first: first come, first served. A job waits while its
// engine wants more trials started now than the operator's count of free GPUs allows; the GPUs of
// those trials are held back from every job created after it, so that GPUs a trial frees go to
// the oldest waiting job rather than to whichever reconciles first. Each reconcile of a job says
// how many GPUs it waits for (Plan::gpusWaitedFor): a job whose search has ended, or that wants no
// launch, waits for none. A job of one GPU model (spec.gpuModels) holds back GPUs only from jobs
// that could take that model's GPUs: those of the same model, or of none. After a restart the queue
// fills again from each job's written status as the watch lists it (Cluster::jobChanged), and each
// job's first reconcile corrects its share. Thread-safe.

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "controller/objects/objects.h"

namespace autotune::controller {

// The GPUs a job's written status says it waits for: its queued trials' while its Running
// condition says it waits for GPU slots. At most what its reconcile will say (the scheduler's
// queued Pods count too), and only until then; at most its parallelism's trials.
int gpusWaitedForAsWritten(const CachedAutotuneJob& job);

// The GPU model a job's trials run on (spec.gpuModels), "" for any.
std::string gpuModelOf(const CachedAutotuneJob& job);

class WaitingJobs {
 public:
  // The job `key`, created at `creationTimestamp`, waits for `gpus` (none: it waits no more) of
  // GPU model `model` ("" for any).
  void set(const std::string& key, const std::string& creationTimestamp, int gpus,
           const std::string& model = "");

  // Slots of `gpusPerTrial` GPUs of `model` that jobs created before (creationTimestamp, key)
  // wait for.
  int slotsHeldBefore(const std::string& key, const std::string& creationTimestamp,
                      int gpusPerTrial, const std::string& model = "") const;

  // The waiting jobs that `gpus` freed GPUs of model `product` may go to (those of that model or
  // of none): the oldest, up to the first with which the GPUs they wait for add up to `gpus`. The
  // ones after them would find the GPUs held for these.
  std::vector<std::string> takers(int gpus, const std::string& product = "") const;

  // The job `key` waits, or no longer does, for a node that can hold one of its trials: none of
  // the nodes watched can now. It holds no GPUs back from other jobs.
  void setWaitsForNode(const std::string& key, bool waits);
  // The jobs waiting for a node: any node that comes to offer more GPUs may hold their trials.
  std::vector<std::string> waitingForNode() const;

 private:
  using Order = std::tuple<std::string, std::string>;  // (creationTimestamp, key)
  struct Wait {
    int gpus = 0;
    std::string model;
  };

  mutable std::mutex mutex_;
  std::map<Order, Wait> waits_;  // oldest job first
  std::map<std::string, Order, std::less<>> orderOf_;
  std::set<std::string, std::less<>> forNode_;
};

}  // namespace autotune::controller
