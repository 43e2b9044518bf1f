#include "controller/waiting_jobs.h"

#include <algorithm>

#include "controller/conditions.h"

namespace autotune::controller {

int gpusWaitedFor(const api::Status& status, const api::Spec& spec) {
  const api::Condition* running = findCondition(status, condition::kRunning);
  if (running == nullptr || running->reason != kWaitingForGpus) {
    return 0;
  }
  const int trials = spec.parallelism - status.trials.pending - status.trials.running;
  return std::max(0, trials) * spec.resources.gpusPerTrial;
}

void WaitingJobs::update(const std::string& key, const CachedAutotuneJob* job) {
  const std::scoped_lock lock(mutex_);
  if (const auto found = orderOf_.find(key); found != orderOf_.end()) {
    gpus_.erase(found->second);
    orderOf_.erase(found);
  }
  if (job == nullptr || !job->decoded) {
    return;
  }
  if (const int gpus = gpusWaitedFor(job->status, job->decoded->job.spec); gpus > 0) {
    Order order{job->creationTimestamp, key};
    gpus_.insert_or_assign(order, gpus);
    orderOf_.insert_or_assign(key, std::move(order));
  }
}

int WaitingJobs::slotsHeldBefore(const CachedAutotuneJob& job, int gpusPerTrial) const {
  const std::scoped_lock lock(mutex_);
  const Order own{job.creationTimestamp, job.key};
  int held = 0;
  for (auto waiting = gpus_.begin(); waiting != gpus_.end() && waiting->first < own; ++waiting) {
    held += (waiting->second + gpusPerTrial - 1) / gpusPerTrial;
  }
  return held;
}

std::vector<std::string> WaitingJobs::keys() const {
  const std::scoped_lock lock(mutex_);
  std::vector<std::string> keys;
  keys.reserve(orderOf_.size());
  for (const auto& [key, order] : orderOf_) {
    keys.push_back(key);
  }
  return keys;
}

}  // namespace autotune::controller
