#pragma once
// The meeting of a multi-node launch's processes over TCP, in place of torch.distributed's
// rendezvous: rank 0 listens on the master address, the others connect to it, and no rank trains
// before all have joined. After the run the same connections carry each rank's outcome to rank 0,
// and rank 0's verdict back, so that a rank whose peer failed fails too, as a NCCL or gloo job
// does when one of its processes dies.
//
// One message per line:
//   peer -> rank 0   join <rank> <nodes>            on connecting
//   rank 0 -> peer   go                             once every rank has joined
//   peer -> rank 0   done <status> <message>        after its run; status 0 is success
//   rank 0 -> peer   ok | failed <message>          the group's outcome

#include <chrono>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "options.h"

namespace autotune::trialsim {

// A socket, closed with the object; a connected one is read and written a line at a time.
class Socket {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  explicit Socket(int descriptor) : descriptor_(descriptor) {}
  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  // The next line without its newline; an error once `deadline` passes or the peer closes.
  tl::expected<std::string, std::string> readLine(Deadline deadline);
  tl::expected<void, std::string> writeLine(const std::string& line) const;
  int descriptor() const { return descriptor_; }

 private:
  int descriptor_ = -1;
  std::string buffered_;
};

// How one rank's run ended: its exit status and, for a failure, the error it printed.
struct RankOutcome {
  int status = 0;
  std::string message;
};

class Rendezvous {
 public:
  // Returns once every rank of `group` has joined. Resolving, listening and connecting are
  // retried until `timeout`, since a peer's name or its listener may appear only after it starts;
  // then the error is "rendezvous with ADDRESS:PORT timed out after S s (...)".
  static tl::expected<Rendezvous, std::string> join(const NodeGroup& group,
                                                    std::chrono::milliseconds timeout);

  // Hands this rank's outcome over and learns the group's, each wait bounded by the timeout. On
  // rank 0 the error names the first peer that failed, with its message (a peer's out-of-memory
  // error so reaches rank 0's log); on another rank, rank 0's verdict. A rank that failed itself
  // does not wait: its own error is the one to report.
  tl::expected<void, std::string> conclude(const RankOutcome& own);

 private:
  Rendezvous(NodeGroup group, std::chrono::milliseconds timeout)
      : group_(std::move(group)), timeout_(timeout) {}

  tl::expected<void, std::string> collect(const RankOutcome& own);
  tl::expected<void, std::string> report(const RankOutcome& own);

  NodeGroup group_;
  std::chrono::milliseconds timeout_;
  std::vector<std::optional<Socket>> peers_;  // rank 0: by rank, none at its own index
  std::optional<Socket> master_;              // other ranks: the connection to rank 0
};

// "rendezvous with ADDRESS:PORT timed out after S s (why)".
std::string timeoutMessage(const NodeGroup& group, std::chrono::milliseconds timeout,
                           const std::string& why);

}  // namespace autotune::trialsim
