// The cpprestsdk transport. cpprestsdk throws and runs its own thread pool: exceptions are caught
// here, and every wait on a task happens on the caller's thread, never inside a continuation.

#include <cpprest/http_client.h>
#include <cpprest/streams.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <mutex>
#include <stop_token>

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

// The bearer token, re-read from its file once a minute and whenever the server said 401.
class TokenSource {
 public:
  explicit TokenSource(ClusterConfig config) : config_(std::move(config)) {}

  std::string current() {
    const std::lock_guard lock(mutex_);
    if (config_.tokenFile.empty() || Clock::now() - readAt_ < kTokenLifetime) {
      return cached_.empty() ? config_.token : cached_;
    }
    refresh();
    return cached_;
  }

  void invalidate() {
    const std::lock_guard lock(mutex_);
    readAt_ = {};
  }

 private:
  void refresh() {
    if (auto token = readToken(config_)) {
      cached_ = *token;
    }
    readAt_ = Clock::now();
  }

  ClusterConfig config_;
  std::mutex mutex_;
  std::string cached_;
  Clock::time_point readAt_;
};

class HttpTransport final : public Transport {
 public:
  explicit HttpTransport(const ClusterConfig& config)
      : config_(config),
        client_(utility::conversions::to_string_t(config.server), clientConfig(config)),
        tokens_(config) {}

  tl::expected<HttpResponse, std::string> stream(const HttpRequest& request,
                                                 const LineHandler& onLine,
                                                 std::chrono::seconds idleTimeout,
                                                 std::stop_token stop) override {
    try {
      // A client of its own: cpprestsdk's timeout restarts with every read, so it is the idle
      // timeout of this stream only.
      web::http::client::http_client_config settings = clientConfig(config_);
      settings.set_timeout(idleTimeout);
      web::http::client::http_client client(utility::conversions::to_string_t(config_.server),
                                            settings);
      pplx::cancellation_token_source cancel;
      // Cancelling closes the connection, which also ends a read that is waiting for a line.
      const std::stop_callback stopped(stop, [&cancel] { cancel.cancel(); });
      const web::http::http_response answer =
          client.request(message(request), cancel.get_token()).get();
      if (answer.status_code() != web::http::status_codes::OK) {
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
      tokens_.invalidate();
      response = attempt(request);
    }
    return response;
  }

 private:
  static web::http::client::http_client_config clientConfig(const ClusterConfig& config) {
    web::http::client::http_client_config settings;
    settings.set_timeout(config.requestTimeout);
    settings.set_validate_certificates(!config.insecureSkipTlsVerify);
    settings.set_ssl_context_callback([config](boost::asio::ssl::context& context) {
      if (!config.caData.empty()) {
        trustOnly(context, config.caData);
      }
      if (!config.clientCertData.empty() && !config.clientKeyData.empty()) {
        context.use_certificate_chain(boost::asio::buffer(config.clientCertData));
        context.use_private_key(boost::asio::buffer(config.clientKeyData),
                                boost::asio::ssl::context::pem);
      }
    });
    return settings;
  }

  web::http::http_request message(const HttpRequest& request) {
    web::http::http_request message(utility::conversions::to_string_t(request.method));
    message.set_request_uri(utility::conversions::to_string_t(request.target));
    for (const auto& [name, value] : request.headers) {
      message.headers().add(name, value);
    }
    if (const std::string token = tokens_.current(); !token.empty()) {
      message.headers().add("Authorization", "Bearer " + token);
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
      // Blocking here, on the caller's thread, is the point: callers are our own threads.
      return responseOf(client_.request(message(request)).get());
    } catch (const std::exception& error) {
      return tl::unexpected(std::string(error.what()));
    }
  }

  ClusterConfig config_;
  web::http::client::http_client client_;
  TokenSource tokens_;
};

}  // namespace

std::unique_ptr<Transport> makeHttpTransport(const ClusterConfig& config) {
  return std::make_unique<HttpTransport>(config);
}

}  // namespace autotune::k8s
