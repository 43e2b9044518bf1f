// The manager's wiring: watched objects reach the reconciler as keys, failures are retried,
// requeues come back, and a stop ends everything promptly, even with a watch open.

#include "runtime/manager.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "k8s/resources.h"
#include "support/fake_transport.h"

namespace autotune::runtime {
namespace {

using k8s::kConfigMaps;
using nlohmann::json;
using testing::FakeTransport;

// Counts reconciles per key and lets a test wait for a count.
class Reconciles {
 public:
  void record(const std::string& key) {
    const std::lock_guard lock(mutex_);
    ++counts_[key];
    changed_.notify_all();
  }

  bool waitFor(const std::string& key, int count) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(10), [&] { return counts_[key] >= count; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, int> counts_;
};

class ManagerRun : public ::testing::Test {
 protected:
  void SetUp() override {
    transport_->respond(200, json{{"metadata", {{"resourceVersion", "10"}}},
                                  {"items",
                                   {{{"metadata", {{"name", "a"}, {"namespace", "ns"}}}},
                                    {{"metadata", {{"name", "b"}, {"namespace", "ns"}}}}}}}
                                 .dump());
    transport_->respondWithLinesAndHoldOpen({});
    // A Pod-like mapping: every object reconciles the key named by its name.
    manager_.watch({kConfigMaps, "ns", ""},
                   [](const json& object) { return std::vector<std::string>{keyOf(object)}; });
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  k8s::Client client_{transport_};
  SystemClock clock_;
  Manager manager_{client_, clock_, ManagerOptions{}};
  Reconciles reconciles_;
};

TEST_F(ManagerRun, ReconcilesEveryListedKeyAndStopsPromptly) {
  manager_.setReconciler([this](const std::string& key) {
    reconciles_.record(key);
    return ReconcileResult{};
  });
  std::optional<RunEnd> end;
  std::jthread running([&](std::stop_token stop) { end = manager_.run(stop); });
  EXPECT_TRUE(reconciles_.waitFor("ns/a", 1));
  EXPECT_TRUE(reconciles_.waitFor("ns/b", 1));
  EXPECT_TRUE(manager_.synced());
  EXPECT_TRUE(manager_.leading());
  running.request_stop();
  running.join();
  EXPECT_EQ(end, RunEnd::kStopped);
  EXPECT_FALSE(manager_.leading());
}

TEST_F(ManagerRun, RetriesAFailedReconcileAndHonoursRequeueAfter) {
  std::atomic<int> calls = 0;
  manager_.setReconciler([&](const std::string& key) {
    reconciles_.record(key);
    if (key != "ns/a") {
      return ReconcileResult{};
    }
    const int call = ++calls;
    if (call == 1) {
      return ReconcileResult{true, std::nullopt};  // fails: retried after a backoff
    }
    if (call == 2) {
      return ReconcileResult{false, std::chrono::milliseconds(10)};  // a deadline to look at
    }
    return ReconcileResult{};
  });
  std::jthread running([&](std::stop_token stop) { manager_.run(stop); });
  EXPECT_TRUE(reconciles_.waitFor("ns/a", 3));
  running.request_stop();
}

}  // namespace
}  // namespace autotune::runtime
