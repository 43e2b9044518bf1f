#include "executor/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/text.h"

namespace {

namespace fs = std::filesystem;

using autotune::executor::ChildProcess;
using autotune::executor::ExitStatus;
using autotune::executor::findExecutable;
using autotune::executor::LaunchSpec;
using autotune::testing::readFile;

// A fresh directory per test for the child's output files, removed afterwards.
class ChildProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 ("autotune-process-test-" + std::to_string(::getpid()) + "-" + test->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }

  LaunchSpec shell(const std::string& script, std::vector<std::string> arguments = {}) const {
    LaunchSpec spec;
    spec.argv = {"/bin/sh", "-c", script, "sh"};
    spec.argv.insert(spec.argv.end(), arguments.begin(), arguments.end());
    spec.stdoutPath = stdoutPath();
    spec.stderrPath = stderrPath();
    return spec;
  }

  static ChildProcess started(const LaunchSpec& spec) {
    auto child = ChildProcess::start(spec);
    if (!child) {
      throw std::runtime_error("start failed: " + child.error());
    }
    return std::move(*child);
  }

  std::string stdoutPath() const { return (directory_ / "stdout.log").string(); }
  std::string stderrPath() const { return (directory_ / "stderr.log").string(); }

  fs::path directory_;
};

// --- exit status --------------------------------------------------------------------------------

TEST_F(ChildProcessTest, WaitReportsTheExitCode) {
  ChildProcess child = started(shell("exit 3"));
  const ExitStatus status = child.wait();
  EXPECT_EQ(status.exitCode, 3);
  EXPECT_EQ(status.signal, std::nullopt);
}

TEST_F(ChildProcessTest, PollReportsTheExitCodeOnceTheProcessHasEnded) {
  ChildProcess child = started(shell("exit 3"));
  // Block until the child has ended without collecting it, so that poll() is the one to see it.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT), 0)
      << std::strerror(errno);
  const auto status = child.poll();
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->exitCode, 3);
  EXPECT_EQ(status->signal, std::nullopt);
}

TEST_F(ChildProcessTest, PollSaysNothingWhileTheProcessRuns) {
  LaunchSpec spec = shell("");
  spec.argv = {"sleep", "30"};
  ChildProcess child = started(spec);
  EXPECT_FALSE(child.poll().has_value());
  child.signalGroup(SIGKILL);
  const ExitStatus status = child.wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.exitCode, std::nullopt);
}

// --- what the child gets ------------------------------------------------------------------------

TEST_F(ChildProcessTest, OutputAndErrorsGoToTheGivenFiles) {
  std::ofstream(stdoutPath()) << "what an earlier attempt wrote, much longer than the new output\n";
  ChildProcess child = started(shell("echo 'step 5 done'; echo 'UserWarning: slow' >&2"));
  ASSERT_EQ(child.wait().exitCode, 0);
  EXPECT_EQ(readFile(stdoutPath()), "step 5 done\n");
  EXPECT_EQ(readFile(stderrPath()), "UserWarning: slow\n");
}

TEST_F(ChildProcessTest, ExtraEnvironmentVariablesReachTheChildBesidesItsOwn) {
  ASSERT_EQ(::setenv("AUTOTUNE_TEST_INHERITED", "inherited", 1), 0);
  ASSERT_EQ(::setenv("AUTOTUNE_TEST_REPLACED", "old", 1), 0);
  LaunchSpec spec = shell(
      R"(echo "$AUTOTUNE_TRIAL|$AUTOTUNE_DS_CONFIG|$AUTOTUNE_TEST_INHERITED|$AUTOTUNE_TEST_REPLACED")");
  spec.environment = {{"AUTOTUNE_TRIAL", "z1_gas1_tmbspg3"},
                      {"AUTOTUNE_DS_CONFIG", "/runs/z1_gas1_tmbspg3/ds_config.json"},
                      {"AUTOTUNE_TEST_REPLACED", "new"}};
  ChildProcess child = started(spec);
  ASSERT_EQ(child.wait().exitCode, 0);
  ::unsetenv("AUTOTUNE_TEST_INHERITED");
  ::unsetenv("AUTOTUNE_TEST_REPLACED");
  EXPECT_EQ(readFile(stdoutPath()),
            "z1_gas1_tmbspg3|/runs/z1_gas1_tmbspg3/ds_config.json|inherited|new\n");
}

TEST_F(ChildProcessTest, TheChildRunsInTheGivenWorkingDirectory) {
  LaunchSpec spec = shell("pwd -P");
  spec.workingDirectory = directory_.string();
  ChildProcess child = started(spec);
  ASSERT_EQ(child.wait().exitCode, 0);
  EXPECT_EQ(readFile(stdoutPath()), fs::canonical(directory_).string() + "\n");
}

TEST_F(ChildProcessTest, TheChildRunsInItsOwnProcessGroup) {
  ChildProcess child = started(shell("cut -d' ' -f5 /proc/$$/stat"));
  ASSERT_EQ(child.wait().exitCode, 0);
  EXPECT_EQ(std::stoi(readFile(stdoutPath())), child.pid());
}

// The mask of the thread that starts it is not the trial's: a blocked SIGTERM would make the trial
// deaf to being stopped.
TEST_F(ChildProcessTest, TheChildStartsWithNoSignalBlockedAndTheParentsMaskIsKept) {
  sigset_t blocked;
  sigset_t before;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  LaunchSpec spec = shell("");
  spec.argv = {"grep", "^SigBlk:", "/proc/self/status"};
  ChildProcess child = started(spec);
  sigset_t after;
  pthread_sigmask(SIG_SETMASK, &before, &after);
  ASSERT_EQ(child.wait().exitCode, 0);
  EXPECT_EQ(readFile(stdoutPath()), "SigBlk:\t0000000000000000\n");
  EXPECT_EQ(sigismember(&after, SIGTERM), 1);
  EXPECT_EQ(sigismember(&after, SIGUSR1), sigismember(&before, SIGUSR1));
}

// --- failing to start ---------------------------------------------------------------------------

TEST_F(ChildProcessTest, AMissingCommandFailsAtStartAndSaysWhy) {
  LaunchSpec spec = shell("");
  spec.argv = {"no-such-command-for-autotune", "--deepspeed"};
  const auto child = ChildProcess::start(spec);
  ASSERT_FALSE(child.has_value());
  EXPECT_EQ(child.error(), "cannot run no-such-command-for-autotune: not found on PATH");
}

// The command is looked up on the PATH the trial gets, which may differ from autotune's own.
TEST_F(ChildProcessTest, TheCommandIsFoundOnTheTrialsOwnPath) {
  const fs::path tools = directory_ / "tools";
  fs::create_directories(tools);
  std::ofstream(tools / "only-here") << "#!/bin/sh\necho found\n";
  fs::permissions(tools / "only-here", fs::perms::owner_all);
  LaunchSpec spec = shell("");
  spec.argv = {"only-here"};
  spec.environment = {{"PATH", tools.string() + ":/usr/bin:/bin"}};
  auto child = ChildProcess::start(spec);
  ASSERT_TRUE(child.has_value()) << child.error();
  EXPECT_EQ(child->wait().exitCode, 0);
  EXPECT_EQ(readFile(stdoutPath()), "found\n");
}

TEST_F(ChildProcessTest, AnEmptyCommandFailsAtStart) {
  LaunchSpec spec = shell("");
  spec.argv.clear();
  const auto child = ChildProcess::start(spec);
  ASSERT_FALSE(child.has_value());
  EXPECT_FALSE(child.error().empty());
}

TEST_F(ChildProcessTest, AnOutputFileThatCannotBeOpenedFailsAtStartAndSaysWhich) {
  LaunchSpec spec = shell("exit 0");
  spec.stdoutPath = (directory_ / "missing" / "stdout.log").string();
  const auto child = ChildProcess::start(spec);
  ASSERT_FALSE(child.has_value());
  EXPECT_EQ(child.error(), "cannot open " + spec.stdoutPath + " or " + spec.stderrPath +
                               ": No such file or directory");
}

TEST_F(ChildProcessTest, AMissingWorkingDirectoryFailsAtStart) {
  LaunchSpec spec = shell("exit 0");
  spec.workingDirectory = (directory_ / "missing").string();
  const auto child = ChildProcess::start(spec);
  ASSERT_FALSE(child.has_value());
  EXPECT_NE(child.error().find("No such file or directory"), std::string::npos) << child.error();
}

// --- stopping -----------------------------------------------------------------------------------

TEST_F(ChildProcessTest, SignallingTheGroupKillsEverythingTheTrialStarted) {
  // Orphans of the trial become our children, so that we can see how the background one ended.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const fs::path ready = directory_ / "ready";
  ASSERT_EQ(mkfifo(ready.c_str(), 0600), 0) << std::strerror(errno);
  ChildProcess child =
      started(shell(R"(sleep 30 & echo $!; echo ready > "$1"; sleep 30; wait)", {ready.string()}));

  // The shell opens the FIFO only after printing the background pid.
  std::string line;
  std::getline(std::ifstream(ready), line);
  ASSERT_EQ(line, "ready");
  const pid_t background = std::stoi(readFile(stdoutPath()));
  ASSERT_NE(background, child.pid());
  ASSERT_EQ(kill(background, 0), 0) << "the background sleep should be running";

  child.signalGroup(SIGKILL);
  const ExitStatus status = child.wait();
  EXPECT_EQ(status.signal, SIGKILL);
  EXPECT_EQ(status.exitCode, std::nullopt);

  // Reaped here once it is our orphan, or already gone when the kernel reaped it on its way (as
  // it can when it died while its shell was exiting, under load): either way long before its 30
  // seconds, so the signal ended it.
  int backgroundStatus = 0;
  pid_t reaped = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while ((reaped = waitpid(background, &backgroundStatus, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  if (reaped == background) {
    ASSERT_TRUE(WIFSIGNALED(backgroundStatus)) << "the background sleep ended by itself";
    EXPECT_EQ(WTERMSIG(backgroundStatus), SIGKILL);
  } else {
    ASSERT_EQ(reaped, -1) << "the background sleep is still running";
    EXPECT_EQ(errno, ECHILD) << std::strerror(errno);
  }
  EXPECT_EQ(kill(background, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

// --- findExecutable -----------------------------------------------------------------------------

TEST(FindExecutable, FindsACommandOnTheSearchPath) {
  const auto found = findExecutable("sh", "/usr/bin:/bin");
  ASSERT_TRUE(found.has_value());
  const std::string expected = access("/usr/bin/sh", X_OK) == 0 ? "/usr/bin/sh" : "/bin/sh";
  EXPECT_EQ(*found, expected);
}

TEST(FindExecutable, DoesNotFindACommandThatIsNowhere) {
  EXPECT_EQ(findExecutable("no-such-tool", "/usr/bin:/bin"), std::nullopt);
  EXPECT_EQ(findExecutable("sh", ""), std::nullopt);
}

TEST(FindExecutable, TakesAPathWithASlashAsItIs) {
  EXPECT_EQ(findExecutable("/bin/sh", ""), "/bin/sh");
  EXPECT_EQ(findExecutable("/bin/sh", "/nowhere"), "/bin/sh");
  EXPECT_EQ(findExecutable("/no/such/dir/sh", "/usr/bin:/bin"), std::nullopt);
}

TEST(FindExecutable, SkipsDirectoriesAndFilesThatCannotBeExecuted) {
  const fs::path base =
      fs::temp_directory_path() / ("autotune-find-executable-test-" + std::to_string(::getpid()));
  fs::remove_all(base);
  fs::create_directories(base / "plain");
  fs::create_directories(base / "dir" / "tool");
  fs::create_directories(base / "bin");
  std::ofstream(base / "plain" / "tool") << "#!/bin/sh\n";
  std::ofstream(base / "bin" / "tool") << "#!/bin/sh\n";
  fs::permissions(base / "plain" / "tool", fs::perms::owner_read | fs::perms::owner_write);
  fs::permissions(base / "bin" / "tool", fs::perms::owner_all);

  const auto found =
      findExecutable("tool", (base / "plain").string() + ":" + (base / "dir").string() + ":" +
                                 (base / "bin").string());
  fs::remove_all(base);
  EXPECT_EQ(found, (base / "bin" / "tool").string());
}

}  // namespace
