#pragma once
// The operator's HTTP endpoints: /metrics on the metrics address, /healthz and /readyz on the
// probe address. Each server runs its own threads from start() until it is destroyed. A probe
// answers 200 "ok", or 500 naming each failing check, one a line.

#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "observability/health.h"
#include "observability/metrics.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace autotune::observability {

// The address to listen on for a bind flag: ":8080" means every interface ("0.0.0.0:8080");
// "127.0.0.1:8080" stays as it is; port 0 picks a free port. An error names what is wrong.
tl::expected<std::string, std::string> listenAddress(std::string_view flag);

class MetricsServer {
 public:
  // Serves `metrics` on /metrics at `address` (a bind flag, see listenAddress). An address that
  // cannot be bound is an error naming it.
  static tl::expected<std::unique_ptr<MetricsServer>, std::string> start(std::string_view address,
                                                                         const Metrics& metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  MetricsServer(MetricsServer&&) = delete;
  MetricsServer& operator=(MetricsServer&&) = delete;

  // The port bound, also when port 0 was asked for.
  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, int port);

  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_;
};

class ProbeServer {
 public:
  // Serves /healthz from health's liveness checks and /readyz from its readiness checks.
  static tl::expected<std::unique_ptr<ProbeServer>, std::string> start(
      std::string_view address, const std::shared_ptr<const Health>& health);
  ~ProbeServer();
  ProbeServer(const ProbeServer&) = delete;
  ProbeServer& operator=(const ProbeServer&) = delete;
  ProbeServer(ProbeServer&&) = delete;
  ProbeServer& operator=(ProbeServer&&) = delete;

  int port() const;

 private:
  struct Server;
  explicit ProbeServer(std::unique_ptr<Server> server);

  std::unique_ptr<Server> server_;
};

}  // namespace autotune::observability
