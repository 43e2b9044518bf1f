#include "controller/cache/waiting_jobs.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "controller/objects/conditions.h"

namespace autotune::controller {

int gpusWaitedForAsWritten(const CachedAutotuneJob& job) {
  const api::Condition* running = findCondition(job.status, condition::kRunning);
  if (!job.decoded || running == nullptr || running->reason != queued::kWaitingForGpus) {
    return 0;
  }
  // Whoever may write the job's status may write any count: never more than its parallelism's
  // trials, and never past what an int holds.
  const api::Spec& spec = job.decoded->job.spec;
  const std::int64_t trials = std::clamp(job.status.trials.queued, 0, spec.parallelism);
  return static_cast<int>(std::min<std::int64_t>(trials * spec.resources.gpusPerTrial,
                                                 std::numeric_limits<int>::max()));
}

void WaitingJobs::set(const std::string& key, const std::string& creationTimestamp, int gpus) {
  const std::scoped_lock lock(mutex_);
  if (const auto found = orderOf_.find(key); found != orderOf_.end()) {
    gpus_.erase(found->second);
    orderOf_.erase(found);
  }
  if (gpus > 0) {
    Order order{creationTimestamp, key};
    gpus_.insert_or_assign(order, gpus);
    orderOf_.insert_or_assign(key, std::move(order));
  }
}

int WaitingJobs::slotsHeldBefore(const std::string& key, const std::string& creationTimestamp,
                                 int gpusPerTrial) const {
  const std::scoped_lock lock(mutex_);
  const Order own{creationTimestamp, key};
  int held = 0;
  for (auto waiting = gpus_.begin(); waiting != gpus_.end() && waiting->first < own; ++waiting) {
    held += (waiting->second + gpusPerTrial - 1) / gpusPerTrial;
  }
  return held;
}

std::vector<std::string> WaitingJobs::takers(int gpus) const {
  const std::scoped_lock lock(mutex_);
  std::vector<std::string> keys;
  int waitedFor = 0;
  for (auto waiting = gpus_.begin(); waiting != gpus_.end() && waitedFor < gpus; ++waiting) {
    keys.push_back(std::get<1>(waiting->first));
    waitedFor += waiting->second;
  }
  return keys;
}

void WaitingJobs::setWaitsForNode(const std::string& key, bool waits) {
  const std::scoped_lock lock(mutex_);
  if (waits) {
    forNode_.insert(key);
  } else {
    forNode_.erase(key);
  }
}

std::vector<std::string> WaitingJobs::waitingForNode() const {
  const std::scoped_lock lock(mutex_);
  return {forNode_.begin(), forNode_.end()};
}

}  // namespace autotune::controller
