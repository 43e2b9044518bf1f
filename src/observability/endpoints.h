#pragma once
// The operator's HTTP endpoints: /metrics on the metrics address (HTTPS and a bearer token the
// API server vouches for, or plain HTTP), /healthz and /readyz on the probe address. Each server
// runs its own threads from start() until it is destroyed. A probe answers 200 "ok", or 500
// naming each failing check, one a line.

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "observability/health.h"
#include "observability/metrics.h"

namespace autotune::observability {

// The address to listen on for a bind flag: ":8080" means every interface ("0.0.0.0:8080");
// "127.0.0.1:8080" stays as it is; port 0 picks a free port. An error names what is wrong.
tl::expected<std::string, std::string> listenAddress(std::string_view flag);

// What the bearer token of a request to /metrics may do.
enum class Access {
  kAllowed,
  kUnauthenticated,  // no token, or one nobody issued: 401
  kForbidden,        // a known user without the right: 403
  kUnknown,          // nobody could tell now: 503, and the scraper tries again
};
// Decides on a request's bearer token (empty when it carried none).
using Authorize = std::function<Access(std::string_view token)>;

struct MetricsServing {
  std::string address = ":8080";  // a bind flag, see listenAddress
  // PEM text of the private key and the certificate: /metrics over HTTPS (TLS 1.2 or later).
  // Empty: plain HTTP.
  std::string certificate;
  // Empty: every request gets the metrics.
  Authorize authorize;
};

class MetricsServer {
 public:
  // Serves `metrics` on /metrics as `serving` says. An address that cannot be bound, or a
  // certificate that cannot be used, is an error naming it.
  static tl::expected<std::unique_ptr<MetricsServer>, std::string> start(
      const MetricsServing& serving, const Metrics& metrics);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  MetricsServer(MetricsServer&&) = delete;
  MetricsServer& operator=(MetricsServer&&) = delete;

  // The port bound, also when port 0 was asked for.
  int port() const;

 private:
  struct Server;
  explicit MetricsServer(std::unique_ptr<Server> server);

  std::unique_ptr<Server> server_;
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
