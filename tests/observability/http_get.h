#pragma once
// Test support: one blocking HTTP/1.0 GET against a loopback port, plain or over TLS, read until
// the server closes.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>
#include <optional>
#include <string>

namespace autotune::testing {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

inline int connectToLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return -1;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline std::optional<HttpAnswer> parsedAnswer(const std::string& text) {
  const auto space = text.find(' ');
  const auto headersEnd = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.", 0) != 0 || space == std::string::npos ||
      headersEnd == std::string::npos) {
    return std::nullopt;
  }
  return HttpAnswer{std::stoi(text.substr(space + 1, 3)), text.substr(headersEnd + 4)};
}

inline std::string requestFor(const std::string& path, const std::string& headers) {
  return "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" + headers + "\r\n";
}

// Nothing when no connection could be made or the answer is not HTTP. `headers` are whole lines,
// each ending in \r\n.
inline std::optional<HttpAnswer> httpGet(int port, const std::string& path,
                                         const std::string& headers = "") {
  const int fd = connectToLoopback(port);
  if (fd < 0) {
    return std::nullopt;
  }
  const std::string request = requestFor(path, headers);
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return std::nullopt;
  }
  std::string text;
  std::array<char, 4096> buffer{};
  for (ssize_t got = 0; (got = ::recv(fd, buffer.data(), buffer.size(), 0)) > 0;) {
    text.append(buffer.data(), static_cast<std::size_t>(got));
  }
  ::close(fd);
  return parsedAnswer(text);
}

// The same over TLS, trusting whatever certificate the server shows (a self-signed one), at TLS
// `version` (TLS1_2_VERSION) or later.
inline std::optional<HttpAnswer> httpsGet(int port, const std::string& path,
                                          const std::string& headers = "", int maxVersion = 0) {
  const std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> context(SSL_CTX_new(TLS_client_method()),
                                                                  SSL_CTX_free);
  if (!context ||
      (maxVersion != 0 && SSL_CTX_set_max_proto_version(context.get(), maxVersion) != 1)) {
    return std::nullopt;
  }
  const int fd = connectToLoopback(port);
  if (fd < 0) {
    return std::nullopt;
  }
  const std::unique_ptr<SSL, decltype(&SSL_free)> tls(SSL_new(context.get()), SSL_free);
  std::string text;
  if (tls && SSL_set_fd(tls.get(), fd) == 1 && SSL_connect(tls.get()) == 1) {
    const std::string request = requestFor(path, headers);
    if (SSL_write(tls.get(), request.data(), static_cast<int>(request.size())) ==
        static_cast<int>(request.size())) {
      std::array<char, 4096> buffer{};
      for (int got = 0; (got = SSL_read(tls.get(), buffer.data(), buffer.size())) > 0;) {
        text.append(buffer.data(), static_cast<std::size_t>(got));
      }
    }
  }
  ::close(fd);
  return parsedAnswer(text);
}

}  // namespace autotune::testing
