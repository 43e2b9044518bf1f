#pragma once
// A trial as a local process: in its own process group (so a timeout or Ctrl-C stops everything
// it started), with its own environment and output files, and killed if autotune itself dies.

#include <sys/types.h>

#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace autotune::executor {

struct LaunchSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> environment;  // added to this process's own
  std::string workingDirectory;
  std::string stdoutPath;
  std::string stderrPath;
};

struct ExitStatus {
  std::optional<int> exitCode;
  std::optional<int> signal;
};

class ChildProcess {
 public:
  // Starts the process; an error (e.g. the command cannot be executed) says why.
  static tl::expected<ChildProcess, std::string> start(const LaunchSpec& spec);

  // The exit status once the process has ended; never blocks.
  std::optional<ExitStatus> poll() const;
  // Blocks until the process has ended.
  ExitStatus wait() const;
  // Signals the whole process group.
  void signalGroup(int signal) const;

  pid_t pid() const { return pid_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

// The full path of `command` as execvp would find it on `searchPath`, if it is there.
std::optional<std::string> findExecutable(const std::string& command,
                                          const std::string& searchPath);

}  // namespace autotune::executor
