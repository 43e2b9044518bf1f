// autotune-node-sim against a real kube-apiserver: the Nodes it registers and keeps alive, and the
// Pods it runs. Pods are bound by setting spec.nodeName, as the scheduler would, so the API server
// alone is enough. Every wait polls a condition against a deadline.

#include <gtest/gtest.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "executor/process.h"
#include "k8s/client.h"
#include "k8s/resources.h"
#include "support/control_plane.h"
#include "support/lines.h"

namespace autotune::nodesim {
namespace {

using k8s::kLeases;
using k8s::kNodes;
using k8s::kPods;
using nlohmann::json;
using testing::linesOf;
using namespace std::chrono_literals;

[[maybe_unused]] const auto* const kControlPlane =
    ::testing::AddGlobalTestEnvironment(new testing::ControlPlane);

// Polls `condition` every 100 ms until it holds or `timeout` has passed.
template <typename Condition>
bool eventually(Condition condition, std::chrono::seconds timeout = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) {
      return true;
    }
    std::this_thread::sleep_for(100ms);
  }
  return condition();
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

bool processExists(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

// The PID a Pod's shell wrote to `path` once the line is complete. The Pod says `echo $$$$`:
// Kubernetes turns $$ in a command into $, and the simulator does too.
std::optional<pid_t> writtenPid(const std::filesystem::path& path) {
  const std::string text = readFile(path);
  pid_t pid = 0;
  if (!text.ends_with('\n') ||
      std::from_chars(text.data(), text.data() + text.size(), pid).ec != std::errc()) {
    return std::nullopt;
  }
  return pid;
}

// An autotune-node-sim process, its log in its folder.
class Simulator {
 public:
  Simulator(std::filesystem::path folder, const std::vector<std::string>& flags)
      : folder_(std::move(folder)) {
    executor::LaunchSpec spec;
    spec.argv = {NODE_SIM_BINARY, "--kubeconfig", testing::ControlPlane::kubeconfigPath(),
                 "--work-dir", (folder_ / "pods").string()};
    spec.argv.insert(spec.argv.end(), flags.begin(), flags.end());
    spec.stdoutPath = (folder_ / "node-sim.out").string();
    spec.stderrPath = (folder_ / "node-sim.log").string();
    auto started = executor::ChildProcess::start(spec);
    if (started) {
      process_ = *started;
    } else {
      startError_ = started.error();
    }
  }

  bool running() const { return process_ && !exited_ && !process_->poll(); }
  const std::string& startError() const { return startError_; }

  // SIGTERM, then its exit code (nullopt if a signal ended it).
  std::optional<int> stop() {
    if (!process_ || exited_) {
      return std::nullopt;
    }
    process_->signalGroup(SIGTERM);
    exited_ = true;
    return process_->wait().exitCode;
  }

  std::string log() const {
    const std::string text = readFile(folder_ / "node-sim.log");
    return "\n--- node-sim log (end) ---\n" +
           text.substr(text.size() > 4000 ? text.size() - 4000 : 0);
  }

 private:
  std::filesystem::path folder_;
  std::optional<executor::ChildProcess> process_;
  bool exited_ = false;
  std::string startError_;
};

// A temporary folder for one simulator and the files its tests share with their Pods.
std::filesystem::path scratchFolder(const std::string& name) {
  auto folder = std::filesystem::temp_directory_path() /
                ("autotune-node-sim-test-" + std::to_string(getpid())) / name;
  std::filesystem::create_directories(folder);
  return folder;
}

json pod(const std::string& name, const std::string& node, const std::string& script) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"nodeName", node},
            {"restartPolicy", "Never"},
            {"containers", json::array({{{"name", "trial"},
                                         {"image", "ghcr.io/autotune-operator/trial-sim:0.1.0"},
                                         {"command", json::array({"sh", "-c", script})}}})}}}};
}

// The trial protocol's config delivery: the annotation as /etc/autotune/ds_config.json.
json withConfig(json object, const std::string& config) {
  object["metadata"]["annotations"]["autotune.io/ds-config"] = config;
  object["spec"]["volumes"] = json::array(
      {{{"name", "autotune-config"},
        {"downwardAPI",
         {{"items", json::array({{{"path", "ds_config.json"},
                                  {"fieldRef",
                                   {{"fieldPath",
                                     "metadata.annotations['autotune.io/ds-config']"}}}}})}}}}});
  object["spec"]["containers"][0]["volumeMounts"] = json::array(
      {{{"name", "autotune-config"}, {"mountPath", "/etc/autotune"}, {"readOnly", true}}});
  return object;
}

constexpr const char* kIndexKey = "batch.kubernetes.io/job-completion-index";

// A multi-node trial's Indexed Job, its Pods' subdomain the Job's name. Only the API server runs:
// there is no Job controller, so the tests make the Pods as it would (indexedPod).
json indexedJob(const std::string& name, int completions) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", completions},
            {"parallelism", completions},
            {"template",
             {{"spec",
               {{"subdomain", name},
                {"restartPolicy", "Never"},
                {"containers",
                 json::array({{{"name", "trial"},
                               {"image", "ghcr.io/autotune-operator/trial-sim:0.1.0"}}})}}}}}}}};
}

// Pod `index` of `job` (as created) on `node`, as the Job controller makes it from `base`.
json indexedPod(json base, const json& job, int index, const std::string& node) {
  const std::string name = job["metadata"]["name"];
  const std::string rank = std::to_string(index);
  base["metadata"]["name"] = name + "-" + rank + "-x7k2p";
  base["metadata"]["labels"] = {
      {"batch.kubernetes.io/job-name", name}, {"job-name", name}, {kIndexKey, rank}};
  base["metadata"]["annotations"][kIndexKey] = rank;
  base["metadata"]["ownerReferences"] = json::array({{{"apiVersion", "batch/v1"},
                                                      {"kind", "Job"},
                                                      {"name", name},
                                                      {"uid", job["metadata"]["uid"]},
                                                      {"controller", true}}});
  base["spec"]["nodeName"] = node;
  base["spec"]["hostname"] = name + "-" + rank;
  base["spec"]["subdomain"] = name;
  // The Job controller's own variable, here through the label as newer versions have it.
  base["spec"]["containers"][0]["env"].push_back(
      {{"name", "JOB_COMPLETION_INDEX"},
       {"valueFrom",
        {{"fieldRef", {{"fieldPath", "metadata.labels['" + std::string(kIndexKey) + "']"}}}}}});
  return base;
}

class NodeSim : public testing::ApiServerTest {
 protected:
  static void SetUpTestSuite() {
    folder() = scratchFolder("suite");
    // A program only on the simulator's --bin-dir, as trial-sim is in build/bin.
    std::filesystem::create_directories(folder() / "bin");
    std::ofstream tool(folder() / "bin" / "autotune-hello");
    tool << "#!/bin/sh\necho \"hello from $HOSTNAME\" > /dev/termination-log\n";
    tool.close();
    std::filesystem::permissions(folder() / "bin" / "autotune-hello",
                                 std::filesystem::perms::owner_all);
    prefix() = "sim" + std::to_string(getpid() % 100000);
    simulator() = std::make_unique<Simulator>(
        folder(), std::vector<std::string>{"--nodes", "2", "--gpus-per-node", "4", "--gpu-memory",
                                           "32Gi", "--name-prefix", prefix(), "--bin-dir",
                                           (folder() / "bin").string(), "--heartbeat-seconds", "1",
                                           "--delete-nodes-on-exit"});
  }

  static void TearDownTestSuite() {
    if (simulator()) {
      const auto code = simulator()->stop();
      if (code != 0) {
        ADD_FAILURE() << "the simulator did not exit 0 on SIGTERM" << simulator()->log();
      }
      simulator().reset();
    }
    std::filesystem::remove_all(folder().parent_path());
  }

  void SetUp() override {
    ApiServerTest::SetUp();
    ASSERT_TRUE(simulator()->startError().empty()) << simulator()->startError();
    // Registered once its first Node exists (it registers all before it watches).
    ASSERT_TRUE(eventually([&] { return client().get(kNodes, "", node(1)).has_value(); }))
        << simulator()->log();
  }

  static std::filesystem::path& folder() {
    static std::filesystem::path path;
    return path;
  }
  static std::string& prefix() {
    static std::string name;
    return name;
  }
  static std::unique_ptr<Simulator>& simulator() {
    static std::unique_ptr<Simulator> running;
    return running;
  }
  static std::string node(int index) { return prefix() + "-" + std::to_string(index); }

  // The Pod once its phase is `phase`, or null after the deadline.
  json waitForPhase(const std::string& name, const std::string& phase) const {
    json seen;
    const bool reached = eventually([&] {
      auto current = client().get(kPods, ns(), name);
      if (current) {
        seen = *current;
      }
      return current && (*current)["status"].value("phase", "") == phase;
    });
    EXPECT_TRUE(reached) << name << " did not reach " << phase
                         << "; last seen: " << seen.dump().substr(0, 2000) << simulator()->log();
    return reached ? seen : json();
  }

  static json terminated(const json& pod) {
    return pod["status"]["containerStatuses"][0]["state"]["terminated"];
  }
};

TEST_F(NodeSim, RegistersReadyGpuNodesAndRenewsTheirHeartbeat) {
  for (int index = 0; index < 2; ++index) {
    auto registered = client().get(kNodes, "", node(index));
    ASSERT_TRUE(registered) << k8s::describe(registered.error());
    const json& status = (*registered)["status"];
    EXPECT_EQ(status["capacity"]["nvidia.com/gpu"], "4");
    EXPECT_EQ(status["allocatable"]["nvidia.com/gpu"], "4");
    EXPECT_EQ(status["allocatable"]["pods"], "110");
    EXPECT_EQ((*registered)["metadata"]["labels"]["nvidia.com/gpu.memory"], "32768");
    EXPECT_EQ((*registered)["metadata"]["labels"]["nvidia.com/gpu.product"], "Simulated-GPU");
    EXPECT_EQ((*registered)["metadata"]["labels"]["kubernetes.io/hostname"], node(index));
    const auto ready = std::find_if(status["conditions"].begin(), status["conditions"].end(),
                                    [](const json& c) { return c["type"] == "Ready"; });
    ASSERT_NE(ready, status["conditions"].end());
    EXPECT_EQ((*ready)["status"], "True");
  }
  // The heartbeat: the Lease's renewTime and the Ready condition's lastHeartbeatTime both move.
  const auto lease = client().get(kLeases, "kube-node-lease", node(0));
  ASSERT_TRUE(lease) << k8s::describe(lease.error());
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], node(0));
  const auto heartbeat = [&] {
    auto current = client().get(kNodes, "", node(0));
    for (const auto& condition : (*current)["status"]["conditions"]) {
      if (condition["type"] == "Ready") {
        return condition["lastHeartbeatTime"].get<std::string>();
      }
    }
    return std::string();
  };
  const std::string firstBeat = heartbeat();
  EXPECT_TRUE(eventually([&] {
    auto renewed = client().get(kLeases, "kube-node-lease", node(0));
    return renewed && (*renewed)["spec"]["renewTime"] != (*lease)["spec"]["renewTime"];
  })) << simulator()->log();
  EXPECT_TRUE(eventually([&] { return heartbeat() != firstBeat; })) << simulator()->log();
}

TEST_F(NodeSim, ADownwardApiConfigBecomesTheTerminationMessage) {
  const std::string config =
      R"({"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2}})";
  ASSERT_TRUE(client().create(
      kPods, ns(),
      withConfig(pod("trial-1", node(0), "cat /etc/autotune/ds_config.json > /dev/termination-log"),
                 config)));
  const json done = waitForPhase("trial-1", "Succeeded");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(terminated(done)["exitCode"], 0);
  EXPECT_EQ(terminated(done)["reason"], "Completed");
  EXPECT_EQ(terminated(done)["message"], config);
  EXPECT_TRUE(terminated(done).contains("startedAt"));
  EXPECT_TRUE(terminated(done).contains("finishedAt"));
  EXPECT_TRUE(done["status"].contains("startTime"));
}

TEST_F(NodeSim, TheEnvironmentComesFromValuesFieldRefsAndTheGpuLimit) {
  json object = pod("trial-env", node(1),
                    "echo \"$AUTOTUNE_TRIAL $POD_NAMESPACE $JOB $DS_CONFIG $CUDA_VISIBLE_DEVICES "
                    "$AUTOTUNE_SIM_GPU_MEMORY_MIB\" > /dev/termination-log");
  object["metadata"]["annotations"]["autotune.io/job"] = "gpt2";
  object["spec"]["containers"][0]["env"] = json::array(
      {{{"name", "AUTOTUNE_TRIAL"},
        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
       {{"name", "POD_NAMESPACE"},
        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
       {{"name", "JOB"},
        {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.annotations['autotune.io/job']"}}}}}},
       {{"name", "DS_CONFIG"}, {"value", "/etc/autotune/$(AUTOTUNE_TRIAL).json"}}});
  object["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2";
  ASSERT_TRUE(client().create(kPods, ns(), object));
  const json done = waitForPhase("trial-env", "Succeeded");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(terminated(done)["message"],
            "trial-env " + ns() + " gpt2 /etc/autotune/trial-env.json 0,1 32768\n");
}

TEST_F(NodeSim, AFailingCommandEndsFailedWithItsOutputTail) {
  json object = pod("broken", node(0), "seq 1 200; echo broken >&2; exit 3");
  object["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError";
  ASSERT_TRUE(client().create(kPods, ns(), object));
  // A message file written before failing wins over the log.
  json written =
      pod("broken-with-message", node(0), "echo from-file > /dev/termination-log; exit 1");
  written["spec"]["containers"][0]["terminationMessagePolicy"] = "FallbackToLogsOnError";
  ASSERT_TRUE(client().create(kPods, ns(), written));

  const json failed = waitForPhase("broken", "Failed");
  ASSERT_FALSE(failed.is_null());
  EXPECT_EQ(terminated(failed)["exitCode"], 3);
  EXPECT_EQ(terminated(failed)["reason"], "Error");
  // The kubelet's fallback: the last 80 lines of stdout and stderr together.
  std::string tail;
  for (int line = 122; line <= 200; ++line) {
    tail += std::to_string(line) + "\n";
  }
  EXPECT_EQ(terminated(failed)["message"], tail + "broken\n");

  const json withMessage = waitForPhase("broken-with-message", "Failed");
  ASSERT_FALSE(withMessage.is_null());
  EXPECT_EQ(terminated(withMessage)["exitCode"], 1);
  EXPECT_EQ(terminated(withMessage)["message"], "from-file\n");
}

TEST_F(NodeSim, DeletingARunningPodKillsItsProcessAndThePodGoes) {
  const auto pidFile = folder() / (ns() + ".pid");
  ASSERT_TRUE(client().create(
      kPods, ns(),
      pod("sleeper", node(1), "echo $$$$ > " + pidFile.string() + "; exec sleep 1000")));
  const json running = waitForPhase("sleeper", "Running");
  ASSERT_FALSE(running.is_null());
  EXPECT_TRUE(running["status"]["containerStatuses"][0]["state"].contains("running"));
  ASSERT_TRUE(eventually([&] { return writtenPid(pidFile).has_value(); }));
  const pid_t pid = *writtenPid(pidFile);
  ASSERT_TRUE(processExists(pid));

  // A default graceful delete: the simulator stops the process, then confirms the deletion.
  ASSERT_TRUE(client().remove(kPods, ns(), "sleeper"));
  EXPECT_TRUE(eventually([&] {
    auto current = client().get(kPods, ns(), "sleeper");
    return !current && current.error().kind == k8s::ErrorKind::kNotFound;
  })) << simulator()->log();
  EXPECT_FALSE(processExists(pid));
}

TEST_F(NodeSim, AnImageFromAnUnreachableRegistryWaitsInErrImagePullUntilDeleted) {
  const auto marker = folder() / (ns() + ".ran");
  json object = pod("unpullable", node(0), "touch " + marker.string());
  object["spec"]["containers"][0]["image"] = "registry.invalid/team/trainer:1";
  ASSERT_TRUE(client().create(kPods, ns(), object));
  json waiting;
  ASSERT_TRUE(eventually([&] {
    auto current = client().get(kPods, ns(), "unpullable");
    if (current) {
      waiting = (*current)["status"].value("containerStatuses", json::array());
    }
    return !waiting.empty() && waiting[0]["state"].contains("waiting");
  })) << simulator()->log();
  EXPECT_EQ(waiting[0]["state"]["waiting"]["reason"], "ErrImagePull");
  EXPECT_NE(waiting[0]["state"]["waiting"]["message"].get<std::string>().find(
                "lookup registry.invalid: no such host"),
            std::string::npos);
  EXPECT_EQ(waiting[0]["ready"], false);
  const auto pending = client().get(kPods, ns(), "unpullable");
  ASSERT_TRUE(pending);
  EXPECT_EQ((*pending)["status"]["phase"], "Pending");
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the command ran without its image";

  ASSERT_TRUE(client().remove(kPods, ns(), "unpullable"));
  EXPECT_TRUE(eventually([&] {
    auto current = client().get(kPods, ns(), "unpullable");
    return !current && current.error().kind == k8s::ErrorKind::kNotFound;
  })) << simulator()->log();
}

TEST_F(NodeSim, AProcessThatIgnoresSigtermIsKilledAfterTheGracePeriod) {
  const auto pidFile = folder() / (ns() + ".pid");
  // Ignored signals stay ignored across exec, so sleep ignores SIGTERM too.
  ASSERT_TRUE(client().create(
      kPods, ns(),
      pod("stubborn", node(0),
          "trap '' TERM; echo $$$$ > " + pidFile.string() + "; while true; do sleep 0.1; done")));
  ASSERT_FALSE(waitForPhase("stubborn", "Running").is_null());
  ASSERT_TRUE(eventually([&] { return writtenPid(pidFile).has_value(); }));
  const pid_t pid = *writtenPid(pidFile);

  const auto deleted = std::chrono::steady_clock::now();
  ASSERT_TRUE(client().remove(kPods, ns(), "stubborn"));
  EXPECT_TRUE(eventually([&] {
    auto current = client().get(kPods, ns(), "stubborn");
    return !current && current.error().kind == k8s::ErrorKind::kNotFound;
  })) << simulator()->log();
  // The simulator waits 3 s between SIGTERM and SIGKILL.
  EXPECT_GE(std::chrono::steady_clock::now() - deleted, 2s);
  EXPECT_FALSE(processExists(pid));
}

TEST_F(NodeSim, PodsOnOneNodeSeeOnlyTheirOwnFiles) {
  // Both run at once: each waits for the gate, then reads its config and writes its message
  // through the same container paths.
  const auto gate = folder() / (ns() + ".gate");
  const std::string script = "while [ ! -e " + gate.string() +
                             " ]; do sleep 0.05; done; cat /etc/autotune/ds_config.json > "
                             "/dev/termination-log";
  ASSERT_TRUE(
      client().create(kPods, ns(), withConfig(pod("left", node(0), script), R"({"a": 1})")));
  ASSERT_TRUE(
      client().create(kPods, ns(), withConfig(pod("right", node(0), script), R"({"b": 2})")));
  ASSERT_FALSE(waitForPhase("left", "Running").is_null());
  ASSERT_FALSE(waitForPhase("right", "Running").is_null());
  std::ofstream(gate).close();

  const json left = waitForPhase("left", "Succeeded");
  const json right = waitForPhase("right", "Succeeded");
  ASSERT_FALSE(left.is_null());
  ASSERT_FALSE(right.is_null());
  EXPECT_EQ(terminated(left)["message"], R"({"a": 1})");
  EXPECT_EQ(terminated(right)["message"], R"({"b": 2})");
  // Nothing reached the host's own path.
  EXPECT_EQ(readFile("/dev/termination-log"), "");
}

TEST_F(NodeSim, CommandsAreFoundOnTheBinFolder) {
  json object = pod("hello", node(1), "");
  object["spec"]["containers"][0]["command"] = json::array({"autotune-hello"});
  ASSERT_TRUE(client().create(kPods, ns(), object));
  const json done = waitForPhase("hello", "Succeeded");
  ASSERT_FALSE(done.is_null());
  EXPECT_EQ(terminated(done)["message"], "hello from hello\n");
}

TEST_F(NodeSim, APodOfAnIndexedJobFindsEveryPodOfItsJobByName) {
  const auto job = client().create(k8s::kBatchJobs, ns(), indexedJob("mn", 3));
  ASSERT_TRUE(job) << k8s::describe(job.error());
  const std::string service = "mn." + ns() + ".svc";
  json object = indexedPod(
      pod("", node(1),
          "echo \"$HOSTNAME $JOB_COMPLETION_INDEX\" > /dev/termination-log; getent hosts mn-0.mn "
          "mn-2." +
              service + ".cluster.local mn-1 >> /dev/termination-log"),
      *job, 1, node(1));
  ASSERT_TRUE(client().create(kPods, ns(), object));
  // A Pod without a subdomain sees the machine's own hosts file.
  ASSERT_TRUE(
      client().create(kPods, ns(), pod("plain", node(1), "cat /etc/hosts > /dev/termination-log")));

  const json done = waitForPhase("mn-1-x7k2p", "Succeeded");
  ASSERT_FALSE(done.is_null());
  const auto lines = linesOf(terminated(done)["message"].get<std::string>());
  ASSERT_EQ(lines.size(), 4U) << terminated(done)["message"];
  EXPECT_EQ(lines[0], "mn-1 1");
  // One loopback address of the Job's own for all of its names.
  std::vector<std::string> addresses;
  for (std::size_t at = 1; at < lines.size(); ++at) {
    addresses.push_back(lines[at].substr(0, lines[at].find_first_of(" \t")));
  }
  EXPECT_TRUE(addresses[0].starts_with("127.")) << addresses[0];
  EXPECT_NE(addresses[0], "127.0.0.1");
  EXPECT_EQ(addresses[1], addresses[0]);
  EXPECT_EQ(addresses[2], addresses[0]);
  EXPECT_TRUE(
      lines[2].ends_with("mn-2 mn-2.mn mn-2." + service + " mn-2." + service + ".cluster.local"))
      << lines[2];

  const json plain = waitForPhase("plain", "Succeeded");
  ASSERT_FALSE(plain.is_null());
  const std::string machineHosts = readFile("/etc/hosts");
  EXPECT_EQ(terminated(plain).value("message", ""),
            machineHosts.substr(machineHosts.size() > 4096 ? machineHosts.size() - 4096 : 0));
}

TEST_F(NodeSim, TwoMultiNodeTrialsMeetAtOnceOnOnePort) {
  // Each of two Indexed Jobs runs trial-sim on two Pods of 4 GPUs, on both Nodes, all with the
  // same master port: each Job's ranks meet at the Job's own address.
  const std::string config = R"({"train_micro_batch_size_per_gpu": 3, "fp16": {"enabled": true},
      "zero_optimization": {"stage": 1},
      "autotuning": {"enabled": true, "metric_path": "/dev/termination-log"}})";
  for (const std::string name : {"mn-a", "mn-b"}) {
    const auto job = client().create(k8s::kBatchJobs, ns(), indexedJob(name, 2));
    ASSERT_TRUE(job) << k8s::describe(job.error());
    for (int index = 0; index < 2; ++index) {
      json base = withConfig(pod("", node(index), ""), config);
      auto& container = base["spec"]["containers"][0];
      container["command"] = json::array({TRIAL_SIM_BINARY, "--profile", "gpt2-large",
                                          "--deepspeed", "/etc/autotune/ds_config.json"});
      container["terminationMessagePolicy"] = "FallbackToLogsOnError";
      container["resources"]["limits"]["nvidia.com/gpu"] = "4";
      container["env"] = json::array(
          {{{"name", "AUTOTUNE_NUM_NODES"}, {"value", "2"}},
           {{"name", "AUTOTUNE_NODE_RANK"},
            {"valueFrom",
             {{"fieldRef",
               {{"fieldPath", "metadata.annotations['" + std::string(kIndexKey) + "']"}}}}}},
           {{"name", "AUTOTUNE_MASTER_ADDR"}, {"value", name + "-0." + name}},
           {{"name", "AUTOTUNE_MASTER_PORT"}, {"value", "29500"}}});
      ASSERT_TRUE(client().create(kPods, ns(), indexedPod(base, *job, index, node(index))));
    }
  }
  for (const std::string name : {"mn-a", "mn-b"}) {
    const json rankZero = waitForPhase(name + "-0-x7k2p", "Succeeded");
    const json rankOne = waitForPhase(name + "-1-x7k2p", "Succeeded");
    ASSERT_FALSE(rankZero.is_null());
    ASSERT_FALSE(rankOne.is_null());
    // Rank 0's metrics are of the whole world: 3 samples on each of 2 × 4 GPUs per step.
    const json metrics = json::parse(terminated(rankZero).value("message", ""), nullptr, false);
    ASSERT_TRUE(metrics.is_object()) << terminated(rankZero);
    EXPECT_NEAR(metrics["latency"].get<double>(), 24 * 1e6 / metrics["throughput"].get<double>(),
                1e-6);
    EXPECT_FALSE(terminated(rankOne).contains("message")) << terminated(rankOne);
  }
}

TEST_F(NodeSim, SigtermStopsEveryPodAndDeletesTheNodes) {
  const auto folder = scratchFolder("own");
  const std::string prefix = "own" + std::to_string(getpid() % 100000);
  Simulator own(folder,
                {"--nodes", "1", "--gpus-per-node", "8", "--gpu-memory", "80Gi", "--gpu-product",
                 "NVIDIA-H100-80GB-HBM3", "--name-prefix", prefix, "--delete-nodes-on-exit"});
  ASSERT_TRUE(own.startError().empty()) << own.startError();
  ASSERT_TRUE(eventually([&] { return client().get(kNodes, "", prefix + "-0").has_value(); }))
      << own.log();
  const json labels = (*client().get(kNodes, "", prefix + "-0"))["metadata"]["labels"];
  EXPECT_EQ(labels["nvidia.com/gpu.memory"], "81920");
  EXPECT_EQ(labels["nvidia.com/gpu.product"], "NVIDIA-H100-80GB-HBM3");
  const auto pidFile = folder / "pid";
  ASSERT_TRUE(client().create(
      kPods, ns(),
      pod("long", prefix + "-0", "echo $$$$ > " + pidFile.string() + "; exec sleep 1000")));
  ASSERT_TRUE(eventually([&] { return writtenPid(pidFile).has_value(); })) << own.log();
  const pid_t pid = *writtenPid(pidFile);

  EXPECT_EQ(own.stop(), 0) << own.log();
  EXPECT_FALSE(processExists(pid));
  const auto node = client().get(kNodes, "", prefix + "-0");
  ASSERT_FALSE(node);
  EXPECT_EQ(node.error().kind, k8s::ErrorKind::kNotFound);
}

}  // namespace
}  // namespace autotune::nodesim
