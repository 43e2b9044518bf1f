// The runtime against a real kube-apiserver and etcd: a watch that loses its TCP connection
// resumes without missing an event, a watch from a compacted version relists and converges, and
// two processes elect one leader and hand over when it dies.
//
// The API server runs without its watch cache, so watches read etcd directly and an etcd
// compaction is enough to make a resourceVersion too old.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "k8s/client.h"
#include "k8s/config.h"
#include "k8s/resources.h"
#include "object/time.h"
#include "runtime/clock.h"
#include "runtime/informer.h"
#include "runtime/leader_election.h"
#include "support/control_plane.h"
#include "support/tcp_proxy.h"

namespace autotune::runtime {
namespace {

using k8s::kConfigMaps;
using k8s::kLeases;
using nlohmann::json;
using testing::ApiServerTest;
using testing::ControlPlane;

[[maybe_unused]] const auto* const kControlPlane =
    ::testing::AddGlobalTestEnvironment(new ControlPlane("--apiserver-arg=--watch-cache=false"));

bool waitUntil(const std::function<bool()>& condition,
               std::chrono::seconds timeout = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

json configMap(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}};
}

// What a watcher told its handlers, readable while it runs.
class Seen {
 public:
  void change(const json& object) {
    const std::lock_guard lock(mutex_);
    keys_.push_back(object["metadata"]["name"].get<std::string>());
  }
  void restart(RestartReason reason) {
    const std::lock_guard lock(mutex_);
    restarts_.push_back(reason);
  }
  int count(const std::string& name) const {
    const std::lock_guard lock(mutex_);
    return static_cast<int>(std::count(keys_.begin(), keys_.end(), name));
  }
  std::vector<RestartReason> restarts() const {
    const std::lock_guard lock(mutex_);
    return restarts_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> keys_;
  std::vector<RestartReason> restarts_;
};

std::string run(const std::string& command) {
  std::string output;
  // NOLINTNEXTLINE(cert-env33-c): the test drives etcd's HTTP gateway with curl
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return output;
  }
  std::array<char, 4096> buffer{};
  while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    output += buffer.data();
  }
  pclose(pipe);
  return output;
}

// Compacts etcd's history up to its current revision, through its JSON gateway.
bool compactEtcd() {
  const std::string url = ControlPlane::etcdUrl();
  const json range = json::parse(
      run("curl -sf -X POST " + url + "/v3/kv/range -d '{\"key\":\"AA==\"}'"), nullptr, false);
  if (range.is_discarded()) {
    return false;
  }
  const std::string revision = range["header"]["revision"].get<std::string>();
  const std::string compacted =
      run("curl -sf -X POST " + url + "/v3/kv/compaction -d '{\"revision\":\"" + revision +
          "\",\"physical\":true}'");
  return compacted.find("header") != std::string::npos;
}

class Watching : public ApiServerTest {
 protected:
  void SetUp() override {
    ApiServerTest::SetUp();
    store_->listen([this](const json* before, const json* after) {
      seen_.change(after != nullptr ? *after : *before);
    });
  }

  FakeClock clock_;
  std::unique_ptr<Indexed<json>> store_ = rawStore();
  Seen seen_;
};

TEST_F(Watching, AWatchResumesAfterItsConnectionIsCutWithoutMissingAnEvent) {
  auto config = k8s::loadKubeconfig(ControlPlane::kubeconfigPath());
  ASSERT_TRUE(config);
  const int apiPort = std::stoi(config->server.substr(config->server.rfind(':') + 1));
  testing::TcpProxy proxy(apiPort);
  config->server = "https://127.0.0.1:" + std::to_string(proxy.port());
  const k8s::Client throughProxy(k8s::makeHttpTransport(*config));
  const SystemClock clock;
  Watcher watcher(throughProxy, {kConfigMaps, ns(), ""}, *store_, clock);
  watcher.onRestart([this](RestartReason reason) { seen_.restart(reason); });
  std::jthread running([&watcher](std::stop_token stop) { watcher.run(stop); });

  // Listed first, so that "before" arrives through the watch: its connection is then open.
  ASSERT_TRUE(waitUntil([&] { return watcher.hasSynced(); }));
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("before")));
  ASSERT_TRUE(waitUntil([&] { return store_->get(ns() + "/before") != nullptr; }));
  ASSERT_GE(proxy.cut(), 1);
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("during-" + std::to_string(i))));
  }
  ASSERT_TRUE(client().remove(kConfigMaps, ns(), "before"));

  ASSERT_TRUE(waitUntil([&] {
    return store_->size() == 5 && store_->get(ns() + "/before") == nullptr;
  })) << "the store holds "
      << store_->size() << " objects";
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(seen_.count("during-" + std::to_string(i)), 1);
  }
  // Added once, deleted once: a relist would have reported it added again.
  EXPECT_EQ(seen_.count("before"), 2);
  // The cut reads as a dropped stream or, when it falls between chunks, as an ended one; either
  // way the watch restarts from where it was.
  const auto restarts = seen_.restarts();
  EXPECT_FALSE(restarts.empty());
  for (const auto reason : restarts) {
    EXPECT_TRUE(reason == RestartReason::kDropped || reason == RestartReason::kExpired)
        << toString(reason);
  }
}

TEST_F(Watching, AWatchFromACompactedVersionRelistsAndConverges) {
  if (ControlPlane::etcdUrl().empty()) {
    GTEST_SKIP() << "needs the fixture's own etcd to compact";
  }
  Watcher watcher(client(), {kConfigMaps, ns(), ""}, *store_, clock_);
  watcher.onRestart([this](RestartReason reason) { seen_.restart(reason); });
  const std::stop_source stop;
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("doomed")));
  ASSERT_EQ(watcher.step(stop.get_token()), WatchPhase::kWatch);
  ASSERT_TRUE(store_->get(ns() + "/doomed"));

  ASSERT_TRUE(client().remove(kConfigMaps, ns(), "doomed"));
  ASSERT_TRUE(client().create(kConfigMaps, ns(), configMap("kept")));
  ASSERT_TRUE(compactEtcd());

  EXPECT_EQ(watcher.step(stop.get_token()), WatchPhase::kList);
  EXPECT_EQ(seen_.restarts(), std::vector<RestartReason>{RestartReason::kGone});
  EXPECT_EQ(watcher.step(stop.get_token()), WatchPhase::kWatch);
  EXPECT_EQ(store_->size(), 1U);
  EXPECT_TRUE(store_->get(ns() + "/kept"));
  EXPECT_EQ(seen_.count("doomed"), 2);  // listed, then reported gone by the relist
  EXPECT_EQ(seen_.count("kept"), 1);
}

// --- Leader election between two processes -------------------------------------------------------

class Replica {
 public:
  Replica(const std::string& ns, const std::string& identity) {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string program = std::string(AUTOTUNE_BINARY_DIR) + "/lease_holder";
      const std::string kubeconfig = ControlPlane::kubeconfigPath();
      execl(program.c_str(), program.c_str(), kubeconfig.c_str(), ns.c_str(), "autotune",
            identity.c_str(), nullptr);
      _exit(127);
    }
  }
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;
  Replica(Replica&&) = delete;
  Replica& operator=(Replica&&) = delete;
  ~Replica() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Sends `signal` and returns the exit status.
  int end(int signal) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // The exit status once it exits by itself.
  int wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

class Election : public ApiServerTest {
 protected:
  json spec() const {
    auto lease = client().get(kLeases, ns(), "autotune");
    return lease ? (*lease)["spec"] : json::object();
  }
  std::string holder() const { return spec().value("holderIdentity", ""); }
};

TEST_F(Election, TwoProcessesElectOneLeaderAndTheOtherTakesOverWhenItDies) {
  Replica first(ns(), "replica-a");
  ASSERT_TRUE(waitUntil([&] { return holder() == "replica-a"; }));
  Replica second(ns(), "replica-b");

  // While the leader lives it keeps renewing, and the standby never takes over.
  std::string renewed = spec().value("renewTime", "");
  for (int renewal = 0; renewal < 4; ++renewal) {
    ASSERT_TRUE(waitUntil([&] { return spec().value("renewTime", "") != renewed; }));
    EXPECT_EQ(holder(), "replica-a");
    renewed = spec().value("renewTime", "");
  }

  first.end(SIGKILL);
  ASSERT_TRUE(waitUntil([&] { return holder() == "replica-b"; }));
  EXPECT_EQ(spec().value("leaseTransitions", 0), 1);

  // A clean stop releases the lease at once instead of leaving it to expire.
  const int status = second.end(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(holder(), "");
}

TEST_F(Election, ALeaderThatCannotRenewStopsLeading) {
  Replica leader(ns(), "replica-a");
  ASSERT_TRUE(waitUntil([&] { return holder() == "replica-a"; }));
  auto lease = client().get(kLeases, ns(), "autotune");
  // The leader renews meanwhile; take the lease over on top of its latest write.
  bool taken = false;
  for (int attempt = 0; attempt < 10 && !taken && lease; ++attempt) {
    (*lease)["spec"]["holderIdentity"] = "intruder";
    (*lease)["spec"]["renewTime"] =
        object::formatTime(std::chrono::system_clock::now(), object::Fraction::kMicroseconds);
    taken = client().update(kLeases, ns(), *lease) != nullptr;
    lease = client().get(kLeases, ns(), "autotune");
  }
  ASSERT_TRUE(taken);
  const int status = leader.wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << "status " << status;
}

}  // namespace
}  // namespace autotune::runtime
