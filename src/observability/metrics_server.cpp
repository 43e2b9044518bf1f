// /metrics on a server of its own, over plain sockets and, given a certificate, OpenSSL: the HTTP
// server of the probes (CivetWeb) loads OpenSSL by symbol names that OpenSSL 3 no longer has.
// A scrape is one small GET, so one request a connection, answered and closed, is enough.

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "observability/endpoints.h"
#include "observability/openssl_ptr.h"

namespace autotune::observability {
namespace {

// Scrapes come one at a time; two workers let a slow client not hold the other.
constexpr int kWorkers = 2;
// A client that sends or reads nothing this long is dropped.
constexpr int kIdleSeconds = 10;
// A scrape's request is a line and a few headers.
constexpr std::size_t kRequestBytes = std::size_t{16} * 1024;

using Context = OpenSslPtr<SSL_CTX, SSL_CTX_free>;
using Tls = OpenSslPtr<SSL, SSL_free>;

std::string cannotListen(const std::string& address, const std::string& why) {
  return "cannot listen on " + address + ": " + why;
}

// A TLS context serving the key and certificate of PEM text, TLS 1.2 or later.
tl::expected<Context, std::string> tlsContext(const std::string& pem) {
  Context context(SSL_CTX_new(TLS_server_method()));
  const OpenSslPtr<BIO, BIO_free> keyBio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  const OpenSslPtr<BIO, BIO_free> certificateBio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  const OpenSslPtr<EVP_PKEY, EVP_PKEY_free> key(
      PEM_read_bio_PrivateKey(keyBio.get(), nullptr, nullptr, nullptr));
  const OpenSslPtr<X509, X509_free> certificate(
      PEM_read_bio_X509(certificateBio.get(), nullptr, nullptr, nullptr));
  if (!context || !key || !certificate ||
      SSL_CTX_set_min_proto_version(context.get(), TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(context.get(), certificate.get()) != 1 ||
      SSL_CTX_use_PrivateKey(context.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(context.get()) != 1) {
    ERR_clear_error();
    return tl::unexpected(std::string("the serving key and certificate cannot be used"));
  }
  return context;
}

// A listening socket on "host:port"; the error says why not.
tl::expected<int, std::string> listenOn(const std::string& address) {
  const auto colon = address.rfind(':');
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return tl::unexpected(std::string(gai_strerror(error)));
  }
  const std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  std::string why = "no address";
  for (const addrinfo* candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    const int fd = socket(candidate->ai_family, candidate->ai_socktype, candidate->ai_protocol);
    const int reuse = 1;
    if (fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) == 0 &&
        bind(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
      return fd;
    }
    why = std::string(strerror(errno));  // NOLINT(concurrency-mt-unsafe): start-up, one thread
    if (fd >= 0) {
      close(fd);
    }
  }
  return tl::unexpected(why);
}

int portOf(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
    return 0;
  }
  // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  return ntohs(bound.ss_family == AF_INET6
                   ? reinterpret_cast<const sockaddr_in6*>(&bound)->sin6_port
                   : reinterpret_cast<const sockaddr_in*>(&bound)->sin_port);
  // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
}

// One connection's bytes, over TLS or not.
class Connection {
 public:
  Connection(int fd, SSL_CTX* context) : fd_(fd) {
    const timeval idle{kIdleSeconds, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof(idle));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &idle, sizeof(idle));
    if (context != nullptr) {
      tls_.reset(SSL_new(context));
      handshaken_ = tls_ && SSL_set_fd(tls_.get(), fd_) == 1 && SSL_accept(tls_.get()) == 1;
    }
  }
  ~Connection() {
    if (handshaken_) {
      SSL_shutdown(tls_.get());
    }
    close(fd_);
    ERR_clear_error();
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  Connection(Connection&&) = delete;
  Connection& operator=(Connection&&) = delete;

  bool usable() const { return !tls_ || handshaken_; }

  // The request's head (up to the blank line), if it came whole and within kRequestBytes.
  std::optional<std::string> readHead() {
    std::string head;
    std::array<char, 2048> buffer{};
    while (head.find("\r\n\r\n") == std::string::npos) {
      const long got = tls_ ? SSL_read(tls_.get(), buffer.data(), static_cast<int>(buffer.size()))
                            : recv(fd_, buffer.data(), buffer.size(), 0);
      if (got <= 0 || head.size() + static_cast<std::size_t>(got) > kRequestBytes) {
        return std::nullopt;
      }
      head.append(buffer.data(), static_cast<std::size_t>(got));
    }
    return head;
  }

  void write(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const long wrote =
          tls_ ? SSL_write(tls_.get(), bytes.data() + sent, static_cast<int>(bytes.size() - sent))
               : send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (wrote <= 0) {
        return;
      }
      sent += static_cast<std::size_t>(wrote);
    }
  }

 private:
  int fd_;
  Tls tls_;
  bool handshaken_ = false;
};

std::string response(int status, std::string_view reason, const std::string& body,
                     std::string_view contentType = "text/plain; charset=utf-8",
                     std::string_view extraHeaders = "") {
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
         "\r\nContent-Type: " + std::string(contentType) +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nCache-Control: no-store\r\nConnection: close\r\n" + std::string(extraHeaders) +
         "\r\n" + body;
}

bool startsWithIgnoringCase(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() &&
         std::ranges::equal(text.substr(0, prefix.size()), prefix, [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         });
}

// The value of header `name` in a request head, if it has one.
std::string headerValue(const std::string& head, std::string_view name) {
  std::size_t start = head.find("\r\n");
  while (start != std::string::npos && start + 2 < head.size()) {
    const std::size_t lineStart = start + 2;
    const std::size_t lineEnd = head.find("\r\n", lineStart);
    const std::string_view line(head.data() + lineStart,
                                (lineEnd == std::string::npos ? head.size() : lineEnd) - lineStart);
    if (line.size() > name.size() && line[name.size()] == ':' &&
        startsWithIgnoringCase(line, name)) {
      std::string_view value = line.substr(name.size() + 1);
      while (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
      }
      return std::string(value);
    }
    start = lineEnd;
  }
  return "";
}

// The token of an "Authorization: Bearer <token>" header; empty without one.
std::string bearerToken(const std::string& head) {
  const std::string authorization = headerValue(head, "Authorization");
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() <= kScheme.size() || !startsWithIgnoringCase(authorization, kScheme)) {
    return "";
  }
  return authorization.substr(kScheme.size());
}

}  // namespace

struct MetricsServer::Server {
  Server(int listening, Context tls, const Metrics& metrics, Authorize authorize)
      : fd(listening), context(std::move(tls)), metrics(metrics), authorize(std::move(authorize)) {
    for (int i = 0; i < kWorkers; ++i) {
      workers.emplace_back([this] { serve(); });
    }
  }
  ~Server() {
    stopping = true;
    shutdown(fd, SHUT_RDWR);
    for (auto& worker : workers) {
      worker.join();
    }
    close(fd);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  Server(Server&&) = delete;
  Server& operator=(Server&&) = delete;

  void serve() const {
    while (!stopping) {
      const int client = accept(fd, nullptr, nullptr);
      if (client < 0) {
        if (stopping || (errno != EINTR && errno != ECONNABORTED && errno != EMFILE)) {
          return;
        }
        continue;
      }
      Connection connection(client, context.get());
      if (connection.usable()) {
        if (const auto head = connection.readHead()) {
          connection.write(answer(*head));
        }
      }
    }
  }

  // civetweb-free, and still nothing may escape a worker thread.
  std::string answer(const std::string& head) const {
    if (!head.starts_with("GET /metrics ") && !head.starts_with("GET /metrics?")) {
      return response(404, "Not Found", "only /metrics is served here\n");
    }
    try {
      switch (authorize ? authorize(bearerToken(head)) : Access::kAllowed) {
        case Access::kAllowed:
          return response(200, "OK", metrics.exposition(),
                          "text/plain; version=0.0.4; charset=utf-8");
        case Access::kUnauthenticated:
          return response(401, "Unauthorized", "a bearer token the API server knows is needed\n",
                          "text/plain; charset=utf-8", "WWW-Authenticate: Bearer\r\n");
        case Access::kForbidden:
          return response(403, "Forbidden", "the token's user may not get /metrics\n");
        case Access::kUnknown:
          break;
      }
      return response(503, "Service Unavailable", "the token could not be checked now\n");
    } catch (const std::exception& error) {
      return response(500, "Internal Server Error",
                      std::string("the scrape failed: ") + error.what() + "\n");
    }
  }

  int fd;
  Context context;
  const Metrics& metrics;
  Authorize authorize;
  std::atomic<bool> stopping = false;
  std::vector<std::thread> workers;
};

MetricsServer::MetricsServer(std::unique_ptr<Server> server) : server_(std::move(server)) {}

MetricsServer::~MetricsServer() = default;

int MetricsServer::port() const { return portOf(server_->fd); }

tl::expected<std::unique_ptr<MetricsServer>, std::string> MetricsServer::start(
    const MetricsServing& serving, const Metrics& metrics) {
  const auto address = listenAddress(serving.address);
  if (!address) {
    return tl::unexpected(address.error());
  }
  Context context;
  if (!serving.certificate.empty()) {
    auto made = tlsContext(serving.certificate);
    if (!made) {
      return tl::unexpected(made.error());
    }
    context = std::move(*made);
  }
  const auto fd = listenOn(*address);
  if (!fd) {
    return tl::unexpected(cannotListen(*address, fd.error()));
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(
      std::make_unique<Server>(*fd, std::move(context), metrics, serving.authorize)));
}

}  // namespace autotune::observability
