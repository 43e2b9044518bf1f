// autotune-node-sim: GPU Nodes without GPUs, for end-to-end tests and the demo. It registers
// Nodes that advertise nvidia.com/gpu (or publish their GPUs as a DRA driver's ResourceSlices)
// and keeps them Ready, and runs the first container of each
// Pod bound to them as a local process that sees the paths a container would (downward-API files,
// the termination message file), reporting the Pod's status as a kubelet does.

#include <unistd.h>

#include <charconv>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "executor/process.h"
#include "k8s/client.h"
#include "k8s/config.h"
#include "kubelet.h"
#include "log.h"
#include "nodes.h"

namespace autotune::nodesim {

constexpr const char* kUsage =
    R"(usage: autotune-node-sim --nodes N --gpus-per-node G --gpu-memory Q [options]

Registers N GPU Nodes and runs the Pods bound to them as local processes.

  --kubeconfig FILE         the cluster (default: $KUBECONFIG)
  --nodes N                 how many Nodes (default 1)
  --gpus-per-node G         nvidia.com/gpu capacity of each (default 8)
  --gpu-memory Q            memory of one GPU, e.g. 32Gi or 80Gi (default 32Gi); a container
                            with GPUs sees it as AUTOTUNE_SIM_GPU_MEMORY_MIB, which trial-sim
                            takes as its GPU's memory
  --gpu-product P           the GPU model, labelled nvidia.com/gpu.product (default Simulated-GPU)
  --dra-driver D            publish the GPUs as a ResourceSlice of DRA driver D per Node instead
                            of nvidia.com/gpu, for the kube-scheduler to allocate; a container
                            sees the devices its ResourceClaims were allocated as its GPUs
  --name-prefix P           Nodes are P-0 ... P-(N-1) (default gpu-node)
  --cpu Q, --memory Q       CPU and memory capacity of each Node (default 32, 256Gi)
  --work-dir DIR            one folder per Pod: log, termination message, volumes
                            (default: $TMPDIR/autotune-node-sim)
  --bin-dir DIR             first on each process's PATH (default: this program's folder)
  --heartbeat-seconds S     Lease and Ready renewal period (default 10)
  --delete-nodes-on-exit    delete the Nodes on SIGTERM or SIGINT
)";

namespace {

struct Options {
  std::string kubeconfig;
  NodeShape shape;
  std::filesystem::path workDir;
  std::string binDir;
  bool deleteNodesOnExit = false;
};

std::optional<int> positive(const std::string& text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && value > 0
             ? std::optional(value)
             : std::nullopt;
}

std::string ownFolder() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string(".") : self.parent_path().string();
}

// The options, or the message to print and exit 2 with.
tl::expected<Options, std::string> parse(const std::vector<std::string>& arguments) {
  Options options;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read before any thread starts
  if (const char* kubeconfig = std::getenv("KUBECONFIG"); kubeconfig != nullptr) {
    options.kubeconfig = kubeconfig;
  }
  options.workDir = std::filesystem::temp_directory_path() / "autotune-node-sim";
  options.binDir = ownFolder();
  std::string gpuMemory = "32Gi";
  std::map<std::string, std::string*> strings = {
      {"--kubeconfig", &options.kubeconfig},        {"--gpu-memory", &gpuMemory},
      {"--name-prefix", &options.shape.namePrefix}, {"--cpu", &options.shape.cpu},
      {"--memory", &options.shape.memory},          {"--bin-dir", &options.binDir},
      {"--gpu-product", &options.shape.gpuProduct}, {"--dra-driver", &options.shape.draDriver}};
  std::map<std::string, int*> numbers = {{"--nodes", &options.shape.count},
                                         {"--gpus-per-node", &options.shape.gpus},
                                         {"--heartbeat-seconds", &options.shape.heartbeatSeconds}};
  for (std::size_t at = 0; at < arguments.size(); ++at) {
    const std::string& flag = arguments[at];
    if (flag == "--delete-nodes-on-exit") {
      options.deleteNodesOnExit = true;
      continue;
    }
    if (at + 1 >= arguments.size()) {
      return tl::unexpected("unknown option or missing value: " + flag + "\n" + kUsage);
    }
    const std::string& value = arguments[++at];
    if (const auto text = strings.find(flag); text != strings.end()) {
      *text->second = value;
    } else if (const auto number = numbers.find(flag); number != numbers.end()) {
      const auto parsed = positive(value);
      if (!parsed) {
        return tl::unexpected(
            std::string(flag).append(" needs a positive whole number, not ").append(value));
      }
      *number->second = *parsed;
    } else if (flag == "--work-dir") {
      options.workDir = value;
    } else {
      return tl::unexpected("unknown option: " + flag + "\n" + kUsage);
    }
  }
  const auto mib = mebibytes(gpuMemory);
  if (!mib || *mib <= 0) {
    return tl::unexpected("--gpu-memory needs a quantity such as 32Gi, not " + gpuMemory);
  }
  options.shape.gpuMemoryMiB = *mib;
  if (options.kubeconfig.empty()) {
    return tl::unexpected("no cluster: give --kubeconfig or set KUBECONFIG\n" +
                          std::string(kUsage));
  }
  std::error_code error;
  options.workDir = std::filesystem::absolute(options.workDir, error);
  options.binDir = std::filesystem::absolute(options.binDir, error).string();
  return options;
}

// Waits `period` at a time until `stop`, then calls `beat`.
void everyPeriod(const std::stop_token& stop, std::chrono::seconds period, const auto& beat) {
  std::mutex mutex;
  std::condition_variable_any sleeper;
  while (!stop.stop_requested()) {
    {
      std::unique_lock lock(mutex);
      sleeper.wait_for(lock, stop, period, [] { return false; });
    }
    if (stop.stop_requested()) {
      return;
    }
    beat();
  }
}

// Pods get a mount namespace of their own; without the privilege for that, no Pod could run.
bool canUnshare() {
  executor::LaunchSpec check;
  check.argv = {"unshare", "--mount", "--propagation", "private", "true"};
  check.stdoutPath = "/dev/null";
  check.stderrPath = "/dev/null";
  auto started = executor::ChildProcess::start(check);
  return started && started->wait().exitCode == 0;
}

int run(const Options& options) {
  if (!canUnshare()) {
    logLine("`unshare --mount` fails here: running Pods needs root (CAP_SYS_ADMIN) and util-linux");
    return 1;
  }
  auto config = k8s::loadKubeconfig(options.kubeconfig);
  if (!config) {
    logLine("cannot read the kubeconfig: " + k8s::describe(config.error()));
    return 1;
  }
  std::error_code error;
  std::filesystem::create_directories(options.workDir, error);
  if (error) {
    logLine("cannot create " + options.workDir.string() + ": " + error.message());
    return 1;
  }
  // Each thread talks to the API server through a connection of its own.
  const k8s::Client nodeClient(k8s::makeHttpTransport(*config));
  const k8s::Client writer(k8s::makeHttpTransport(*config));
  const k8s::Client watcher(k8s::makeHttpTransport(*config));

  // SIGTERM and SIGINT are taken by sigwait below, never by a handler; threads inherit the mask,
  // and each child clears it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const Nodes nodes(nodeClient, options.shape);
  if (auto registered = nodes.registerAll(); !registered) {
    logLine("registering the nodes failed: " + k8s::describe(registered.error()));
    return 1;
  }
  const auto names = nodeNames(options.shape);
  KubeletOptions kubeletOptions;
  kubeletOptions.nodes = {names.begin(), names.end()};
  kubeletOptions.workDir = options.workDir;
  kubeletOptions.binDir = options.binDir;
  kubeletOptions.gpuMemoryMiB = options.shape.gpuMemoryMiB;
  kubeletOptions.draDriver = options.shape.draDriver;
  Kubelet kubelet(writer, watcher, std::move(kubeletOptions));
  std::jthread heartbeat([&](const std::stop_token& stop) {
    everyPeriod(stop, std::chrono::seconds(options.shape.heartbeatSeconds),
                [&] { nodes.heartbeat(); });
  });
  std::jthread actor([&](const std::stop_token& stop) { kubelet.run(stop); });
  std::jthread watch([&](const std::stop_token& stop) { kubelet.watch(stop); });
  logLine("running " + std::to_string(names.size()) + " node(s); pods in " +
          options.workDir.string() + "; PATH starts with " + options.binDir);

  int received = 0;
  sigwait(&signals, &received);
  logLine(std::string("received ") + (received == SIGINT ? "SIGINT" : "SIGTERM") +
          "; stopping every pod process");
  actor.request_stop();
  actor.join();  // every child is stopped here
  watch.request_stop();
  heartbeat.request_stop();
  watch.join();
  heartbeat.join();
  if (options.deleteNodesOnExit) {
    nodes.removeAll();
  }
  logLine("stopped");
  return 0;
}

}  // namespace
}  // namespace autotune::nodesim

int main(int argc, char** argv) {
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  for (const auto& argument : arguments) {
    if (argument == "--help" || argument == "-h") {
      std::cout << autotune::nodesim::kUsage;
      return 0;
    }
  }
  auto options = autotune::nodesim::parse(arguments);
  if (!options) {
    std::cerr << "autotune-node-sim: " << options.error()
              << (options.error().ends_with('\n') ? "" : "\n");
    return 2;
  }
  return autotune::nodesim::run(*options);
}
