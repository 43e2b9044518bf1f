#pragma once
// One active operator among replicas: client-go's leader election on a coordination.k8s.io/v1
// Lease. The holder renews the lease every retry period; a standby takes it over once it has seen
// the same record, unrenewed, for a whole lease duration on its own clock, so clock skew between
// machines does not matter.

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>

#include "k8s/client.h"
#include "k8s/resources.h"
#include "runtime/clock.h"

namespace autotune::runtime {

struct LeaseOptions {
  std::string ns;
  std::string name;
  std::string identity;  // unique per replica, e.g. the Pod name
  Duration leaseDuration = std::chrono::seconds(15);
  Duration renewDeadline = std::chrono::seconds(10);
  Duration retryPeriod = std::chrono::seconds(2);
};

class LeaderElector {
 public:
  LeaderElector(const k8s::Client& client, LeaseOptions options, const Clock& clock);

  // One try: takes the lease when it is missing, released, expired or already ours, and renews
  // it when ours. True when this replica holds it afterwards. The holder renews in one request,
  // writing over the lease as it last wrote it; it reads the lease first only when that write
  // finds the lease changed or gone.
  bool tryAcquireOrRenew();

  // Campaigns until it holds the lease, then runs `lead` with a token that is stopped when the
  // lease is in doubt (no renewal succeeded within renewDeadline, counted from the start of the
  // last one that did, however long the one in flight hangs) or `stop` is requested, and returns
  // once `lead` and the renewal in flight have returned. On `stop` it releases the lease, so a
  // standby takes over at once. True when it returned because the lease was lost.
  bool run(const std::stop_token& stop, const std::function<void(std::stop_token)>& lead);

  // Gives the lease up if this replica holds it.
  void release();

  bool isLeader() const { return leading_.load(); }

 private:
  nlohmann::json record(const nlohmann::json& current) const;
  // The holder's renewal over `written_`: whether it went through, or nothing when the lease was
  // changed or deleted since, which only a read can tell.
  std::optional<bool> renewAsWritten();
  bool wrote(const k8s::Result<nlohmann::json>& written, TimePoint at);

  const k8s::Client& client_;
  LeaseOptions options_;
  const Clock& clock_;
  nlohmann::json observed_;  // the lease spec last seen
  nlohmann::json written_;   // the whole lease as this replica last wrote it, while it holds it
  TimePoint observedAt_;     // when it was first seen, on this replica's clock
  std::atomic<bool> leading_ = false;
};

}  // namespace autotune::runtime
