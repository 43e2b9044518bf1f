// The manager's wiring: watched objects reach the reconciler as keys, failures are retried,
// requeues come back, and a stop ends everything promptly, even with a watch open.

#include "runtime/manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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
    manager_.watch<json>(
        {kConfigMaps, "ns", ""}, *store_, [](const json* before, const json* after) {
          return std::vector<std::string>{keyOf(after != nullptr ? *after : *before)};
        });
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  k8s::Client client_{transport_};
  SystemClock clock_;
  std::unique_ptr<Indexed<json>> store_ = rawStore();
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
      return ReconcileResult::retry();  // fails: retried after a backoff
    }
    if (call == 2) {
      return ReconcileResult::after(std::chrono::milliseconds(10));  // a deadline to look at
    }
    return ReconcileResult{};
  });
  std::jthread running([&](std::stop_token stop) { manager_.run(stop); });
  EXPECT_TRUE(reconciles_.waitFor("ns/a", 3));
  running.request_stop();
}

// One key whose reconcile throws, every time: the process goes on, the other key is reconciled,
// the thrower is retried with backoff, and every throw reaches the hook as that key's exception.
TEST_F(ManagerRun, AReconcileThatThrowsFailsItsKeyAloneAndIsRetried) {
  std::mutex mutex;
  std::vector<std::string> exceptions;
  ManagerHooks hooks;
  hooks.reconciled = [&](const std::string& key, const ReconcileResult& result, Duration) {
    if (result.exception) {
      EXPECT_TRUE(result.failed);
      const std::lock_guard lock(mutex);
      exceptions.push_back(key + ": " + *result.exception);
    }
  };
  manager_.setHooks(hooks);
  manager_.setReconciler([&](const std::string& key) -> ReconcileResult {
    reconciles_.record(key);
    if (key == "ns/a") {
      throw std::runtime_error("type_error.316: invalid UTF-8 byte");
    }
    if (key == "ns/b") {
      throw 42;  // not even a std::exception
    }
    return {};
  });
  std::jthread running([&](std::stop_token stop) { manager_.run(stop); });
  EXPECT_TRUE(reconciles_.waitFor("ns/a", 3));
  EXPECT_TRUE(reconciles_.waitFor("ns/b", 2));
  running.request_stop();
  running.join();
  const std::lock_guard lock(mutex);
  EXPECT_GE(exceptions.size(), 5U);
  EXPECT_NE(
      std::find(exceptions.begin(), exceptions.end(), "ns/a: type_error.316: invalid UTF-8 byte"),
      exceptions.end());
  EXPECT_NE(std::find(exceptions.begin(), exceptions.end(),
                      "ns/b: an exception that is not a std::exception"),
            exceptions.end());
}

}  // namespace
}  // namespace autotune::runtime
