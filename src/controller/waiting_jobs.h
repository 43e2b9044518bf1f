#pragma once
// The jobs waiting for GPUs, oldest first: first come, first served. A job waits while its engine
// wanted more trials than free GPU slots allowed (its Running condition says kWaitingForGpus);
// the slots it waits for are held back from every job created after it. The queue is rebuilt
// from the jobs' statuses as the watch delivers them, so a restart loses nothing. Thread-safe.

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "controller/objects.h"

namespace autotune::controller {

// The GPUs a job's status says it waits for: those of the trials it would launch now, by
// parallelism, while its Running condition's reason is kWaitingForGpus; else none.
int gpusWaitedFor(const api::Status& status, const api::Spec& spec);

class WaitingJobs {
 public:
  // The job as it is now, or nullptr once it is gone.
  void update(const std::string& key, const CachedAutotuneJob* job);

  // Slots of `gpusPerTrial` GPUs that jobs created before `job` wait for.
  int slotsHeldBefore(const CachedAutotuneJob& job, int gpusPerTrial) const;

  std::vector<std::string> keys() const;

 private:
  using Order = std::tuple<std::string, std::string>;  // (creationTimestamp, key)

  mutable std::mutex mutex_;
  std::map<Order, int> gpus_;  // GPUs waited for, oldest job first
  std::map<std::string, Order, std::less<>> orderOf_;
};

}  // namespace autotune::controller
