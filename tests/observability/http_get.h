#pragma once
// Test support: one blocking HTTP/1.0 GET against a loopback port, read until the server closes.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <optional>
#include <string>

namespace autotune::testing {

struct HttpAnswer {
  int status = 0;
  std::string body;
};

// Nothing when no connection could be made or the answer is not HTTP.
inline std::optional<HttpAnswer> httpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return std::nullopt;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
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
  const auto space = text.find(' ');
  const auto headersEnd = text.find("\r\n\r\n");
  if (text.rfind("HTTP/1.", 0) != 0 || space == std::string::npos ||
      headersEnd == std::string::npos) {
    return std::nullopt;
  }
  return HttpAnswer{std::stoi(text.substr(space + 1, 3)), text.substr(headersEnd + 4)};
}

}  // namespace autotune::testing
