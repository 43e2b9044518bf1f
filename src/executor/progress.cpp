#include "executor/progress.h"

#include <array>
#include <cstdio>
#include <ctime>

namespace autotune::executor {
namespace {

constexpr int kBarWidth = 24;

std::string clockTime() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::array<char, 16> text{};
  std::strftime(text.data(), text.size(), "%H:%M:%S", &local);
  return text.data();
}

}  // namespace

Progress::Progress(std::ostream& out, bool terminal, api::Metric metric)
    : out_(out), terminal_(terminal), metric_(metric) {}

void Progress::log(const std::string& line) {
  clearBar();
  out_ << clockTime() << ' ' << line << '\n';
  drawBar();
}

void Progress::update(const ProgressState& state) {
  state_ = state;
  clearBar();
  drawBar();
}

void Progress::finish() {
  clearBar();
  out_.flush();
}

void Progress::clearBar() {
  if (terminal_ && barShown_) {
    out_ << "\r\033[K";
    barShown_ = false;
  }
}

void Progress::drawBar() {
  if (!terminal_) {
    out_.flush();
    return;
  }
  const int planned = std::max(state_.planned, state_.finished);
  const int filled = planned == 0 ? 0 : kBarWidth * state_.finished / planned;
  const std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kBarWidth - filled), '.') + "]";
  std::string best = "none yet";
  if (state_.bestTrial && state_.bestValue) {
    std::array<char, 32> value{};
    std::snprintf(value.data(), value.size(), "%.4g", *state_.bestValue);
    best = *state_.bestTrial + " " + std::string(api::toString(metric_)) + " " + value.data();
  }
  out_ << bar << ' ' << state_.finished << '/' << planned << " trials, " << state_.running
       << " running, best " << best << ", " << elapsed();
  out_.flush();
  barShown_ = true;
}

std::string Progress::elapsed() const {
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count();
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%lld:%02lld:%02lld",
                static_cast<long long>(seconds / 3600), static_cast<long long>(seconds / 60 % 60),
                static_cast<long long>(seconds % 60));
  return text.data();
}

}  // namespace autotune::executor
