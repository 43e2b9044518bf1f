#pragma once
// `autotune run`: DeepSpeed's single-machine autotuning without pdsh, ssh or a hostfile. The same
// engine and job file as the operator, with each trial a local process on its own GPUs.

#include <optional>
#include <ostream>
#include <string>

namespace autotune::executor {

struct RunOptions {
  std::string jobFile;
  std::optional<std::string> gpus;  // --gpus; else CUDA_VISIBLE_DEVICES
  std::string resultsDirectory = "autotune_results";
  bool resume = false;         // insist on an earlier run to resume
  std::string toolsDirectory;  // put first on the trials' PATH (where trial-sim is installed)
  bool terminal = false;       // draw a progress bar
};

inline constexpr int kExitSearchFailed = 1;
inline constexpr int kExitBadInput = 2;

// Runs the job to its end. Returns 0 when the search found its best, 1 when it failed, 2 on bad
// input (nothing already recorded is touched), 128 + the signal when stopped by SIGINT or SIGTERM.
int runLocally(const RunOptions& options, std::ostream& out, std::ostream& err);

}  // namespace autotune::executor
