// The cpprestsdk transport. cpprestsdk throws and runs its own thread pool: exceptions are caught
// here, and every wait on a task happens on the caller's thread, never inside a continuation.

#include <cpprest/http_client.h>
#include <cpprest/streams.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>

#include "k8s/exec_credential.h"
#include "k8s/transport.h"

namespace autotune::k8s {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTokenLifetime = std::chrono::minutes(1);
constexpr int kUnauthorized = 401;

std::string lowerCase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

using Body = concurrency::streams::streambuf<std::uint8_t>;
constexpr std::size_t kChunkBytes = std::size_t{64} * 1024;

// The next bytes of a streamed body, appended to `into`: all that has arrived, or, when nothing
// has, the first byte to come. False at the end of the body. cpprestsdk's read_line takes a body
// a byte at a time, each a task and a lock, which made a 16 KB Node's watch event cost ~2 ms.
bool readMore(Body& body, std::string& into) {
  const std::size_t available = body.in_avail();
  if (available == 0) {
    const auto next = body.bumpc().get();
    if (next == Body::traits::eof()) {
      return false;
    }
    into.push_back(static_cast<char>(next));
    return true;
  }
  std::array<std::uint8_t, kChunkBytes> chunk{};
  const std::size_t read = body.getn(chunk.data(), std::min(available, chunk.size())).get();
  into.append(reinterpret_cast<const char*>(chunk.data()), read);
  return read > 0;
}

// Hands `onLine` each complete line of `pending` (without its end), keeping the unfinished rest;
// false when `onLine` asked to stop.
bool takeLines(std::string& pending, const LineHandler& onLine) {
  std::size_t start = 0;
  for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n', start)) {
    std::string_view line(pending.data() + start, end - start);
    if (line.ends_with('\r')) {
      line.remove_suffix(1);
    }
    start = end + 1;
    if (!line.empty() && !onLine(line)) {
      return false;
    }
  }
  pending.erase(0, start);
  return true;
}

// cpprestsdk loads the system's trust store before this callback runs; a kubeconfig that names a
// CA trusts that CA alone, as kubectl does, so a public CA cannot vouch for a look-alike server.
void trustOnly(boost::asio::ssl::context& context, const std::string& caPem) {
  SSL_CTX_set_cert_store(context.native_handle(), X509_STORE_new());
  context.add_certificate_authority(boost::asio::buffer(caPem));
}

// What authenticates a request: a bearer token (inline; from a file, re-read once a minute; or
// from an exec plugin, kept until it expires) and a client certificate (the kubeconfig's, or the
// plugin's). A 401 makes the next request read or fetch them afresh.
class Credentials {
 public:
  explicit Credentials(ClusterConfig config) : config_(std::move(config)) {}

  // The bearer token to send, empty for none; an error when the plugin gives none.
  tl::expected<std::string, std::string> token() {
    const std::lock_guard lock(mutex_);
    if (config_.exec) {
      auto fetched = fromPlugin();
      if (!fetched) {
        return tl::unexpected(fetched.error());
      }
      return (*fetched)->token;
    }
    if (!config_.tokenFile.empty() && Clock::now() - readAt_ >= kTokenLifetime) {
      if (auto token = readToken(config_)) {
        cached_ = *token;
      }
      readAt_ = Clock::now();
    }
    return cached_.empty() ? config_.token : cached_;
  }

  // The client certificate and key (PEM) a new connection presents; empty for none.
  std::pair<std::string, std::string> certificate() {
    const std::lock_guard lock(mutex_);
    if (config_.exec) {
      if (auto fetched = fromPlugin(); fetched && !(*fetched)->clientCertData.empty()) {
        return {(*fetched)->clientCertData, (*fetched)->clientKeyData};
      }
    }
    return {config_.clientCertData, config_.clientKeyData};
  }

  // After a 401. True when the plugin's client certificate is what failed, which connections
  // already open still present.
  bool invalidate() {
    const std::lock_guard lock(mutex_);
    readAt_ = {};
    const bool certificateFailed = plugin_ && !plugin_->clientCertData.empty();
    plugin_.reset();
    return certificateFailed;
  }

 private:
  // The plugin's credential, fetched when there is none or it has expired.
  tl::expected<const ExecCredential*, std::string> fromPlugin() {
    if (plugin_ &&
        (!plugin_->expiresAt || std::chrono::system_clock::now() < *plugin_->expiresAt)) {
      return &*plugin_;
    }
    auto fetched = fetchExecCredential(config_);
    if (!fetched) {
      plugin_.reset();
      return tl::unexpected(fetched.error().message);
    }
    plugin_ = std::move(*fetched);
    return &*plugin_;
  }

  ClusterConfig config_;
  std::mutex mutex_;
  std::string cached_;
  Clock::time_point readAt_;
  std::optional<ExecCredential> plugin_;
};

class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(const ClusterConfig& config)
      : config_(config),
        credentials_(std::make_shared<Credentials>(config)),
        client_(newClient(clientConfig(config_.requestTimeout))) {}

  tl::expected<HttpResponse, std::string> stream(const HttpRequest& request,
                                                 const LineHandler& onLine,
                                                 std::chrono::seconds idleTimeout,
                                                 std::stop_token stop) override {
    try {
      auto sent = message(request);
      if (!sent) {
        return tl::unexpected(sent.error());
      }
      // A client of its own: cpprestsdk's timeout restarts with every read, so it is the idle
      // timeout of this stream only.
      const auto client = newClient(clientConfig(idleTimeout));
      pplx::cancellation_token_source cancel;
      // Cancelling closes the connection, which also ends a read that is waiting for a line.
      const std::stop_callback stopped(stop, [&cancel] { cancel.cancel(); });
      const web::http::http_response answer = client->request(*sent, cancel.get_token()).get();
      if (answer.status_code() != web::http::status_codes::OK) {
        if (answer.status_code() == kUnauthorized) {
          credentials_->invalidate();
        }
        return responseOf(answer);
      }
      Body body = answer.body().streambuf();
      std::string pending;
      bool more = true;
      while (more && !stop.stop_requested()) {
        more = readMore(body, pending);
        if (!more) {
          pending.push_back('\n');  // a last line without its end
        }
        if (!takeLines(pending, onLine)) {
          cancel.cancel();
          break;
        }
      }
      HttpResponse ended;
      ended.status = answer.status_code();
      return ended;
    } catch (const std::exception& error) {
      return tl::unexpected(std::string(error.what()));
    }
  }

  tl::expected<HttpResponse, std::string> send(const HttpRequest& request) override {
    auto response = attempt(request);
    if (response && response->status == kUnauthorized) {
      if (credentials_->invalidate()) {
        // Pooled connections would present the certificate the server refused.
        const std::lock_guard lock(clientMutex_);
        client_ = newClient(clientConfig(config_.requestTimeout));
      }
      response = attempt(request);
    }
    return response;
  }

 private:
  using HttpClient = web::http::client::http_client;

  std::shared_ptr<HttpClient> newClient(
      const web::http::client::http_client_config& settings) const {
    return std::make_shared<HttpClient>(utility::conversions::to_string_t(config_.server),
                                        settings);
  }

  web::http::client::http_client_config clientConfig(std::chrono::seconds timeout) const {
    web::http::client::http_client_config settings;
    settings.set_timeout(timeout);
    settings.set_validate_certificates(!config_.insecureSkipTlsVerify);
    settings.set_ssl_context_callback(
        [ca = config_.caData, credentials = credentials_](boost::asio::ssl::context& context) {
          if (!ca.empty()) {
            trustOnly(context, ca);
          }
          const auto [certificate, key] = credentials->certificate();
          if (!certificate.empty() && !key.empty()) {
            context.use_certificate_chain(boost::asio::buffer(certificate));
            context.use_private_key(boost::asio::buffer(key), boost::asio::ssl::context::pem);
          }
        });
    return settings;
  }

  tl::expected<web::http::http_request, std::string> message(const HttpRequest& request) {
    auto token = credentials_->token();
    if (!token) {
      return tl::unexpected(token.error());
    }
    web::http::http_request message(utility::conversions::to_string_t(request.method));
    message.set_request_uri(utility::conversions::to_string_t(request.target));
    for (const auto& [name, value] : request.headers) {
      message.headers().add(name, value);
    }
    if (!token->empty()) {
      message.headers().add("Authorization", "Bearer " + *token);
    }
    message.headers().add("Accept", "application/json");
    if (!config_.userAgent.empty()) {
      message.headers().add("User-Agent", config_.userAgent);
    }
    if (!request.body.empty() || !request.contentType.empty()) {
      message.set_body(request.body, request.contentType);
    }
    return message;
  }

  static HttpResponse responseOf(const web::http::http_response& answer) {
    HttpResponse response;
    response.status = answer.status_code();
    response.body = answer.extract_utf8string(true).get();
    for (const auto& [name, value] : answer.headers()) {
      response.headers[lowerCase(name)] = value;
    }
    return response;
  }

  tl::expected<HttpResponse, std::string> attempt(const HttpRequest& request) {
    try {
      auto sent = message(request);
      if (!sent) {
        return tl::unexpected(sent.error());
      }
      std::shared_ptr<HttpClient> client;
      {
        const std::lock_guard lock(clientMutex_);
        client = client_;
      }
      // Blocking here, on the caller's thread, is the point: callers are our own threads.
      return responseOf(client->request(*sent).get());
    } catch (const std::exception& error) {
      return tl::unexpected(std::string(error.what()));
    }
  }

  ClusterConfig config_;
  std::shared_ptr<Credentials> credentials_;
  std::mutex clientMutex_;
  std::shared_ptr<HttpClient> client_;
};

}  // namespace

std::unique_ptr<Transport> makeHttpTransport(const ClusterConfig& config) {
  return std::make_unique<HttpTransport>(config);
}

}  // namespace autotune::k8s
