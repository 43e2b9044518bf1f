#include "runtime/rate_limiter.h"

#include <gtest/gtest.h>

#include <chrono>

#include "runtime/clock.h"

namespace {

using autotune::runtime::Duration;
using autotune::runtime::FakeClock;
using autotune::runtime::TokenBucket;
using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(TokenBucket, TokenBucketAllowsABurstThenQps) {
  FakeClock clock;
  TokenBucket bucket(clock, 10.0, 100);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(bucket.tryAcquire()) << "request " << i;
  }
  EXPECT_FALSE(bucket.tryAcquire());
  clock.advance(milliseconds(100));
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
}

TEST(TokenBucket, RefillsNoFurtherThanTheBurst) {
  FakeClock clock;
  TokenBucket bucket(clock, 10.0, 2);
  clock.advance(seconds(60));
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_TRUE(bucket.tryAcquire());
  EXPECT_FALSE(bucket.tryAcquire());
}

TEST(TokenBucket, ReservationsPastTheBurstAreSpacedOneOverQpsApart) {
  const FakeClock clock;
  TokenBucket bucket(clock, 10.0, 1);
  EXPECT_EQ(bucket.reserve(), Duration::zero());
  EXPECT_EQ(bucket.reserve(), milliseconds(100));
  EXPECT_EQ(bucket.reserve(), milliseconds(200));
}

TEST(TokenBucket, AReservedTokenIsNotHandedOutAgain) {
  FakeClock clock;
  TokenBucket bucket(clock, 10.0, 1);
  bucket.reserve();
  bucket.reserve();
  clock.advance(milliseconds(100));
  EXPECT_FALSE(bucket.tryAcquire());  // the token that came belongs to the reservation
  clock.advance(milliseconds(100));
  EXPECT_TRUE(bucket.tryAcquire());
}

}  // namespace
