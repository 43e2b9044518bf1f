#include "observability/endpoints.h"

#include <CivetServer.h>

#include <charconv>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

namespace autotune::observability {
namespace {

constexpr int kMaxPort = 65535;

// Writes a whole plain-text answer; the probe and its client close the connection after it.
void answer(mg_connection* connection, int status, const std::string& body) {
  mg_printf(connection,
            "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Length: %zu\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
            status, status == 200 ? "OK" : "Internal Server Error", body.size());
  mg_write(connection, body.data(), body.size());
}

std::string cannotListen(std::string_view address, std::string_view why) {
  return "cannot listen on " + std::string(address) + ": " + std::string(why);
}

class ProbeHandler final : public CivetHandler {
 public:
  explicit ProbeHandler(std::function<std::vector<std::string>()> failing)
      : failing_(std::move(failing)) {}

  // civetweb is C: nothing may be thrown back into it.
  bool handleGet(CivetServer* /*server*/, mg_connection* connection) override {
    try {
      const auto failed = failing_();
      std::string body;
      for (const auto& name : failed) {
        body += name + " failed\n";
      }
      answer(connection, failed.empty() ? 200 : 500, failed.empty() ? "ok\n" : body);
    } catch (const std::exception& error) {
      answer(connection, 500, std::string("a check threw: ") + error.what() + "\n");
    }
    return true;
  }

 private:
  std::function<std::vector<std::string>()> failing_;
};

}  // namespace

tl::expected<std::string, std::string> listenAddress(std::string_view flag) {
  const auto colon = flag.rfind(':');
  if (colon == std::string_view::npos) {
    return tl::unexpected("bind address " + std::string(flag) +
                          " has no port: write HOST:PORT or :PORT");
  }
  const auto portText = flag.substr(colon + 1);
  int port = -1;
  const auto [end, error] =
      std::from_chars(portText.data(), portText.data() + portText.size(), port);
  if (portText.empty() || error != std::errc() || end != portText.data() + portText.size() ||
      port < 0 || port > kMaxPort) {
    return tl::unexpected("bind address " + std::string(flag) + " has no valid port (0-65535)");
  }
  if (colon == 0) {
    return "0.0.0.0" + std::string(flag);
  }
  return std::string(flag);
}

// Handlers first: they must outlive the server that calls them.
struct ProbeServer::Server {
  Server(const std::string& address, const std::shared_ptr<const Health>& health)
      : healthz([health] { return health->failingLiveness(); }),
        readyz([health] { return health->failingReadiness(); }),
        civet(std::vector<std::string>{"listening_ports", address, "num_threads", "2"}) {
    civet.addHandler("/healthz$", healthz);
    civet.addHandler("/readyz$", readyz);
  }

  ProbeHandler healthz;
  ProbeHandler readyz;
  CivetServer civet;
  int port = 0;
};

ProbeServer::ProbeServer(std::unique_ptr<Server> server) : server_(std::move(server)) {}

ProbeServer::~ProbeServer() = default;

int ProbeServer::port() const { return server_->port; }

tl::expected<std::unique_ptr<ProbeServer>, std::string> ProbeServer::start(
    std::string_view address, const std::shared_ptr<const Health>& health) {
  const auto listen = listenAddress(address);
  if (!listen) {
    return tl::unexpected(listen.error());
  }
  try {
    auto server = std::make_unique<Server>(*listen, health);
    const auto ports = server->civet.getListeningPorts();
    if (ports.empty()) {
      return tl::unexpected(cannotListen(*listen, "no port bound"));
    }
    server->port = ports.front();
    return std::unique_ptr<ProbeServer>(new ProbeServer(std::move(server)));
  } catch (const std::exception& error) {
    return tl::unexpected(cannotListen(*listen, error.what()));
  }
}

}  // namespace autotune::observability
