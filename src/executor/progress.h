#pragma once
// What a local run tells its user: on a terminal, a progress bar (trials finished / planned,
// running, best so far, elapsed) under the log lines; otherwise plain log lines only.

#include <chrono>
#include <optional>
#include <ostream>
#include <string>

#include "api/job.h"

namespace autotune::executor {

struct ProgressState {
  int finished = 0;
  int planned = 0;
  int running = 0;
  std::optional<std::string> bestTrial;
  std::optional<double> bestValue;
};

class Progress {
 public:
  Progress(std::ostream& out, bool terminal, api::Metric metric);

  // A line of the run's log, e.g. "Launched trial z1_gas1_tmbspg3 gpus=0-15".
  void log(const std::string& line);
  void update(const ProgressState& state);
  // Leaves the terminal on a fresh line.
  void finish();

 private:
  void clearBar();
  void drawBar();
  std::string elapsed() const;

  std::ostream& out_;
  bool terminal_;
  api::Metric metric_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  ProgressState state_;
  bool barShown_ = false;
};

}  // namespace autotune::executor
