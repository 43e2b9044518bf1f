#include "observability/log.h"

#include <algorithm>
#include <array>
#include <iostream>
#include <mutex>
#include <ostream>

#include "object/time.h"

namespace autotune::observability {
namespace {

constexpr std::array<std::string_view, 4> kLevelNames = {"debug", "info", "warn", "error"};
constexpr std::array<std::string_view, 3> kReserved = {"ts", "level", "msg"};

// Invalid UTF-8 (a Pod's log tail, say) is replaced rather than thrown about.
std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool reserved(std::string_view key) { return std::ranges::find(kReserved, key) != kReserved.end(); }

}  // namespace

struct Logger::Sink {
  Sink(std::ostream& out, Now now) : out(out), now(std::move(now)) {}

  std::mutex mutex;
  std::ostream& out;
  Now now;
};

tl::expected<LogLevel, std::string> parseLogLevel(std::string_view name) {
  for (std::size_t i = 0; i < kLevelNames.size(); ++i) {
    if (name == kLevelNames.at(i)) {
      return static_cast<LogLevel>(i);
    }
  }
  return tl::unexpected("unknown log level " + std::string(name) +
                        ": must be one of debug, info, warn, error");
}

std::string_view toString(LogLevel level) {
  return kLevelNames.at(static_cast<std::size_t>(level));
}

// Every logger on stdout shares one sink, so that their lines never interleave either.
Logger::Logger(LogLevel threshold) : threshold_(threshold) {
  static const auto stdoutSink =
      std::make_shared<Sink>(std::cout, [] { return std::chrono::system_clock::now(); });
  sink_ = stdoutSink;
}

Logger::Logger(LogLevel threshold, std::ostream& out, Now now)
    : threshold_(threshold), sink_(std::make_shared<Sink>(out, std::move(now))) {}

Logger Logger::with(std::initializer_list<Field> fields) const {
  Logger copy = *this;
  copy.context_.insert(copy.context_.end(), fields.begin(), fields.end());
  return copy;
}

void Logger::log(LogLevel level, std::string_view message,
                 std::initializer_list<Field> fields) const {
  if (!enabled(level)) {
    return;
  }
  // Later fields replace earlier ones of the same key; ts, level and msg are the logger's own.
  std::vector<const Field*> ordered;
  const auto add = [&](const Field& field) {
    if (reserved(field.key)) {
      return;
    }
    for (auto& kept : ordered) {
      if (kept->key == field.key) {
        kept = &field;
        return;
      }
    }
    ordered.push_back(&field);
  };
  for (const auto& field : context_) {
    add(field);
  }
  for (const auto& field : fields) {
    add(field);
  }

  std::string line = R"({"ts":")" +
                     object::formatTime(sink_->now(), object::Fraction::kMilliseconds) +
                     R"(","level":")" + std::string(toString(level)) + R"(","msg":)" +
                     dump(nlohmann::json(std::string(message)));
  for (const auto* field : ordered) {
    line += "," + dump(nlohmann::json(field->key)) + ":" + dump(field->value);
  }
  line += "}\n";

  const std::lock_guard lock(sink_->mutex);
  sink_->out << line;
  sink_->out.flush();
}

}  // namespace autotune::observability
