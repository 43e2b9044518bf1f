// Leader election's decisions against a scripted API server and a fake clock: when a replica may
// take the lease, and what it writes. Two real processes electing a leader over a real API server
// are in runtime_integration_test.cpp.

#include "runtime/leader_election.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "object/time.h"
#include "support/fake_transport.h"

namespace autotune::runtime {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::FakeTransport;

std::string lease(const std::string& holder, const std::string& renewTime, int transitions = 0,
                  int duration = 15) {
  return json{{"apiVersion", "coordination.k8s.io/v1"},
              {"kind", "Lease"},
              {"metadata", {{"name", "autotune"}, {"namespace", "ops"}, {"resourceVersion", "5"}}},
              {"spec",
               {{"holderIdentity", holder},
                {"leaseDurationSeconds", duration},
                {"acquireTime", "2026-01-01T00:00:00.000000Z"},
                {"renewTime", renewTime},
                {"leaseTransitions", transitions}}}}
      .dump();
}

class Election : public ::testing::Test {
 protected:
  static k8s::RequestPolicy noRetries() {
    k8s::RequestPolicy policy;
    policy.maxRetries = 0;
    return policy;
  }

  json lastBody() const { return json::parse(transport_->sent().back().body); }
  std::string lastMethod() const { return transport_->sent().back().method; }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  k8s::Client client_{transport_, noRetries()};
  FakeClock clock_;
  LeaderElector elector_{client_, {"ops", "autotune", "replica-a"}, clock_};
};

TEST_F(Election, CreatesAMissingLeaseAndLeads) {
  transport_->respond(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
  transport_->respond(201, lease("replica-a", "2026-01-01T00:00:00.000000Z"));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
  EXPECT_TRUE(elector_.isLeader());
  EXPECT_EQ(lastMethod(), "POST");
  EXPECT_EQ(transport_->sent().back().target, "/apis/coordination.k8s.io/v1/namespaces/ops/leases");
  const json spec = lastBody()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "replica-a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 15);
  EXPECT_EQ(spec["leaseTransitions"], 0);
}

TEST_F(Election, WaitsAWholeLeaseDurationOfUnchangedRecordBeforeTakingOver) {
  const std::string held = lease("replica-b", "2026-01-01T00:00:01.000000Z", 3);
  transport_->respond(200, held);
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  clock_.advance(seconds(14));
  transport_->respond(200, held);
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  EXPECT_EQ(lastMethod(), "GET");

  clock_.advance(seconds(1));
  transport_->respond(200, held);
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:16.000000Z", 4));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
  EXPECT_EQ(lastMethod(), "PUT");
  const json written = lastBody();
  EXPECT_EQ(written["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(written["spec"]["leaseTransitions"], 4);
  EXPECT_NE(written["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(written["metadata"]["resourceVersion"], "5");  // a stale write is a Conflict
}

TEST_F(Election, ARenewedRecordRestartsTheWait) {
  transport_->respond(200, lease("replica-b", "2026-01-01T00:00:01.000000Z"));
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  clock_.advance(seconds(10));
  transport_->respond(200, lease("replica-b", "2026-01-01T00:00:11.000000Z"));
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  clock_.advance(seconds(10));
  transport_->respond(200, lease("replica-b", "2026-01-01T00:00:11.000000Z"));
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
}

TEST_F(Election, RenewingKeepsTheAcquireTimeAndTransitions) {
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:01.000000Z", 2));
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:03.000000Z", 2));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
  const json spec = lastBody()["spec"];
  EXPECT_EQ(spec["acquireTime"], "2026-01-01T00:00:00.000000Z");
  EXPECT_EQ(spec["leaseTransitions"], 2);
  EXPECT_NE(spec["renewTime"], "2026-01-01T00:00:01.000000Z");
}

std::string atVersion(const std::string& written, const std::string& resourceVersion) {
  json lease = json::parse(written);
  lease["metadata"]["resourceVersion"] = resourceVersion;
  return lease.dump();
}

// Half the requests of reading before each write, and one request fewer to hang on a bad
// connection within the renew deadline.
TEST_F(Election, TheHolderRenewsInOneRequestOverTheLeaseAsItLastWroteIt) {
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:01.000000Z", 2));
  transport_->respond(200, atVersion(lease("replica-a", "2026-01-01T00:00:03.000000Z", 2), "6"));
  ASSERT_TRUE(elector_.tryAcquireOrRenew());
  ASSERT_EQ(transport_->sent().size(), 2U);

  transport_->respond(200, atVersion(lease("replica-a", "2026-01-01T00:00:05.000000Z", 2), "7"));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
  ASSERT_EQ(transport_->sent().size(), 3U);
  EXPECT_EQ(lastMethod(), "PUT");
  EXPECT_EQ(lastBody()["metadata"]["resourceVersion"], "6");
  EXPECT_EQ(lastBody()["spec"]["acquireTime"], "2026-01-01T00:00:00.000000Z");
  EXPECT_NE(lastBody()["spec"]["renewTime"], "2026-01-01T00:00:03.000000Z");

  // A renewal lost in the network is tried again the same way, at the version last written.
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  EXPECT_FALSE(elector_.isLeader());
  transport_->respond(200, atVersion(lease("replica-a", "2026-01-01T00:00:09.000000Z", 2), "8"));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
  ASSERT_EQ(transport_->sent().size(), 5U);
  EXPECT_EQ(lastMethod(), "PUT");
  EXPECT_EQ(lastBody()["metadata"]["resourceVersion"], "7");
}

TEST_F(Election, ARenewalThatFindsTheLeaseTakenReadsItAndStopsLeading) {
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:01.000000Z"));
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:02.000000Z"));
  ASSERT_TRUE(elector_.tryAcquireOrRenew());

  transport_->respond(409, R"({"kind":"Status","code":409,"reason":"Conflict"})");
  transport_->respond(200, lease("replica-b", "2026-01-01T00:00:03.000000Z", 1));
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  EXPECT_FALSE(elector_.isLeader());
  ASSERT_EQ(transport_->sent().size(), 4U);
  EXPECT_EQ(lastMethod(), "GET");

  // Not the holder any more: it reads before it writes again.
  transport_->respond(200, lease("replica-b", "2026-01-01T00:00:05.000000Z", 1));
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  EXPECT_EQ(lastMethod(), "GET");
}

TEST_F(Election, AConflictingWriteDoesNotLead) {
  transport_->respond(200, lease("", "2026-01-01T00:00:01.000000Z"));
  transport_->respond(409, R"({"kind":"Status","code":409,"reason":"Conflict"})");
  EXPECT_FALSE(elector_.tryAcquireOrRenew());
  EXPECT_FALSE(elector_.isLeader());
}

TEST_F(Election, AReleasedLeaseIsTakenAtOnce) {
  transport_->respond(200, lease("", "2026-01-01T00:00:01.000000Z", 1, 1));
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:02.000000Z", 2));
  EXPECT_TRUE(elector_.tryAcquireOrRenew());
}

TEST_F(Election, ReleaseClearsTheHolderSoAStandbyNeedNotWait) {
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:01.000000Z"));
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:02.000000Z"));
  ASSERT_TRUE(elector_.tryAcquireOrRenew());
  transport_->respond(200, lease("replica-a", "2026-01-01T00:00:02.000000Z"));
  transport_->respond(200, lease("", "2026-01-01T00:00:03.000000Z"));
  elector_.release();
  EXPECT_FALSE(elector_.isLeader());
  EXPECT_EQ(lastMethod(), "PUT");
  EXPECT_EQ(lastBody()["spec"]["holderIdentity"], "");
  EXPECT_EQ(lastBody()["spec"]["leaseDurationSeconds"], 1);
}

// The scripted server, where the stop arrives while the write that wins the lease is in flight,
// as a SIGTERM can right after the standby's takeover is committed.
class StopOnWinningWrite : public FakeTransport {
 public:
  explicit StopOnWinningWrite(std::stop_source& stop) : stop_(stop) {}
  tl::expected<k8s::HttpResponse, std::string> send(const k8s::HttpRequest& request) override {
    if (request.method == "POST") {
      stop_.request_stop();
    }
    return FakeTransport::send(request);
  }

 private:
  std::stop_source& stop_;
};

TEST(ElectionStop, AStopDuringTheWinningWriteStillReleasesTheLease) {
  std::stop_source stop;
  auto transport = std::make_shared<StopOnWinningWrite>(stop);
  transport->respond(404, R"({"kind":"Status","code":404,"reason":"NotFound"})");
  transport->respond(201, lease("replica-a", "2026-01-01T00:00:00.000000Z"));
  transport->respond(200, lease("replica-a", "2026-01-01T00:00:00.000000Z"));
  transport->respond(200, lease("", "2026-01-01T00:00:01.000000Z"));
  k8s::RequestPolicy noRetries;
  noRetries.maxRetries = 0;
  const k8s::Client client(transport, noRetries);
  FakeClock clock;
  LeaderElector elector(client, {"ops", "autotune", "replica-a"}, clock);
  bool led = false;
  EXPECT_FALSE(elector.run(stop.get_token(), [&led](const std::stop_token&) { led = true; }));
  EXPECT_FALSE(led);
  ASSERT_EQ(transport->sent().size(), 4U);
  EXPECT_EQ(transport->sent().back().method, "PUT");
  EXPECT_EQ(json::parse(transport->sent().back().body)["spec"]["holderIdentity"], "");
  EXPECT_FALSE(elector.isLeader());
}

// An API server that answers the lease's first two requests (not found, then created) and then
// holds every request open until released, as a stalled connection would.
class StallingTransport : public k8s::Transport {
 public:
  tl::expected<k8s::HttpResponse, std::string> send(const k8s::HttpRequest&) override {
    std::unique_lock lock(mutex_);
    ++requests_;
    if (requests_ == 1) {
      return k8s::HttpResponse{404, R"({"kind":"Status","code":404,"reason":"NotFound"})", {}};
    }
    if (requests_ == 2) {
      return k8s::HttpResponse{201, lease("replica-a", "2026-01-01T00:00:00.000000Z"), {}};
    }
    stalled_ = true;
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_; });
    stalled_ = false;
    return tl::unexpected(std::string("connection reset by peer"));
  }
  tl::expected<k8s::HttpResponse, std::string> stream(const k8s::HttpRequest&,
                                                      const k8s::LineHandler&, std::chrono::seconds,
                                                      std::stop_token) override {
    return tl::unexpected(std::string("no watches here"));
  }

  bool waitUntilStalled() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(30), [this] { return stalled_; });
  }
  bool stalled() {
    const std::lock_guard lock(mutex_);
    return stalled_;
  }
  void release() {
    const std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int requests_ = 0;
  bool stalled_ = false;
  bool released_ = false;
};

bool becomesTrueWithin30Seconds(const std::atomic<bool>& flag) {
  for (int look = 0; look < 6000 && !flag; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return flag;
}

// A renewal stuck in the network does not keep the replica leading: once renewDeadline has
// passed since the last renewal that went through, leadership ends while the stuck request is
// still waiting, before a standby could take the lease over (leaseDuration).
TEST(ElectionDeadline, ARenewalThatHangsEndsLeadershipAtTheRenewDeadline) {
  auto transport = std::make_shared<StallingTransport>();
  k8s::RequestPolicy noRetries;
  noRetries.maxRetries = 0;
  const k8s::Client client(transport, noRetries);
  FakeClock clock;
  LeaderElector elector(
      client,
      {"ops", "autotune", "replica-a", seconds(15), seconds(10), std::chrono::milliseconds(5)},
      clock);
  std::atomic<bool> led = false;
  std::atomic<bool> ended = false;
  std::atomic<bool> lost = false;
  std::jthread running([&](const std::stop_token& stop) {
    lost = elector.run(stop, [&](const std::stop_token& leadership) {
      led = true;
      sleepFor(std::chrono::hours(1), leadership);
      ended = true;
    });
  });
  ASSERT_TRUE(transport->waitUntilStalled());
  // The leading callback runs on its own thread, which may start after the renewal stalled.
  EXPECT_TRUE(becomesTrueWithin30Seconds(led));
  clock.advance(seconds(9));
  // Within the deadline, a stuck renewal alone does not end leadership.
  for (int look = 0; look < 20; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_FALSE(ended);
  }
  clock.advance(seconds(1));
  EXPECT_TRUE(becomesTrueWithin30Seconds(ended));
  EXPECT_TRUE(transport->stalled()) << "leadership ended only when the renewal gave up";
  transport->release();
  running.join();
  EXPECT_TRUE(lost);
  EXPECT_FALSE(elector.isLeader());
}

TEST(MicroTime, IsRfc3339WithMicrosecondsInUtc) {
  const auto when = std::chrono::system_clock::time_point(std::chrono::microseconds(
      1795305600LL * 1000000 + 123456));  // 2026-11-22T00:00:00Z plus 0.123456 s
  EXPECT_EQ(object::formatTime(when, object::Fraction::kMicroseconds),
            "2026-11-22T00:00:00.123456Z");
}

}  // namespace
}  // namespace autotune::runtime
