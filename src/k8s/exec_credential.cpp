#include "k8s/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>
#include <vector>

#include "object/time.h"
#include "spawn/exec_vectors.h"

namespace autotune::k8s {
namespace {

using nlohmann::json;

// How much of the plugin's standard error an error quotes: its last words say why it failed.
constexpr std::size_t kQuotedErrorBytes = 1000;

Error pluginError(const ExecPlugin& plugin, const std::string& why) {
  Error error;
  error.kind = ErrorKind::kOther;
  error.message = "exec credential plugin \"" + plugin.command + "\": " + why;
  return error;
}

std::string encodeBase64(std::string_view bytes) {
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string text;
  for (std::size_t at = 0; at < bytes.size(); at += 3) {
    const std::size_t count = std::min<std::size_t>(3, bytes.size() - at);
    std::uint32_t group = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto byte = i < count ? static_cast<unsigned char>(bytes[at + i]) : 0U;
      group = (group << 8U) | byte;
    }
    for (std::size_t i = 0; i < 4; ++i) {
      text += i <= count ? kAlphabet[(group >> (18 - 6 * i)) & 0x3FU] : '=';
    }
  }
  return text;
}

// What the plugin is told in KUBERNETES_EXEC_INFO.
std::string execInfo(const ClusterConfig& config, bool interactive) {
  json spec = {{"interactive", interactive}};
  if (config.exec->provideClusterInfo) {
    spec["cluster"] = {{"server", config.server},
                       {"insecure-skip-tls-verify", config.insecureSkipTlsVerify}};
    if (!config.caData.empty()) {
      spec["cluster"]["certificate-authority-data"] = encodeBase64(config.caData);
    }
  }
  return json{{"apiVersion", config.exec->apiVersion}, {"kind", "ExecCredential"}, {"spec", spec}}
      .dump();
}

// This process's environment with `added` set over it.
struct Finished {
  int status = 0;
  std::string output;
  std::string errors;
  bool timedOut = false;
};

// Reads the child's pipes until both close or `deadline` passes; the child is killed then.
void drain(pid_t child, std::array<int, 2> pipes, std::chrono::steady_clock::time_point deadline,
           Finished& finished) {
  std::array<std::string*, 2> into{&finished.output, &finished.errors};
  std::array<char, 4096> buffer{};
  while (pipes[0] >= 0 || pipes[1] >= 0) {
    std::array<pollfd, 2> watched{pollfd{pipes[0], POLLIN, 0}, pollfd{pipes[1], POLLIN, 0}};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      finished.timedOut = true;
      kill(child, SIGKILL);
      break;
    }
    const auto wait = std::min<std::chrono::milliseconds>(left, std::chrono::minutes(1));
    if (poll(watched.data(), watched.size(), static_cast<int>(wait.count())) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    for (std::size_t i = 0; i < pipes.size(); ++i) {
      if (pipes.at(i) < 0 || watched.at(i).revents == 0) {
        continue;
      }
      const ssize_t read = ::read(pipes.at(i), buffer.data(), buffer.size());
      if (read > 0) {
        into.at(i)->append(buffer.data(), static_cast<std::size_t>(read));
      } else if (read == 0 || errno != EINTR) {
        close(pipes.at(i));
        pipes.at(i) = -1;
      }
    }
  }
  for (const int open : pipes) {
    if (open >= 0) {
      close(open);
    }
  }
  while (waitpid(child, &finished.status, 0) < 0 && errno == EINTR) {
  }
}

// Runs the plugin: standard output always read; standard input and error the terminal's when
// interactive, else /dev/null and read.
tl::expected<Finished, std::string> run(const ExecPlugin& plugin, const std::string& info,
                                        bool interactive, std::chrono::seconds timeout) {
  std::array<int, 2> output{-1, -1};
  std::array<int, 2> errors{-1, -1};
  if (pipe2(output.data(), O_CLOEXEC) != 0 ||
      (!interactive && pipe2(errors.data(), O_CLOEXEC) != 0)) {
    return tl::unexpected("cannot create a pipe: " + std::generic_category().message(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, output[1], STDOUT_FILENO);
  if (!interactive) {
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, errors[1], STDERR_FILENO);
  }
  std::vector<std::string> arguments{plugin.command};
  arguments.insert(arguments.end(), plugin.args.begin(), plugin.args.end());
  auto added = plugin.env;
  added.emplace_back("KUBERNETES_EXEC_INFO", info);
  std::vector<std::string> environment = spawn::environmentWith(added);
  std::vector<char*> argv = spawn::execVector(arguments);
  std::vector<char*> envp = spawn::execVector(environment);
  pid_t child = 0;
  const int spawned =
      posix_spawnp(&child, plugin.command.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(output[1]);
  if (errors[1] >= 0) {
    close(errors[1]);
  }
  if (spawned != 0) {
    close(output[0]);
    if (errors[0] >= 0) {
      close(errors[0]);
    }
    std::string why = spawned == ENOENT ? "not found" : std::generic_category().message(spawned);
    if (!plugin.installHint.empty()) {
      why += "\n\n" + plugin.installHint;
    }
    return tl::unexpected(why);
  }
  // A person at the terminal (a browser sign-in, a one-time code) takes the time it takes.
  const auto deadline = interactive ? std::chrono::steady_clock::time_point::max()
                                    : std::chrono::steady_clock::now() + timeout;
  Finished finished;
  drain(child, {output[0], errors[0]}, deadline, finished);
  return finished;
}

std::string lastWords(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0) {
    text.remove_suffix(1);
  }
  if (text.size() > kQuotedErrorBytes) {
    text.remove_prefix(text.size() - kQuotedErrorBytes);
  }
  return std::string(text);
}

// Why the plugin failed, from how it ended; empty when it exited 0.
std::string howItFailed(const Finished& finished, std::chrono::seconds timeout) {
  std::string why;
  if (finished.timedOut) {
    why = "did not finish within " + std::to_string(timeout.count()) + "s and was stopped";
  } else if (WIFSIGNALED(finished.status)) {
    why = "was killed by signal " + std::to_string(WTERMSIG(finished.status));
  } else if (WIFEXITED(finished.status) && WEXITSTATUS(finished.status) != 0) {
    why = "exited with status " + std::to_string(WEXITSTATUS(finished.status));
  } else {
    return "";
  }
  if (const std::string said = lastWords(finished.errors); !said.empty()) {
    why += ": " + said;
  }
  return why;
}

tl::expected<ExecCredential, std::string> credentialOf(const ExecPlugin& plugin,
                                                       const std::string& printed) {
  const json answer = json::parse(printed, nullptr, false);
  if (!answer.is_object()) {
    return tl::unexpected(
        std::string("printed no ExecCredential (its output is not a JSON object)"));
  }
  if (answer.value("kind", "") != "ExecCredential") {
    return tl::unexpected("printed kind \"" + answer.value("kind", "") + "\", not ExecCredential");
  }
  if (answer.value("apiVersion", "") != plugin.apiVersion) {
    return tl::unexpected("printed apiVersion \"" + answer.value("apiVersion", "") +
                          "\" where the kubeconfig asks for " + plugin.apiVersion);
  }
  const json status = answer.value("status", json::object());
  if (!status.is_object()) {
    return tl::unexpected(std::string("printed an ExecCredential whose status is not an object"));
  }
  ExecCredential credential;
  credential.token = status.value("token", "");
  credential.clientCertData = status.value("clientCertificateData", "");
  credential.clientKeyData = status.value("clientKeyData", "");
  if (credential.clientCertData.empty() != credential.clientKeyData.empty()) {
    return tl::unexpected(std::string(
        "printed clientCertificateData without clientKeyData, or the reverse: both are needed"));
  }
  if (credential.token.empty() && credential.clientCertData.empty()) {
    return tl::unexpected(
        std::string("printed an ExecCredential with neither status.token nor "
                    "status.clientCertificateData"));
  }
  if (const std::string expiry = status.value("expirationTimestamp", ""); !expiry.empty()) {
    credential.expiresAt = object::parseTime(expiry);
    if (!credential.expiresAt) {
      return tl::unexpected("printed an expirationTimestamp that is not an RFC 3339 time: \"" +
                            expiry + "\"");
    }
  }
  return credential;
}

}  // namespace

Result<ExecCredential> fetchExecCredential(const ClusterConfig& config,
                                           std::chrono::seconds timeout) {
  const ExecPlugin& plugin = *config.exec;
  const bool terminal = isatty(STDIN_FILENO) != 0;
  if (plugin.interactiveMode == ExecPlugin::Interactive::kAlways && !terminal) {
    return tl::unexpected(
        pluginError(plugin, "its interactiveMode is Always, and standard input is not a terminal"));
  }
  const bool interactive = terminal && plugin.interactiveMode != ExecPlugin::Interactive::kNever;
  auto finished = run(plugin, execInfo(config, interactive), interactive, timeout);
  if (!finished) {
    return tl::unexpected(pluginError(plugin, finished.error()));
  }
  if (const std::string why = howItFailed(*finished, timeout); !why.empty()) {
    return tl::unexpected(pluginError(plugin, why));
  }
  auto credential = credentialOf(plugin, finished->output);
  if (!credential) {
    return tl::unexpected(pluginError(plugin, credential.error()));
  }
  return std::move(*credential);
}

}  // namespace autotune::k8s
