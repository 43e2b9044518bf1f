#pragma once
// Structured logs: one JSON object a line, {"ts": RFC 3339 UTC with milliseconds, "level", "msg",
// then the fields}, e.g.
//   {"ts":"2026-03-01T12:00:00.042Z","level":"info","msg":"Pod created","job":"gpt2","trial":"z1"}
// Lines below the threshold are dropped. Safe to share between threads: each line is written
// whole, never interleaved with another.

#include <chrono>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace autotune::observability {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

// "debug", "info", "warn" or "error", as --log-level takes them.
tl::expected<LogLevel, std::string> parseLogLevel(std::string_view name);
std::string_view toString(LogLevel level);

// A key and a string, number or boolean value: {"job", name}, {"trial", 3}.
struct Field {
  Field(std::string_view key, nlohmann::json value) : key(key), value(std::move(value)) {}

  std::string key;
  nlohmann::json value;
};

class Logger {
 public:
  using Now = std::function<std::chrono::system_clock::time_point()>;

  // Writes to stdout.
  explicit Logger(LogLevel threshold = LogLevel::kInfo);
  // Writes to `out`, which must outlive every copy of this logger; `now` stamps each line.
  Logger(
      LogLevel threshold, std::ostream& out,
      Now now = [] { return std::chrono::system_clock::now(); });

  // A logger that adds `fields` to every line, e.g. the job and reconcileID of one reconcile.
  // It writes to the same stream, under the same lock.
  Logger with(std::initializer_list<Field> fields) const;

  bool enabled(LogLevel level) const { return level >= threshold_; }
  void log(LogLevel level, std::string_view message,
           std::initializer_list<Field> fields = {}) const;
  void debug(std::string_view message, std::initializer_list<Field> fields = {}) const {
    log(LogLevel::kDebug, message, fields);
  }
  void info(std::string_view message, std::initializer_list<Field> fields = {}) const {
    log(LogLevel::kInfo, message, fields);
  }
  void warn(std::string_view message, std::initializer_list<Field> fields = {}) const {
    log(LogLevel::kWarn, message, fields);
  }
  void error(std::string_view message, std::initializer_list<Field> fields = {}) const {
    log(LogLevel::kError, message, fields);
  }

 private:
  struct Sink;

  LogLevel threshold_;
  std::shared_ptr<Sink> sink_;
  std::vector<Field> context_;
};

}  // namespace autotune::observability
