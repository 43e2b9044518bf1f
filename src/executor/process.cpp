#include "executor/process.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "spawn/exec_vectors.h"

namespace autotune::executor {
namespace {

// What the child was doing when it failed, reported to the parent with errno.
enum class ChildStep : int { kOutput, kWorkingDirectory, kExec };

struct ChildFailure {
  ChildStep step;
  int error;
};

// Handlers go back to their defaults before the child unblocks signals: until it execs, the child
// shares this process's memory (vfork), where a handler must not run.
void resetSignalHandlers() {
  for (int signal = 1; signal < NSIG; ++signal) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) == 0 && current.sa_handler != SIG_DFL &&
        current.sa_handler != SIG_IGN) {
      struct sigaction reset {};
      reset.sa_handler = SIG_DFL;
      sigaction(signal, &reset, nullptr);
    }
  }
}

// In the child, between vfork and exec: only async-signal-safe calls, and nothing written to the
// memory it shares with its parent but its own stack. Reports what failed through the
// close-on-exec pipe, so the parent can say why.
[[noreturn]] void becomeTrial(const LaunchSpec& spec, pid_t parent, int errorPipe, char** argv,
                              char** envp) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) {
    _exit(127);  // autotune died before the child could ask to follow it
  }
  resetSignalHandlers();
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // NOLINT(concurrency-mt-unsafe): the child's own mask
  ChildFailure failure{ChildStep::kOutput, 0};
  const int out = open(spec.stdoutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = open(spec.stderrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int input = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (out >= 0 && err >= 0 && input >= 0 && dup2(input, STDIN_FILENO) >= 0 &&
      dup2(out, STDOUT_FILENO) >= 0 && dup2(err, STDERR_FILENO) >= 0) {
    failure.step = ChildStep::kWorkingDirectory;
    if (spec.workingDirectory.empty() || chdir(spec.workingDirectory.c_str()) == 0) {
      failure.step = ChildStep::kExec;
      execve(argv[0], argv, envp);
    }
  }
  failure.error = errno;
  [[maybe_unused]] const auto written = write(errorPipe, &failure, sizeof(failure));
  _exit(127);
}

std::string errorText(int error) { return std::generic_category().message(error); }

ExitStatus statusOf(int status) {
  if (WIFSIGNALED(status)) {
    return {std::nullopt, WTERMSIG(status)};
  }
  return {WEXITSTATUS(status), std::nullopt};
}

// What the child's report through the error pipe says went wrong, in the parent's words.
std::string failureText(const LaunchSpec& spec, const ChildFailure& failure) {
  const std::string cause = errorText(failure.error);
  switch (failure.step) {
    case ChildStep::kOutput:
      return "cannot open " + spec.stdoutPath + " or " + spec.stderrPath + ": " + cause;
    case ChildStep::kWorkingDirectory:
      return "cannot enter " + spec.workingDirectory + ": " + cause;
    case ChildStep::kExec:
      break;
  }
  return "cannot run " + spec.argv.front() + ": " + cause;
}

// The command's executable, looked up on the trial's own PATH, not on this process's.
std::optional<std::string> executableOf(const std::string& command,
                                        const std::vector<std::string>& environment) {
  const auto path =
      std::find_if(environment.begin(), environment.end(),
                   [](const std::string& entry) { return entry.starts_with("PATH="); });
  return findExecutable(command, path == environment.end() ? "/usr/bin:/bin" : path->substr(5));
}

}  // namespace

tl::expected<ChildProcess, std::string> ChildProcess::start(const LaunchSpec& spec) {
  if (spec.argv.empty()) {
    return tl::unexpected(std::string("the command is empty"));
  }
  std::vector<std::string> arguments = spec.argv;
  std::vector<std::string> environment = spawn::environmentWith(spec.environment);
  const auto executable = executableOf(arguments.front(), environment);
  if (!executable) {
    return tl::unexpected("cannot run " + arguments.front() + ": not found on PATH");
  }
  arguments.front() = *executable;
  std::vector<char*> argv = spawn::execVector(arguments);
  std::vector<char*> envp = spawn::execVector(environment);
  std::array<int, 2> errorPipe{};
  if (pipe2(errorPipe.data(), O_CLOEXEC) != 0) {
    return tl::unexpected("cannot create a pipe: " + errorText(errno));
  }
  const pid_t parent = getpid();
  // vfork, not fork: fork copies the page tables of this whole process, which costs a large
  // process (a node simulator holding thousands of Pods) more than the trial's start itself.
  // Signals stay blocked here until the child has exec'd or failed.
  sigset_t all;
  sigset_t previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  // posix_spawn, the usual way around fork's cost, cannot ask for PR_SET_PDEATHSIG.
  const pid_t pid =
      vfork();  // NOLINT(bugprone-unsafe-functions,clang-analyzer-security.insecureAPI.vfork)
  if (pid == 0) {
    // NOLINTNEXTLINE(clang-analyzer-unix.Vfork): it makes only async-signal-safe system calls
    becomeTrial(spec, parent, errorPipe[1], argv.data(), envp.data());
  }
  const int forkError = errno;
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (pid < 0) {
    close(errorPipe[0]);
    close(errorPipe[1]);
    return tl::unexpected("cannot start a process: " + errorText(forkError));
  }
  setpgid(pid, pid);  // also here, so the group exists before anyone signals it
  close(errorPipe[1]);
  ChildFailure failure{};
  const auto got = read(errorPipe[0], &failure, sizeof(failure));
  close(errorPipe[0]);
  if (got == sizeof(failure)) {
    int status = 0;
    waitpid(pid, &status, 0);
    return tl::unexpected(failureText(spec, failure));
  }
  return ChildProcess(pid);
}

std::optional<ExitStatus> ChildProcess::poll() const {
  int status = 0;
  const pid_t done = waitpid(pid_, &status, WNOHANG);
  if (done != pid_) {
    return std::nullopt;
  }
  return statusOf(status);
}

ExitStatus ChildProcess::wait() const {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  return statusOf(status);
}

void ChildProcess::signalGroup(int signal) const { kill(-pid_, signal); }

std::optional<std::string> findExecutable(const std::string& command,
                                          const std::string& searchPath) {
  const auto executable = [](const std::filesystem::path& path) {
    return access(path.c_str(), X_OK) == 0 && !std::filesystem::is_directory(path);
  };
  if (command.find('/') != std::string::npos) {
    return executable(command) ? std::optional(command) : std::nullopt;
  }
  std::size_t start = 0;
  while (start <= searchPath.size()) {
    const auto colon = searchPath.find(':', start);
    const std::string directory = searchPath.substr(start, colon - start);
    const std::filesystem::path candidate =
        std::filesystem::path(directory.empty() ? "." : directory) / command;
    if (executable(candidate)) {
      return candidate.string();
    }
    if (colon == std::string::npos) {
      break;
    }
    start = colon + 1;
  }
  return std::nullopt;
}

}  // namespace autotune::executor
