#include "observability/health.h"

#include <algorithm>
#include <utility>

namespace autotune::observability {

void Health::addLiveness(std::string name, Check check) {
  const std::lock_guard lock(mutex_);
  liveness_.emplace_back(std::move(name), std::move(check));
}

void Health::addReadiness(std::string name, Check check) {
  const std::lock_guard lock(mutex_);
  readiness_.emplace_back(std::move(name), std::move(check));
}

// The checks run outside the lock, so that a slow one does not hold up registration.
std::vector<std::string> Health::failingLiveness() const {
  std::unique_lock lock(mutex_);
  const auto checks = liveness_;
  lock.unlock();
  return failing(checks);
}

std::vector<std::string> Health::failingReadiness() const {
  std::unique_lock lock(mutex_);
  const auto checks = readiness_;
  lock.unlock();
  return failing(checks);
}

std::vector<std::string> Health::failing(const std::vector<std::pair<std::string, Check>>& checks) {
  std::vector<std::string> names;
  for (const auto& [name, check] : checks) {
    if (!check()) {
      names.push_back(name);
    }
  }
  return names;
}

Heartbeat::Beat::Beat(Beat&& other) noexcept
    : heartbeat_(std::exchange(other.heartbeat_, nullptr)), id_(other.id_) {}

Heartbeat::Beat& Heartbeat::Beat::operator=(Beat&& other) noexcept {
  if (this != &other) {
    if (heartbeat_ != nullptr) {
      heartbeat_->end(id_);
    }
    heartbeat_ = std::exchange(other.heartbeat_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

Heartbeat::Beat::~Beat() {
  if (heartbeat_ != nullptr) {
    heartbeat_->end(id_);
  }
}

Heartbeat::Beat Heartbeat::beat() {
  const auto now = now_();
  const std::lock_guard lock(mutex_);
  const auto id = next_++;
  started_.emplace(id, now);
  return {this, id};
}

bool Heartbeat::healthy() const {
  const auto now = now_();
  const std::lock_guard lock(mutex_);
  return std::ranges::all_of(started_,
                             [&](const auto& beat) { return now - beat.second <= limit_; });
}

void Heartbeat::end(std::uint64_t id) {
  const std::lock_guard lock(mutex_);
  started_.erase(id);
}

}  // namespace autotune::observability
