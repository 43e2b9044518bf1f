#pragma once
// What /healthz and /readyz answer: named checks, registered by whoever knows the condition.
// Liveness asks "should the kubelet restart this process?" (a wedged worker), readiness "should it
// get traffic and count as up?" (caches synced). A probe fails naming every check that failed.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace autotune::observability {

using Check = std::function<bool()>;

class Health {
 public:
  void addLiveness(std::string name, Check check);
  void addReadiness(std::string name, Check check);

  // The names of the checks that fail now, in the order they were added; empty when healthy.
  std::vector<std::string> failingLiveness() const;
  std::vector<std::string> failingReadiness() const;

 private:
  static std::vector<std::string> failing(const std::vector<std::pair<std::string, Check>>& checks);

  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, Check>> liveness_;
  std::vector<std::pair<std::string, Check>> readiness_;
};

// Tells a wedged worker from an idle one. A worker beats when it takes a unit of work and the beat
// ends when the work does; the heartbeat fails when a beat is older than its limit. A worker that
// waits for work holds no beat, so an operator with nothing to do stays alive.
class Heartbeat {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Now = std::function<TimePoint()>;

  // Ends its beat when destroyed.
  class Beat {
   public:
    Beat(Beat&& other) noexcept;
    Beat& operator=(Beat&& other) noexcept;
    Beat(const Beat&) = delete;
    Beat& operator=(const Beat&) = delete;
    ~Beat();

   private:
    friend class Heartbeat;
    Beat(Heartbeat* heartbeat, std::uint64_t id) : heartbeat_(heartbeat), id_(id) {}

    Heartbeat* heartbeat_;
    std::uint64_t id_;
  };

  explicit Heartbeat(
      std::chrono::steady_clock::duration limit,
      Now now = [] { return std::chrono::steady_clock::now(); })
      : limit_(limit), now_(std::move(now)) {}
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  Heartbeat(Heartbeat&&) = delete;
  Heartbeat& operator=(Heartbeat&&) = delete;
  ~Heartbeat() = default;

  [[nodiscard]] Beat beat();
  // No beat has lasted longer than the limit. Register it as a liveness Check.
  bool healthy() const;

 private:
  void end(std::uint64_t id);

  std::chrono::steady_clock::duration limit_;
  Now now_;
  mutable std::mutex mutex_;
  std::uint64_t next_ = 0;
  std::map<std::uint64_t, TimePoint> started_;
};

}  // namespace autotune::observability
