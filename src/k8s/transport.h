#pragma once
// How the client talks HTTP to the API server. The client builds requests and decodes answers;
// a transport only moves bytes, so tests can put an in-process fake in its place.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "k8s/config.h"

namespace autotune::k8s {

struct HttpRequest {
  std::string method;  // GET, POST, PUT, PATCH, DELETE
  std::string target;  // path and query, e.g. /api/v1/namespaces/x/configmaps?limit=2
  std::string body;
  std::string contentType;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
};

// Called with each line of a streamed body; returning false ends the stream.
using LineHandler = std::function<bool(std::string_view line)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // The server's answer, whatever its status; an error only when no answer came (connection,
  // TLS, timeout).
  virtual tl::expected<HttpResponse, std::string> send(const HttpRequest& request) = 0;
  // A streamed answer (a watch): a 200 hands each body line to `onLine` as it arrives, until the
  // server ends the stream, `onLine` returns false, nothing arrives for `idleTimeout`, or `stop` is
  // requested (the connection is closed at once, so a quiet watch ends promptly on shutdown).
  // Another status comes back with its whole body.
  virtual tl::expected<HttpResponse, std::string> stream(const HttpRequest& request,
                                                         const LineHandler& onLine,
                                                         std::chrono::seconds idleTimeout,
                                                         std::stop_token stop) = 0;
};

// cpprestsdk over TLS with the config's CA, client certificate and key loaded from memory, and its
// bearer token (re-read from its token file at least every minute and after a 401).
std::unique_ptr<Transport> makeHttpTransport(const ClusterConfig& config);

}  // namespace autotune::k8s
