#include "rendezvous.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sstream>
#include <thread>
#include <utility>

namespace autotune::trialsim {
namespace {

using Clock = std::chrono::steady_clock;
using Deadline = Socket::Deadline;
using Error = tl::unexpected<std::string>;

constexpr auto kRetryDelay = std::chrono::milliseconds(100);
constexpr auto kHelloWait = std::chrono::seconds(5);
constexpr std::size_t kMaxLine = 4096;

std::string systemError(int number) {
  return std::strerror(number);  // NOLINT(concurrency-mt-unsafe): single-threaded
}

int millisecondsLeft(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
}

// Waits for `events` on `descriptor` until `deadline`; false when it passed first.
tl::expected<bool, std::string> await(int descriptor, short events, Deadline deadline) {
  while (true) {
    pollfd watched{descriptor, events, 0};
    const int ready = ::poll(&watched, 1, millisecondsLeft(deadline));
    if (ready > 0) {
      return true;
    }
    if (ready < 0 && errno != EINTR) {
      return Error("poll: " + systemError(errno));
    }
    if (ready == 0 && Clock::now() >= deadline) {
      return false;
    }
  }
}

void pause(Deadline deadline) {
  std::this_thread::sleep_for(std::min<Clock::duration>(kRetryDelay, deadline - Clock::now()));
}

struct AddressListDeleter {
  void operator()(addrinfo* list) const { ::freeaddrinfo(list); }
};
using AddressList = std::unique_ptr<addrinfo, AddressListDeleter>;

tl::expected<AddressList, std::string> resolve(const NodeGroup& group) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int status = ::getaddrinfo(group.masterAddress.c_str(),
                                   std::to_string(group.masterPort).c_str(), &hints, &found);
  if (status != 0) {
    return Error("cannot resolve " + group.masterAddress + ": " + ::gai_strerror(status));
  }
  return AddressList(found);
}

// A socket listening on the master address itself, not on every address of the host: on one
// machine several launches then use the same port, each on its own address.
tl::expected<Socket, std::string> listenOn(const NodeGroup& group) {
  auto addresses = resolve(group);
  if (!addresses) {
    return Error(addresses.error());
  }
  std::string error = "no address";
  for (const addrinfo* address = addresses->get(); address != nullptr; address = address->ai_next) {
    const int descriptor =
        ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, address->ai_protocol);
    if (descriptor < 0) {
      error = "socket: " + systemError(errno);
      continue;
    }
    Socket listener(descriptor);
    const int reuse = 1;
    ::setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse));
    if (::bind(descriptor, address->ai_addr, address->ai_addrlen) != 0) {
      error = "bind: " + systemError(errno);
      continue;
    }
    if (::listen(descriptor, group.nodes) != 0) {
      error = "listen: " + systemError(errno);
      continue;
    }
    return listener;
  }
  return Error(error);
}

// Connects to one address, giving up at `deadline` rather than at the kernel's own timeout.
tl::expected<Socket, std::string> connectTo(const addrinfo& address, Deadline deadline) {
  const int descriptor =
      ::socket(address.ai_family, address.ai_socktype | SOCK_CLOEXEC, address.ai_protocol);
  if (descriptor < 0) {
    return Error("socket: " + systemError(errno));
  }
  Socket connection(descriptor);
  const int flags = ::fcntl(descriptor, F_GETFL);
  ::fcntl(descriptor, F_SETFL, flags | O_NONBLOCK);
  if (::connect(descriptor, address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      return Error("connect: " + systemError(errno));
    }
    const auto writable = await(descriptor, POLLOUT, deadline);
    if (!writable) {
      return Error(writable.error());
    }
    if (!*writable) {
      return Error(std::string("connect: no answer"));
    }
    int result = 0;
    socklen_t length = sizeof(result);
    ::getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &result, &length);
    if (result != 0) {
      return Error("connect: " + systemError(result));
    }
  }
  ::fcntl(descriptor, F_SETFL, flags);
  return connection;
}

tl::expected<Socket, std::string> connectToMaster(const NodeGroup& group, Deadline deadline) {
  auto addresses = resolve(group);
  if (!addresses) {
    return Error(addresses.error());
  }
  std::string error = "no address";
  for (const addrinfo* address = addresses->get(); address != nullptr; address = address->ai_next) {
    auto connection = connectTo(*address, deadline);
    if (connection) {
      return connection;
    }
    error = connection.error();
  }
  return Error(error);
}

// A line as one line: a multi-line error travels with its newlines as spaces.
std::string oneLine(std::string text) {
  std::ranges::replace(text, '\n', ' ');
  std::ranges::replace(text, '\r', ' ');
  while (!text.empty() && text.back() == ' ') {
    text.pop_back();
  }
  return text.substr(0, kMaxLine / 2);
}

std::string describeRank(int rank, int nodes) {
  return "node rank " + std::to_string(rank) + " of " + std::to_string(nodes);
}

std::string seconds(std::chrono::milliseconds duration) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%g", static_cast<double>(duration.count()) / 1000);
  return text.data();
}

}  // namespace

Socket::Socket(Socket&& other) noexcept
    : descriptor_(std::exchange(other.descriptor_, -1)), buffered_(std::move(other.buffered_)) {}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (descriptor_ >= 0) {
      ::close(descriptor_);
    }
    descriptor_ = std::exchange(other.descriptor_, -1);
    buffered_ = std::move(other.buffered_);
  }
  return *this;
}

Socket::~Socket() {
  if (descriptor_ >= 0) {
    ::close(descriptor_);
  }
}

tl::expected<std::string, std::string> Socket::readLine(Deadline deadline) {
  while (true) {
    if (const auto newline = buffered_.find('\n'); newline != std::string::npos) {
      std::string line = buffered_.substr(0, newline);
      buffered_.erase(0, newline + 1);
      return line;
    }
    if (buffered_.size() > kMaxLine) {
      return Error(std::string("a line longer than the protocol's"));
    }
    const auto readable = await(descriptor_, POLLIN, deadline);
    if (!readable) {
      return Error(readable.error());
    }
    if (!*readable) {
      return Error(std::string("no answer in time"));
    }
    std::array<char, 1024> chunk{};
    const ssize_t count = ::recv(descriptor_, chunk.data(), chunk.size(), 0);
    if (count == 0) {
      return Error(std::string("connection closed"));
    }
    if (count < 0) {
      if (errno == EINTR || errno == EAGAIN) {
        continue;
      }
      return Error("recv: " + systemError(errno));
    }
    buffered_.append(chunk.data(), static_cast<std::size_t>(count));
  }
}

tl::expected<void, std::string> Socket::writeLine(const std::string& line) const {
  const std::string message = line + "\n";
  std::size_t sent = 0;
  while (sent < message.size()) {
    // MSG_NOSIGNAL: a peer that is gone is an error here, not a SIGPIPE.
    const ssize_t count =
        ::send(descriptor_, message.data() + sent, message.size() - sent, MSG_NOSIGNAL);
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      return Error("send: " + systemError(errno));
    }
    sent += static_cast<std::size_t>(count);
  }
  return {};
}

std::string timeoutMessage(const NodeGroup& group, std::chrono::milliseconds timeout,
                           const std::string& why) {
  return "rendezvous with " + group.masterAddress + ":" + std::to_string(group.masterPort) +
         " timed out after " + seconds(timeout) + " s (" + why + ")";
}

tl::expected<Rendezvous, std::string> Rendezvous::join(const NodeGroup& group,
                                                       std::chrono::milliseconds timeout) {
  const Deadline deadline = Clock::now() + timeout;
  Rendezvous rendezvous(group, timeout);
  const std::string self = describeRank(group.rank, group.nodes);
  if (group.rank != 0) {
    std::string error;
    while (Clock::now() < deadline) {
      auto connection = connectToMaster(group, deadline);
      if (connection) {
        const std::string hello =
            "join " + std::to_string(group.rank) + " " + std::to_string(group.nodes);
        auto answer =
            connection->writeLine(hello).and_then([&] { return connection->readLine(deadline); });
        if (answer && *answer == "go") {
          rendezvous.master_ = std::move(*connection);
          return rendezvous;
        }
        // Rank 0 went away or turned this rank down: it may come back, so keep trying.
        error = answer ? "rank 0 answered \"" + *answer + "\"" : answer.error();
      } else {
        error = connection.error();
      }
      pause(deadline);
    }
    return Error(timeoutMessage(group, timeout, self + ": " + error));
  }

  std::optional<Socket> listener;
  while (!listener) {
    auto listening = listenOn(group);
    if (listening) {
      listener = std::move(*listening);
    } else if (Clock::now() >= deadline) {
      return Error(timeoutMessage(group, timeout, self + ": " + listening.error()));
    } else {
      pause(deadline);
    }
  }
  rendezvous.peers_.resize(static_cast<std::size_t>(group.nodes));
  int joined = 1;
  std::string refused;
  while (joined < group.nodes) {
    const auto ready = await(listener->descriptor(), POLLIN, deadline);
    if (!ready) {
      return Error(ready.error());
    }
    if (!*ready) {
      std::string why = std::to_string(joined) + " of " + std::to_string(group.nodes) +
                        " nodes joined; missing node ranks ";
      const char* separator = "";
      for (int rank = 1; rank < group.nodes; ++rank) {
        if (!rendezvous.peers_[static_cast<std::size_t>(rank)]) {
          why.append(separator).append(std::to_string(rank));
          separator = ", ";
        }
      }
      return Error(timeoutMessage(group, timeout, why.append(refused)));
    }
    const int accepted = ::accept4(listener->descriptor(), nullptr, nullptr, SOCK_CLOEXEC);
    if (accepted < 0) {
      continue;  // the connection went before it was taken; its rank connects again
    }
    Socket peer(accepted);
    // A connection that says nothing must not hold up the ranks behind it.
    const auto hello = peer.readLine(std::min(deadline, Clock::now() + kHelloWait));
    if (!hello) {
      continue;
    }
    std::istringstream words(*hello);
    std::string verb;
    int rank = -1;
    int nodes = -1;
    words >> verb >> rank >> nodes;
    const bool valid = verb == "join" && nodes == group.nodes && rank >= 1 && rank < group.nodes &&
                       !rendezvous.peers_[static_cast<std::size_t>(rank)];
    if (!valid) {
      // Another launch's process, or a rank that joined twice: not one of this group's.
      refused = "; turned down \"" + oneLine(*hello) + "\"";
      continue;
    }
    rendezvous.peers_[static_cast<std::size_t>(rank)] = std::move(peer);
    ++joined;
  }
  for (auto& peer : rendezvous.peers_) {
    if (peer) {
      if (const auto sent = peer->writeLine("go"); !sent) {
        return Error("rendezvous: " + sent.error());
      }
    }
  }
  return rendezvous;
}

tl::expected<void, std::string> Rendezvous::conclude(const RankOutcome& own) {
  return group_.rank == 0 ? collect(own) : report(own);
}

tl::expected<void, std::string> Rendezvous::collect(const RankOutcome& own) {
  std::optional<std::string> failure;
  if (own.status != 0) {
    failure = describeRank(0, group_.nodes) + " failed with exit status " +
              std::to_string(own.status) + ": " + oneLine(own.message);
  }
  const Deadline deadline = Clock::now() + timeout_;
  for (int rank = 1; rank < group_.nodes && !failure; ++rank) {
    const std::string peer = describeRank(rank, group_.nodes);
    const auto line = peers_[static_cast<std::size_t>(rank)]->readLine(deadline);
    if (!line) {
      failure = peer + " ended without telling its outcome (" + line.error() + ")";
      continue;
    }
    std::istringstream words(*line);
    std::string verb;
    int status = -1;
    words >> verb >> status;
    std::string message;
    std::getline(words >> std::ws, message);
    if (verb != "done") {
      failure = peer + " said \"" + oneLine(*line) + "\" instead of its outcome";
    } else if (status != 0) {
      failure = peer + " failed with exit status " + std::to_string(status) + ": ";
      failure->append(message);
    }
  }
  const std::string verdict = failure ? "failed " + *failure : "ok";
  for (auto& peer : peers_) {
    if (peer) {
      // A peer that is gone needs no verdict.
      [[maybe_unused]] const auto sent = peer->writeLine(verdict);
    }
  }
  if (failure) {
    return Error(*failure);
  }
  return {};
}

tl::expected<void, std::string> Rendezvous::report(const RankOutcome& own) {
  const std::string line = "done " + std::to_string(own.status) + " " + oneLine(own.message);
  const auto sent = master_->writeLine(line);
  if (own.status != 0) {
    return {};
  }
  if (!sent) {
    return Error("cannot tell rank 0 this rank's outcome: " + sent.error());
  }
  // Rank 0 answers once it has heard from every rank, each within the timeout of its own end.
  const auto verdict = master_->readLine(Clock::now() + 2 * timeout_);
  if (!verdict) {
    return Error("rank 0 ended without the group's outcome (" + verdict.error() + ")");
  }
  if (*verdict == "ok") {
    return {};
  }
  const std::string prefix = "failed ";
  return Error("the launch failed on another node: " +
               (verdict->starts_with(prefix) ? verdict->substr(prefix.size()) : *verdict));
}

}  // namespace autotune::trialsim
