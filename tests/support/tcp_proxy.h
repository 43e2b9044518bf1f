#pragma once
// Test support: a loopback TCP proxy in front of the API server whose open connections a test can
// cut at will, as a load balancer or a flaky network would. TLS passes through untouched.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace autotune::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int upstreamPort) : upstreamPort_(upstreamPort) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address = loopback(0);
    bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(listener_, 16);
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }

  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  TcpProxy(TcpProxy&&) = delete;
  TcpProxy& operator=(TcpProxy&&) = delete;

  ~TcpProxy() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    close(listener_);
    cut();
    acceptor_.join();
    for (auto& pump : pumps_) {
      pump.join();
    }
  }

  int port() const { return port_; }

  // Resets every connection open now; new ones are still accepted.
  int cut() {
    const std::lock_guard lock(mutex_);
    for (const int fd : open_) {
      shutdown(fd, SHUT_RDWR);
    }
    return static_cast<int>(open_.size()) / 2;
  }

 private:
  static sockaddr_in loopback(int port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }

  void acceptLoop() {
    while (!stopping_) {
      const int client = accept(listener_, nullptr, nullptr);
      if (client < 0) {
        continue;
      }
      const int upstream = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in address = loopback(upstreamPort_);
      if (connect(upstream, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        close(client);
        close(upstream);
        continue;
      }
      const std::lock_guard lock(mutex_);
      open_.push_back(client);
      open_.push_back(upstream);
      pumps_.emplace_back([this, client, upstream] { pump(client, upstream); });
    }
  }

  // Copies bytes both ways until either side closes or is shut down.
  void pump(int a, int b) {
    std::array<pollfd, 2> fds{pollfd{a, POLLIN, 0}, pollfd{b, POLLIN, 0}};
    std::array<char, 16384> buffer{};
    bool open = true;
    while (open && poll(fds.data(), fds.size(), -1) > 0) {
      for (std::size_t i = 0; i < fds.size() && open; ++i) {
        if (fds[i].revents == 0) {
          continue;
        }
        const ssize_t read = recv(fds[i].fd, buffer.data(), buffer.size(), 0);
        open = read > 0 && send(fds[1 - i].fd, buffer.data(), static_cast<std::size_t>(read),
                                MSG_NOSIGNAL) == read;
      }
    }
    // Forgotten before closing, so that cut() never shuts a reused descriptor.
    const std::lock_guard lock(mutex_);
    std::erase(open_, a);
    std::erase(open_, b);
    close(a);
    close(b);
  }

  int upstreamPort_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_ = false;
  std::mutex mutex_;
  std::vector<int> open_;
  std::vector<std::thread> pumps_;
  std::thread acceptor_;
};

}  // namespace autotune::testing
