#include "api/units.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>

namespace autotune::api {
namespace {

using std::chrono::milliseconds;

constexpr std::int64_t kGi = 1024LL * 1024 * 1024;

std::int64_t bytes(std::string_view text) {
  const auto quantity = Quantity::parse(text);
  EXPECT_TRUE(quantity.has_value()) << text;
  return quantity ? quantity->value() : -1;
}

std::chrono::milliseconds span(std::string_view text) {
  const auto duration = Duration::parse(text);
  EXPECT_TRUE(duration.has_value()) << text;
  return duration ? duration->value() : milliseconds(-1);
}

TEST(Quantity, PlainNumbersAreBytes) {
  EXPECT_EQ(bytes("0"), 0);
  EXPECT_EQ(bytes("34359738368"), 32 * kGi);
  EXPECT_EQ(bytes("9223372036854775807"), INT64_MAX);
}

TEST(Quantity, BinarySuffixesArePowersOf1024) {
  EXPECT_EQ(bytes("1Ki"), 1024);
  EXPECT_EQ(bytes("1Mi"), 1024 * 1024);
  EXPECT_EQ(bytes("32Gi"), 32 * kGi);
  EXPECT_EQ(bytes("2Ti"), 2048 * kGi);
  EXPECT_EQ(bytes("1Pi"), 1024 * 1024 * kGi);
  EXPECT_EQ(bytes("1Ei"), 1024LL * 1024 * 1024 * kGi);
}

TEST(Quantity, DecimalSuffixesArePowersOf1000) {
  EXPECT_EQ(bytes("1k"), 1000);
  EXPECT_EQ(bytes("80G"), 80'000'000'000);
  EXPECT_EQ(bytes("3M"), 3'000'000);
  EXPECT_EQ(bytes("1T"), 1'000'000'000'000);
  EXPECT_EQ(bytes("1P"), 1'000'000'000'000'000);
  EXPECT_EQ(bytes("2E"), 2'000'000'000'000'000'000);
}

TEST(Quantity, FractionsAreExactAndRoundDown) {
  EXPECT_EQ(bytes("1.5Gi"), 3 * kGi / 2);
  EXPECT_EQ(bytes("0.5Ki"), 512);
  EXPECT_EQ(bytes("1.0001k"), 1000);
  EXPECT_EQ(bytes("2.9"), 2);
  EXPECT_EQ(bytes(".5k"), 500);
}

TEST(Quantity, ExponentsAreDecimal) {
  EXPECT_EQ(bytes("34e9"), 34'000'000'000);
  EXPECT_EQ(bytes("1.5E3"), 1500);
  EXPECT_EQ(bytes("5e+2"), 500);
  EXPECT_EQ(bytes("12e-1"), 1);
}

TEST(Quantity, KeepsTheTextTheUserWrote) {
  EXPECT_EQ(Quantity::parse("32Gi")->text(), "32Gi");
  EXPECT_EQ(Quantity::fromValue(1024).text(), "1024");
  EXPECT_EQ(Quantity::fromValue(1024).value(), 1024);
  EXPECT_EQ(Quantity::parse(Quantity::fromValue(32 * kGi).text())->value(), 32 * kGi);
}

TEST(Quantity, RejectsWhatIsNotAQuantity) {
  for (const std::string_view text :
       {"", "-1", "-1Gi", "Gi", "32 Gi", " 32Gi", "32gi", "32GB", "32Gii", "1.2.3", "abc", "1e",
        "e9", "1e9Gi", "0x10", "+", ".", "1.5.Gi"}) {
    const auto quantity = Quantity::parse(text);
    ASSERT_FALSE(quantity.has_value()) << '"' << text << '"';
    EXPECT_EQ(quantity.error(), "must be a quantity such as 32Gi or 34359738368");
  }
}

TEST(Quantity, RejectsWhatDoesNotFitIn64Bits) {
  for (const std::string_view text :
       {"9223372036854775808", "8Ei", "10E", "1e19", "99999999999999999999999999999999999999999"}) {
    EXPECT_FALSE(Quantity::parse(text).has_value()) << text;
  }
  EXPECT_EQ(bytes("7Ei"), 7 * 1024LL * 1024 * 1024 * kGi);
}

TEST(Duration, ReadsGoStyleDurations) {
  EXPECT_EQ(span("90s"), milliseconds(90'000));
  EXPECT_EQ(span("30m"), milliseconds(30 * 60'000));
  EXPECT_EQ(span("1h"), milliseconds(3'600'000));
  EXPECT_EQ(span("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(span("1.5h"), milliseconds(5'400'000));
  EXPECT_EQ(span("250ms"), milliseconds(250));
  EXPECT_EQ(span("1m30s500ms"), milliseconds(90'500));
  EXPECT_EQ(span("0s"), milliseconds(0));
  EXPECT_EQ(span(".5s"), milliseconds(500));
}

TEST(Duration, KeepsTheTextTheUserWrote) {
  EXPECT_EQ(Duration::parse("1h30m")->text(), "1h30m");
  EXPECT_DOUBLE_EQ(Duration::parse("1h30m")->seconds(), 5400.0);
}

TEST(Duration, FromSecondsWritesCanonicalTextThatParsesBack) {
  EXPECT_EQ(Duration::fromSeconds(5400).text(), "1h30m");
  EXPECT_EQ(Duration::fromSeconds(90).text(), "1m30s");
  EXPECT_EQ(Duration::fromSeconds(1.5).text(), "1s500ms");
  EXPECT_EQ(Duration::fromSeconds(0).text(), "0s");
  EXPECT_EQ(Duration::fromSeconds(3600).text(), "1h");
  for (const double seconds : {0.0, 0.25, 59.0, 61.0, 3601.5, 86400.0 * 3}) {
    const Duration duration = Duration::fromSeconds(seconds);
    EXPECT_DOUBLE_EQ(Duration::parse(duration.text())->seconds(), seconds) << duration.text();
  }
}

TEST(Duration, RejectsWhatIsNotADuration) {
  for (const std::string_view text : {"", "30", "-30m", "30 m", "30min", "1d", "h", "1h30",
                                      "1.2.3s", "30M", "1h 30m", "m30", "1us", "abc"}) {
    const auto duration = Duration::parse(text);
    ASSERT_FALSE(duration.has_value()) << '"' << text << '"';
    EXPECT_EQ(duration.error(), "must be a duration such as 30m or 1h30m");
  }
}

TEST(Duration, RejectsWhatDoesNotFitIn64Bits) {
  EXPECT_FALSE(Duration::parse("9999999999999999999h").has_value());
  EXPECT_FALSE(Duration::parse("2562047788016h").has_value());
}

}  // namespace
}  // namespace autotune::api
