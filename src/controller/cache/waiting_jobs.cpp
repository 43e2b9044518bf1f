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

std::string gpuModelOf(const CachedAutotuneJob& job) {
  if (!job.decoded || job.decoded->job.spec.gpuModels.empty()) {
    return "";
  }
  return job.decoded->job.spec.gpuModels.front();
}

namespace {

// Whether jobs of these GPU models could take the same GPUs.
bool compete(const std::string& model, const std::string& other) {
  return model.empty() || other.empty() || model == other;
}

// Whether GPUs of `product` can go to a job of `model`.
bool serves(const std::string& product, const std::string& model) {
  return model.empty() || model == product;
}

}  // namespace

void WaitingJobs::set(const std::string& key, const std::string& creationTimestamp, int gpus,
                      const std::string& model) {
  const std::scoped_lock lock(mutex_);
  if (const auto found = orderOf_.find(key); found != orderOf_.end()) {
    waits_.erase(found->second);
    orderOf_.erase(found);
  }
  if (gpus > 0) {
    Order order{creationTimestamp, key};
    waits_.insert_or_assign(order, Wait{gpus, model});
    orderOf_.insert_or_assign(key, std::move(order));
  }
}

int WaitingJobs::slotsHeldBefore(const std::string& key, const std::string& creationTimestamp,
                                 int gpusPerTrial, const std::string& model) const {
  const std::scoped_lock lock(mutex_);
  const Order own{creationTimestamp, key};
  int held = 0;
  for (auto waiting = waits_.begin(); waiting != waits_.end() && waiting->first < own; ++waiting) {
    if (const Wait& wait = waiting->second; compete(wait.model, model)) {
      held += (wait.gpus + gpusPerTrial - 1) / gpusPerTrial;
    }
  }
  return held;
}

std::vector<std::string> WaitingJobs::takers(int gpus, const std::string& product) const {
  const std::scoped_lock lock(mutex_);
  std::vector<std::string> keys;
  int waitedFor = 0;
  for (auto waiting = waits_.begin(); waiting != waits_.end() && waitedFor < gpus; ++waiting) {
    if (const Wait& wait = waiting->second; serves(product, wait.model)) {
      keys.push_back(std::get<1>(waiting->first));
      waitedFor += wait.gpus;
    }
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
