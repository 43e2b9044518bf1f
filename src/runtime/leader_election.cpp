#include "runtime/leader_election.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>

#include "object/time.h"

namespace autotune::runtime {
namespace {

// How often, within a renew deadline, the leader looks whether its lease is still sure.
constexpr int kChecksPerDeadline = 10;

int seconds(Duration duration) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::seconds>(duration).count());
}

}  // namespace

LeaderElector::LeaderElector(const k8s::Client& client, LeaseOptions options, const Clock& clock)
    : client_(client), options_(std::move(options)), clock_(clock) {}

nlohmann::json LeaderElector::record(const nlohmann::json& current) const {
  const std::string now =
      object::formatTime(std::chrono::system_clock::now(), object::Fraction::kMicroseconds);
  const bool ours = current.value("holderIdentity", "") == options_.identity;
  nlohmann::json spec = current;
  spec["holderIdentity"] = options_.identity;
  spec["leaseDurationSeconds"] = seconds(options_.leaseDuration);
  spec["renewTime"] = now;
  if (!ours) {
    spec["acquireTime"] = now;
    spec["leaseTransitions"] = current.value("leaseTransitions", -1) + 1;
  }
  return spec;
}

bool LeaderElector::wrote(const k8s::Result<nlohmann::json>& written, TimePoint at) {
  if (written) {
    written_ = *written;
    observed_ = written_["spec"];
    observedAt_ = at;
  }
  leading_ = written.has_value();
  return leading_;
}

std::optional<bool> LeaderElector::renewAsWritten() {
  const TimePoint now = clock_.now();
  nlohmann::json renewed = written_;
  renewed["spec"] = record(written_["spec"]);
  auto written = client_.update(k8s::kLeases, options_.ns, renewed);
  if (!written && (written.error().kind == k8s::ErrorKind::kConflict ||
                   written.error().kind == k8s::ErrorKind::kNotFound)) {
    written_ = nullptr;
    return std::nullopt;
  }
  return wrote(written, now);
}

bool LeaderElector::tryAcquireOrRenew() {
  if (!written_.is_null()) {
    if (const auto renewed = renewAsWritten()) {
      return *renewed;
    }
  }
  const TimePoint now = clock_.now();
  auto lease = client_.get(k8s::kLeases, options_.ns, options_.name);
  if (!lease && lease.error().kind == k8s::ErrorKind::kNotFound) {
    const nlohmann::json fresh = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", options_.name}, {"namespace", options_.ns}}},
        {"spec", record(nlohmann::json::object())}};
    return wrote(client_.create(k8s::kLeases, options_.ns, fresh), now);
  }
  if (!lease) {
    leading_ = false;
    return false;
  }
  const nlohmann::json current = lease->value("spec", nlohmann::json::object());
  if (current != observed_) {
    observed_ = current;
    observedAt_ = now;
  }
  const std::string holder = current.value("holderIdentity", "");
  const auto duration =
      std::chrono::seconds(current.value("leaseDurationSeconds", seconds(options_.leaseDuration)));
  if (!holder.empty() && holder != options_.identity && now < observedAt_ + duration) {
    leading_ = false;
    return false;
  }
  nlohmann::json updated = *lease;
  updated["spec"] = record(current);
  return wrote(client_.update(k8s::kLeases, options_.ns, updated), now);
}

bool LeaderElector::run(const std::stop_token& stop,
                        const std::function<void(std::stop_token)>& lead) {
  TimePoint attempt = clock_.now();
  while (!stop.stop_requested() && !tryAcquireOrRenew()) {
    sleepFor(options_.retryPeriod, stop);
    attempt = clock_.now();
  }
  if (stop.stop_requested()) {
    release();  // the stop may have come while the winning write was in flight
    return false;
  }
  // When the last successful renewal started, written by the renewer, read by the watch below.
  std::atomic<TimePoint> renewedAt = attempt;
  std::stop_source leadership;
  const std::stop_callback forward(stop, [&leadership] { leadership.request_stop(); });
  std::jthread leader([&lead, token = leadership.get_token()] { lead(token); });
  // Renewals run apart from the watch kept on them, so that one stuck in the network cannot keep
  // this replica leading past renewDeadline, while a standby may already be taking over.
  std::jthread renewer([this, &renewedAt, token = leadership.get_token()] {
    while (!token.stop_requested()) {
      sleepFor(options_.retryPeriod, token);
      const TimePoint started = clock_.now();
      if (!token.stop_requested() && tryAcquireOrRenew()) {
        renewedAt = started;
      }
    }
  });

  bool lost = false;
  const Duration check =
      std::min(options_.retryPeriod, options_.renewDeadline / kChecksPerDeadline);
  while (!leadership.stop_requested()) {
    if (clock_.now() - renewedAt.load() >= options_.renewDeadline) {
      lost = true;
      leadership.request_stop();
      break;
    }
    sleepFor(check, leadership.get_token());
  }
  leader.join();
  renewer.join();  // a renewal in flight ends by the client's own timeout
  if (lost) {
    leading_ = false;
  } else {
    release();
  }
  return lost;
}

void LeaderElector::release() {
  // Decided on the lease as it is now, not on leading_: the last renewal may have failed for a
  // moment while the lease is still ours.
  leading_ = false;
  written_ = nullptr;
  auto lease = client_.get(k8s::kLeases, options_.ns, options_.name);
  if (!lease || (*lease)["spec"].value("holderIdentity", "") != options_.identity) {
    return;
  }
  nlohmann::json released = *lease;
  released["spec"]["holderIdentity"] = "";
  released["spec"]["leaseDurationSeconds"] = 1;
  released["spec"]["renewTime"] =
      object::formatTime(std::chrono::system_clock::now(), object::Fraction::kMicroseconds);
  [[maybe_unused]] const auto written = client_.update(k8s::kLeases, options_.ns, released);
}

}  // namespace autotune::runtime
