#include "runtime/work_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "runtime/clock.h"

namespace {

using autotune::runtime::FakeClock;
using autotune::runtime::WorkQueue;
using autotune::runtime::WorkQueueLimits;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::optional<std::string> key(const char* text) { return std::string(text); }

// --- add, get, done -----------------------------------------------------------------------------

TEST(WorkQueue, KeysComeOutInTheOrderTheyWereAdded) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.add("ns/a");
  queue.add("ns/b");
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  EXPECT_EQ(queue.tryGet(), key("ns/b"));
  EXPECT_EQ(queue.tryGet(), std::nullopt);
}

TEST(WorkQueue, AddingAWaitingKeyIsANoOp) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.add("ns/a");
  queue.add("ns/b");
  queue.add("ns/a");
  EXPECT_EQ(queue.len(), 2U);
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  EXPECT_EQ(queue.tryGet(), key("ns/b"));
  EXPECT_EQ(queue.tryGet(), std::nullopt);
}

TEST(WorkQueue, AKeyIsNeverHandedToTwoWorkersAtOnce) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.add("ns/a");
  ASSERT_EQ(queue.tryGet(), key("ns/a"));

  queue.add("ns/a");  // changed while a worker reconciles it
  queue.add("ns/a");
  EXPECT_EQ(queue.len(), 0U);
  EXPECT_EQ(queue.tryGet(), std::nullopt);

  queue.done("ns/a");
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  queue.done("ns/a");
  EXPECT_EQ(queue.tryGet(), std::nullopt);
}

TEST(WorkQueue, DoneWithoutNewChangesDoesNotRequeue) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.add("ns/a");
  ASSERT_EQ(queue.tryGet(), key("ns/a"));
  queue.done("ns/a");
  EXPECT_EQ(queue.len(), 0U);
}

// --- addAfter -----------------------------------------------------------------------------------

TEST(WorkQueue, DelayedAddsBecomeReadyWhenTheClockPassesThem) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addAfter("ns/late", seconds(10));
  queue.addAfter("ns/soon", seconds(5));
  EXPECT_EQ(queue.tryGet(), std::nullopt);

  clock.advance(seconds(5));
  EXPECT_EQ(queue.tryGet(), key("ns/soon"));
  EXPECT_EQ(queue.tryGet(), std::nullopt);

  clock.advance(seconds(5));
  EXPECT_EQ(queue.tryGet(), key("ns/late"));
}

TEST(WorkQueue, TheSoonerOfTwoDelaysWins) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addAfter("ns/a", seconds(10));
  queue.addAfter("ns/a", seconds(2));
  queue.addAfter("ns/a", seconds(5));
  clock.advance(seconds(2));
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  queue.done("ns/a");
  clock.advance(seconds(10));
  EXPECT_EQ(queue.tryGet(), std::nullopt);
}

TEST(WorkQueue, AZeroDelayAddsAtOnce) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.addAfter("ns/a", seconds(0));
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
}

TEST(WorkQueue, ABlockedWorkerGetsADelayedKeyOnceTheClockPassesIt) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addAfter("ns/a", seconds(30));
  std::optional<std::string> got;
  std::thread worker([&] { got = queue.get(); });
  clock.advance(seconds(30));
  worker.join();
  EXPECT_EQ(got, key("ns/a"));
}

// --- rate limiting ------------------------------------------------------------------------------

TEST(WorkQueue, RateLimitedAddsBackOffPerKey) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addRateLimited("ns/a");
  EXPECT_EQ(queue.tryGet(), std::nullopt);
  clock.advance(milliseconds(5));
  ASSERT_EQ(queue.tryGet(), key("ns/a"));
  queue.done("ns/a");

  queue.addRateLimited("ns/a");
  clock.advance(milliseconds(9));
  EXPECT_EQ(queue.tryGet(), std::nullopt);
  clock.advance(milliseconds(1));
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  EXPECT_EQ(queue.numRequeues("ns/a"), 2);
}

TEST(WorkQueue, ForgetResetsTheBackoff) {
  FakeClock clock;
  WorkQueue queue(clock);
  queue.addRateLimited("ns/a");
  queue.addRateLimited("ns/a");
  queue.forget("ns/a");
  EXPECT_EQ(queue.numRequeues("ns/a"), 0);
}

TEST(WorkQueue, TheOverallLimitHoldsBackKeysPastTheBurst) {
  FakeClock clock;
  WorkQueue queue(clock, WorkQueueLimits{.qps = 1.0, .burst = 1});
  queue.addRateLimited("ns/a");
  queue.addRateLimited("ns/b");  // its own backoff is 5 ms, but the bucket is empty for 1 s
  clock.advance(milliseconds(5));
  EXPECT_EQ(queue.tryGet(), key("ns/a"));
  EXPECT_EQ(queue.tryGet(), std::nullopt);
  clock.advance(seconds(1));
  EXPECT_EQ(queue.tryGet(), key("ns/b"));
}

// --- shutDown -----------------------------------------------------------------------------------

TEST(WorkQueue, ShutDownWakesABlockedWorker) {
  const FakeClock clock;
  WorkQueue queue(clock);
  std::optional<std::string> got = "unset";
  std::thread worker([&] { got = queue.get(); });
  queue.shutDown();
  worker.join();
  EXPECT_EQ(got, std::nullopt);
}

TEST(WorkQueue, AddsAfterShutDownAreDropped) {
  const FakeClock clock;
  WorkQueue queue(clock);
  queue.shutDown();
  queue.add("ns/a");
  EXPECT_TRUE(queue.shuttingDown());
  EXPECT_EQ(queue.len(), 0U);
  EXPECT_EQ(queue.get(), std::nullopt);
}

}  // namespace
