#include "executor/gpu_slots.h"

#include <gtest/gtest.h>

#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

using autotune::executor::deviceList;
using autotune::executor::GpuSlots;
using autotune::executor::parseGpuList;
using autotune::executor::rangeList;
using Ids = std::vector<int>;

Ids upTo(int count) {
  Ids ids(static_cast<std::size_t>(count));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// --- parseGpuList -------------------------------------------------------------------------------

TEST(ParseGpuList, ARangeGivesEveryIdInIt) {
  const auto gpus = parseGpuList("0-15");
  ASSERT_TRUE(gpus.has_value()) << gpus.error();
  EXPECT_EQ(*gpus, upTo(16));
}

TEST(ParseGpuList, AListGivesTheIdsInTheOrderGiven) {
  const auto gpus = parseGpuList("0,1,2");
  ASSERT_TRUE(gpus.has_value()) << gpus.error();
  EXPECT_EQ(*gpus, (Ids{0, 1, 2}));

  const auto reordered = parseGpuList("3,1");
  ASSERT_TRUE(reordered.has_value()) << reordered.error();
  EXPECT_EQ(*reordered, (Ids{3, 1}));
}

TEST(ParseGpuList, RangesAndSingleIdsCombine) {
  const auto gpus = parseGpuList("0-3,8-11");
  ASSERT_TRUE(gpus.has_value()) << gpus.error();
  EXPECT_EQ(*gpus, (Ids{0, 1, 2, 3, 8, 9, 10, 11}));

  const auto mixed = parseGpuList("5,0-1");
  ASSERT_TRUE(mixed.has_value()) << mixed.error();
  EXPECT_EQ(*mixed, (Ids{5, 0, 1}));
}

TEST(ParseGpuList, AnEmptyListIsRefused) {
  const auto gpus = parseGpuList("");
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error(), "the GPU list is empty");
}

TEST(ParseGpuList, SomethingThatIsNotAnIdIsRefusedByName) {
  const auto gpus = parseGpuList("a");
  ASSERT_FALSE(gpus.has_value());
  EXPECT_NE(gpus.error().find("\"a\""), std::string::npos) << gpus.error();

  EXPECT_FALSE(parseGpuList("0,x").has_value());
  EXPECT_FALSE(parseGpuList("1.5").has_value());
}

TEST(ParseGpuList, ABackwardRangeIsRefused) {
  const auto gpus = parseGpuList("3-1");
  ASSERT_FALSE(gpus.has_value());
  EXPECT_NE(gpus.error().find("\"3-1\""), std::string::npos) << gpus.error();
}

TEST(ParseGpuList, AnIdListedTwiceIsRefused) {
  const auto gpus = parseGpuList("0,0");
  ASSERT_FALSE(gpus.has_value());
  EXPECT_EQ(gpus.error(), "GPU 0 is listed twice");

  EXPECT_FALSE(parseGpuList("0-3,2").has_value());
}

TEST(ParseGpuList, ANegativeIdIsRefused) {
  const auto gpus = parseGpuList("-1");
  ASSERT_FALSE(gpus.has_value());
  EXPECT_NE(gpus.error().find("\"-1\""), std::string::npos) << gpus.error();
}

// --- deviceList and rangeList -------------------------------------------------------------------

TEST(DeviceList, JoinsIdsWithCommasAsCudaVisibleDevicesWantsThem) {
  EXPECT_EQ(deviceList({0, 1, 2}), "0,1,2");
  EXPECT_EQ(deviceList({8, 3}), "8,3");
  EXPECT_EQ(deviceList({5}), "5");
  EXPECT_EQ(deviceList({}), "");
}

TEST(RangeList, WritesConsecutiveIdsAsRanges) {
  EXPECT_EQ(rangeList(upTo(16)), "0-15");
  EXPECT_EQ(rangeList({0, 1, 2, 3, 8}), "0-3,8");
  EXPECT_EQ(rangeList({0, 1, 2, 3, 8, 9, 10, 11}), "0-3,8-11");
  EXPECT_EQ(rangeList({4}), "4");
  EXPECT_EQ(rangeList({1, 3, 5}), "1,3,5");
}

TEST(RangeList, ReadsBackAsTheSameIds) {
  for (const Ids& gpus : {upTo(16), Ids{0, 1, 2, 3, 8}, Ids{2, 7, 8, 9}}) {
    const auto parsed = parseGpuList(rangeList(gpus));
    ASSERT_TRUE(parsed.has_value()) << parsed.error();
    EXPECT_EQ(*parsed, gpus);
  }
}

// --- GpuSlots -----------------------------------------------------------------------------------

TEST(GpuSlots, StartsWithEveryGpuFree) {
  const GpuSlots slots(upTo(8));
  EXPECT_EQ(slots.total(), 8);
  EXPECT_EQ(slots.free(), 8);
}

TEST(GpuSlots, HandsOutTheLowestFreeIdsFirst) {
  GpuSlots slots(upTo(8));
  EXPECT_EQ(slots.acquire(2), (Ids{0, 1}));
  EXPECT_EQ(slots.acquire(3), (Ids{2, 3, 4}));
  EXPECT_EQ(slots.free(), 3);
  EXPECT_EQ(slots.total(), 8);
}

TEST(GpuSlots, GivesNothingWhenTooFewAreFree) {
  GpuSlots slots(upTo(4));
  ASSERT_TRUE(slots.acquire(3).has_value());
  EXPECT_EQ(slots.acquire(2), std::nullopt);
  EXPECT_EQ(slots.free(), 1);
  EXPECT_EQ(slots.acquire(1), (Ids{3}));
  EXPECT_EQ(slots.acquire(1), std::nullopt);
}

TEST(GpuSlots, NeverGivesMoreThanItHas) {
  GpuSlots slots(upTo(4));
  EXPECT_EQ(slots.acquire(5), std::nullopt);
  EXPECT_EQ(slots.free(), 4);
}

TEST(GpuSlots, ReleasedGpusAreHandedOutAgainInIdOrder) {
  GpuSlots slots(upTo(6));
  const auto first = slots.acquire(2);   // 0,1
  const auto second = slots.acquire(2);  // 2,3
  const auto third = slots.acquire(2);   // 4,5
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(slots.free(), 0);

  slots.release(*third);
  slots.release(*first);
  EXPECT_EQ(slots.free(), 4);
  EXPECT_EQ(slots.acquire(3), (Ids{0, 1, 4}));
  EXPECT_EQ(slots.acquire(1), (Ids{5}));
  EXPECT_EQ(slots.free(), 0);
}

TEST(GpuSlots, HandsOutGpusInTheOrderTheListGaveThem) {
  GpuSlots slots({8, 9, 0, 1});
  EXPECT_EQ(slots.acquire(2), (Ids{8, 9}));
  const auto rest = slots.acquire(2);
  ASSERT_TRUE(rest.has_value());
  EXPECT_EQ(*rest, (Ids{0, 1}));
  slots.release(*rest);
  slots.release({9, 8});
  EXPECT_EQ(slots.acquire(4), (Ids{8, 9, 0, 1}));
}

TEST(GpuSlots, ReleasingTwiceDoesNotMakeAGpuFreeTwice) {
  GpuSlots slots(upTo(2));
  const auto gpus = slots.acquire(1);
  ASSERT_TRUE(gpus.has_value());
  slots.release(*gpus);
  slots.release(*gpus);
  EXPECT_EQ(slots.free(), 2);
  EXPECT_EQ(slots.acquire(2), (Ids{0, 1}));
}

}  // namespace
