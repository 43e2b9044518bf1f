#include "runtime/backoff.h"

#include <gtest/gtest.h>

#include <chrono>

#include "runtime/clock.h"

namespace {

using autotune::runtime::ExponentialBackoff;
using autotune::runtime::FakeClock;
using autotune::runtime::JitteredBackoff;
using autotune::runtime::JitteredBackoffOptions;
using std::chrono::milliseconds;
using std::chrono::seconds;

// --- ExponentialBackoff -------------------------------------------------------------------------

TEST(ExponentialBackoff, BackoffDoublesFrom5msAndCapsAt1000s) {
  ExponentialBackoff backoff;
  EXPECT_EQ(backoff.when("ns/a"), milliseconds(5));
  EXPECT_EQ(backoff.when("ns/a"), milliseconds(10));
  EXPECT_EQ(backoff.when("ns/a"), milliseconds(20));
  for (int i = 0; i < 100; ++i) {
    backoff.when("ns/a");
  }
  EXPECT_EQ(backoff.when("ns/a"), seconds(1000));
  EXPECT_EQ(backoff.failures("ns/a"), 104);
}

TEST(ExponentialBackoff, KeysBackOffIndependently) {
  ExponentialBackoff backoff;
  backoff.when("ns/a");
  backoff.when("ns/a");
  EXPECT_EQ(backoff.when("ns/b"), milliseconds(5));
  EXPECT_EQ(backoff.failures("ns/a"), 2);
}

TEST(ExponentialBackoff, ForgetResetsTheBackoff) {
  ExponentialBackoff backoff;
  backoff.when("ns/a");
  backoff.when("ns/a");
  backoff.forget("ns/a");
  EXPECT_EQ(backoff.failures("ns/a"), 0);
  EXPECT_EQ(backoff.when("ns/a"), milliseconds(5));
}

// --- JitteredBackoff ----------------------------------------------------------------------------

JitteredBackoff withoutJitter(const FakeClock& clock) {
  return JitteredBackoff(clock, JitteredBackoffOptions{}, [] { return 0.0; });
}

TEST(JitteredBackoff, GrowsFrom800msAndCapsAt30s) {
  const FakeClock clock;
  auto backoff = withoutJitter(clock);
  EXPECT_EQ(backoff.next(), milliseconds(800));
  EXPECT_EQ(backoff.next(), milliseconds(1600));
  EXPECT_EQ(backoff.next(), milliseconds(3200));
  for (int i = 0; i < 10; ++i) {
    backoff.next();
  }
  EXPECT_EQ(backoff.next(), seconds(30));
}

TEST(JitteredBackoff, JitterStretchesTheDelayByUpToItsFactor) {
  const FakeClock clock;
  JitteredBackoff backoff(clock, JitteredBackoffOptions{}, [] { return 0.5; });
  EXPECT_EQ(backoff.next(), milliseconds(1200));
  EXPECT_EQ(backoff.next(), milliseconds(2400));
}

TEST(JitteredBackoff, DefaultRandomStaysWithinTheJitter) {
  const FakeClock clock;
  JitteredBackoff backoff(clock);
  const auto delay = backoff.next();
  EXPECT_GE(delay, milliseconds(800));
  EXPECT_LT(delay, milliseconds(1600));
}

TEST(JitteredBackoff, JitteredBackoffResetsAfterAHealthyPeriod) {
  FakeClock clock;
  auto backoff = withoutJitter(clock);
  backoff.next();
  backoff.next();
  clock.advance(seconds(119));
  EXPECT_EQ(backoff.next(), milliseconds(3200));  // a short spell up: still failing
  clock.advance(seconds(120));
  EXPECT_EQ(backoff.next(), milliseconds(800));
}

}  // namespace
