#pragma once
// The command line and environment of one launch. A training script takes many flags the
// simulator does not know (--model_name_or_path x, --do_train): those are ignored, so the
// simulator can stand in for any script. Of Hugging Face's Trainer flags it reads the four that
// fill a DeepSpeed config's batch and precision "auto" values (trainer_config.h).

#include <cstdint>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "profile.h"
#include "trainer_config.h"

namespace autotune::trialsim {

struct Options {
  std::optional<std::string> configPath;  // --deepspeed X or --deepspeed_config X
  std::optional<int> numGpus;             // --num_gpus
  int modelParallelSize = 1;              // --model_parallel_size
  double startupSeconds = 0;              // process start and model load
  double stepSeconds = 0;                 // extra time spent training
  std::optional<std::string> launchLog;
  std::optional<std::string> profileName;
  std::optional<std::string> profileFile;
  std::optional<std::string> failWith;  // act as a broken script with this error
  bool garbageMetrics = false;          // write a metrics file that is not JSON
  bool help = false;
  TrainerArguments trainer;  // --per_device_train_batch_size, --gradient_accumulation_steps,
                             // --fp16, --bf16
};

// The variables a launch reads; empty ones count as unset.
struct Environment {
  std::optional<std::string> deepspeedConfig;     // AUTOTUNE_DS_CONFIG
  std::optional<std::string> cudaVisibleDevices;  // CUDA_VISIBLE_DEVICES
  std::optional<std::string> launchLog;           // AUTOTUNE_SIM_LAUNCH_LOG
  std::optional<std::string> trial;               // AUTOTUNE_TRIAL
  std::optional<std::string> seed;                // AUTOTUNE_SIM_SEED
};

// The arguments after the program name; the error is a usage error.
tl::expected<Options, std::string> parseArguments(const std::vector<std::string>& arguments);

// The DeepSpeed config file: from the arguments, else AUTOTUNE_DS_CONFIG.
std::optional<std::string> configPath(const Options& options, const Environment& environment);

// Where to record this launch: --launch-log, else AUTOTUNE_SIM_LAUNCH_LOG.
std::optional<std::string> launchLogPath(const Options& options, const Environment& environment);

// The line a launch appends to the launch log: its trial name, "-" when it has none.
std::string launchLine(const Environment& environment);

// --num_gpus, else the number of devices in CUDA_VISIBLE_DEVICES, else the profile's GPUs.
int worldSize(const Options& options, const Environment& environment, const Profile& profile);

// AUTOTUNE_SIM_SEED as a number (0 when unset), or a usage error.
tl::expected<std::uint64_t, std::string> environmentSeed(const Environment& environment);

std::string usage();

}  // namespace autotune::trialsim
