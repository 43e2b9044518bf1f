// JSON log lines: their shape, the level threshold, context fields, and whole lines under
// concurrent writers.

#include "observability/log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "object/time.h"

namespace autotune::observability {
namespace {

using nlohmann::json;

// 2026-03-01T12:00:00.042Z
const auto kFixedTime =
    std::chrono::system_clock::time_point(std::chrono::milliseconds(1772366400042));

std::vector<json> parseLines(const std::string& text) {
  std::vector<json> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) {
    lines.push_back(json::parse(line));
  }
  return lines;
}

TEST(Log, EachLineIsOneJsonObjectWithTimeLevelMessageAndFields) {
  std::ostringstream out;
  const Logger logger(LogLevel::kInfo, out, [] { return kFixedTime; });
  logger.info("Trial launched", {{"job", "gpt2"}, {"trial", "z1-gas1-tmbspg3"}, {"gpus", 16}});
  logger.error("Status write failed", {{"retryable", true}, {"seconds", 0.5}});

  EXPECT_EQ(out.str().substr(0, out.str().find('\n')),
            R"({"ts":"2026-03-01T12:00:00.042Z","level":"info","msg":"Trial launched",)"
            R"("job":"gpt2","trial":"z1-gas1-tmbspg3","gpus":16})");
  const auto lines = parseLines(out.str());
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_EQ(lines[1]["retryable"], true);
  EXPECT_EQ(lines[1]["seconds"], 0.5);
}

TEST(Log, TimestampsAreRfc3339InUtcWithMilliseconds) {
  EXPECT_EQ(object::formatTime(kFixedTime, object::Fraction::kMilliseconds),
            "2026-03-01T12:00:00.042Z");
  EXPECT_EQ(
      object::formatTime(std::chrono::system_clock::time_point{}, object::Fraction::kMilliseconds),
      "1970-01-01T00:00:00.000Z");
  std::ostringstream out;
  Logger(LogLevel::kInfo, out).info("Started");
  EXPECT_TRUE(std::regex_match(parseLines(out.str()).at(0)["ts"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
}

TEST(Log, LinesBelowTheThresholdAreDropped) {
  std::ostringstream out;
  const Logger logger(LogLevel::kWarn, out);
  logger.debug("Cache updated");
  logger.info("Reconciled");
  logger.warn("Watch restarted");
  logger.error("Lost the lease");
  const auto lines = parseLines(out.str());
  ASSERT_EQ(lines.size(), 2U);
  EXPECT_EQ(lines[0]["level"], "warn");
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_FALSE(logger.enabled(LogLevel::kInfo));
}

TEST(Log, LevelsParseByNameAndUnknownNamesAreErrors) {
  EXPECT_EQ(parseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_EQ(parseLogLevel("info"), LogLevel::kInfo);
  EXPECT_EQ(parseLogLevel("warn"), LogLevel::kWarn);
  EXPECT_EQ(parseLogLevel("error"), LogLevel::kError);
  const auto unknown = parseLogLevel("verbose");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("verbose"), std::string::npos);
  EXPECT_FALSE(parseLogLevel("INFO"));
}

TEST(Log, ContextFieldsGoOnEveryLineAndLaterFieldsWin) {
  std::ostringstream out;
  const Logger logger(LogLevel::kDebug, out);
  const Logger reconcile = logger.with({{"job", "ml/gpt2"}, {"reconcileID", "7f3a"}});
  reconcile.info("Pod created", {{"trial", "z0"}});
  reconcile.info("Retried", {{"reconcileID", "7f3b"}, {"msg", "ignored"}, {"level", "ignored"}});
  logger.info("Unrelated");

  const auto lines = parseLines(out.str());
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[0]["job"], "ml/gpt2");
  EXPECT_EQ(lines[0]["reconcileID"], "7f3a");
  EXPECT_EQ(lines[0]["trial"], "z0");
  EXPECT_EQ(lines[1]["reconcileID"], "7f3b");
  EXPECT_EQ(lines[1]["msg"], "Retried");
  EXPECT_EQ(lines[1]["level"], "info");
  EXPECT_FALSE(lines[2].contains("job"));
}

TEST(Log, TextThatIsNotUtf8IsReplacedNotThrown) {
  std::ostringstream out;
  const Logger logger(LogLevel::kInfo, out);
  logger.info("Trial failed", {{"tail", std::string("bad \xff byte")}});
  EXPECT_EQ(parseLines(out.str()).at(0)["tail"], "bad \xEF\xBF\xBD byte");
}

TEST(Log, LinesFromManyThreadsNeverInterleave) {
  constexpr int kThreads = 4;
  constexpr int kLines = 500;
  std::ostringstream out;
  const Logger logger(LogLevel::kInfo, out);
  {
    std::vector<std::jthread> writers;
    for (int t = 0; t < kThreads; ++t) {
      writers.emplace_back([&logger, t] {
        const Logger mine = logger.with({{"writer", t}});
        for (int i = 0; i < kLines; ++i) {
          mine.info("A line long enough to be written in more than one piece by a careless logger",
                    {{"i", i}, {"padding", std::string(200, static_cast<char>('a' + t))}});
        }
      });
    }
  }
  std::vector<int> seen(kThreads, 0);
  std::istringstream stream(out.str());
  int count = 0;
  for (std::string line; std::getline(stream, line); ++count) {
    const json parsed = json::parse(line, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << line;
    const int writer = parsed["writer"];
    EXPECT_EQ(parsed["i"], seen.at(writer)++);
    EXPECT_EQ(parsed["padding"], std::string(200, static_cast<char>('a' + writer)));
  }
  EXPECT_EQ(count, kThreads * kLines);
}

}  // namespace
}  // namespace autotune::observability
