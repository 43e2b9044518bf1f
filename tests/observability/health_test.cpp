// Liveness and readiness checks, and the heartbeat that tells a wedged worker from an idle one,
// on a clock the test moves.

#include "observability/health.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace autotune::observability {
namespace {

using std::chrono::seconds;

class TestClock {
 public:
  Heartbeat::Now now() {
    return [this] { return Heartbeat::TimePoint(seconds(elapsed_.load())); };
  }
  void advance(int by) { elapsed_ += by; }

 private:
  std::atomic<int> elapsed_ = 0;
};

TEST(Heartbeat, AnIdleWorkerIsAlive) {
  TestClock clock;
  const Heartbeat heartbeat(seconds(60), clock.now());
  clock.advance(3600);
  EXPECT_TRUE(heartbeat.healthy());
}

TEST(Heartbeat, ABeatOlderThanTheLimitFailsUntilItEnds) {
  TestClock clock;
  Heartbeat heartbeat(seconds(60), clock.now());
  {
    const auto beat = heartbeat.beat();
    clock.advance(60);
    EXPECT_TRUE(heartbeat.healthy());
    clock.advance(1);
    EXPECT_FALSE(heartbeat.healthy());
  }
  EXPECT_TRUE(heartbeat.healthy());
}

TEST(Heartbeat, OneWedgedWorkerAmongBusyOnesFails) {
  TestClock clock;
  Heartbeat heartbeat(seconds(60), clock.now());
  const auto wedged = heartbeat.beat();
  for (int i = 0; i < 10; ++i) {
    clock.advance(10);
    const auto quick = heartbeat.beat();
  }
  EXPECT_FALSE(heartbeat.healthy());
}

TEST(Heartbeat, AMovedBeatEndsOnce) {
  TestClock clock;
  Heartbeat heartbeat(seconds(60), clock.now());
  auto first = heartbeat.beat();
  auto second = heartbeat.beat();
  clock.advance(61);
  second = std::move(first);  // ends the beat second held; first's now lives in second
  EXPECT_FALSE(heartbeat.healthy());
  { const auto moved = std::move(second); }
  EXPECT_TRUE(heartbeat.healthy());
}

TEST(Health, NamesEveryFailingCheckInOrder) {
  Health health;
  bool synced = false;
  health.addReadiness("informers-synced", [&] { return synced; });
  health.addReadiness("always", [] { return true; });
  health.addReadiness("leader-known", [] { return false; });
  health.addLiveness("workers", [] { return true; });
  EXPECT_EQ(health.failingReadiness(),
            (std::vector<std::string>{"informers-synced", "leader-known"}));
  EXPECT_TRUE(health.failingLiveness().empty());
  synced = true;
  EXPECT_EQ(health.failingReadiness(), (std::vector<std::string>{"leader-known"}));
}

TEST(Health, WithoutChecksEverythingPasses) {
  const Health health;
  EXPECT_TRUE(health.failingLiveness().empty());
  EXPECT_TRUE(health.failingReadiness().empty());
}

}  // namespace
}  // namespace autotune::observability
