#pragma once
// The command line and environment of one launch. A training script takes many flags the
// simulator does not know (--model_name_or_path x, --do_train): those are ignored, so the
// simulator can stand in for any script. Of Hugging Face's Trainer flags it reads the four that
// fill a DeepSpeed config's batch and precision "auto" values (trainer_config.h).

#include <chrono>
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
  std::optional<int> outOfMemoryRank;   // --oom-rank: this node rank runs out of memory
  // --run-micro-batch: a script that sets its own micro-batch, whatever the config says.
  std::optional<int> runMicroBatch;
  // --run-stage: a script that sets its own ZeRO stage (as one taking --zero_stage does).
  std::optional<int> runStage;
  // --no-effective-values: a script that does not report the values its engine ran.
  bool reportsEffectiveValues = true;
  std::chrono::milliseconds rendezvousTimeout{300'000};  // --rendezvous-timeout
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
  std::optional<std::string> numNodes;            // AUTOTUNE_NUM_NODES
  std::optional<std::string> nodeRank;            // AUTOTUNE_NODE_RANK
  std::optional<std::string> masterAddress;       // AUTOTUNE_MASTER_ADDR
  std::optional<std::string> masterPort;          // AUTOTUNE_MASTER_PORT
  std::optional<std::string> outOfMemoryRank;     // AUTOTUNE_SIM_OOM_RANK
  std::optional<std::string> gpuMemoryMiB;        // AUTOTUNE_SIM_GPU_MEMORY_MIB
};

// A launch over several nodes, one process per node, as the operator runs a trial with
// nodesPerTrial > 1: an Indexed Job whose Pod of index i is node rank i.
struct NodeGroup {
  static constexpr std::uint16_t kDefaultMasterPort = 29500;  // torch.distributed's default

  int nodes = 1;
  int rank = 0;
  std::string masterAddress;  // where rank 0 listens and the others connect
  std::uint16_t masterPort = kDefaultMasterPort;
};

// The arguments after the program name; the error is a usage error.
tl::expected<Options, std::string> parseArguments(const std::vector<std::string>& arguments);

// The DeepSpeed config file: from the arguments, else AUTOTUNE_DS_CONFIG.
std::optional<std::string> configPath(const Options& options, const Environment& environment);

// Where to record this launch: --launch-log, else AUTOTUNE_SIM_LAUNCH_LOG.
std::optional<std::string> launchLogPath(const Options& options, const Environment& environment);

// The line a launch appends to the launch log: its trial name, "-" when it has none.
std::string launchLine(const Environment& environment);

// The node group of AUTOTUNE_NUM_NODES, AUTOTUNE_NODE_RANK, AUTOTUNE_MASTER_ADDR and
// AUTOTUNE_MASTER_PORT (default 29500); nullopt for a single-node launch (AUTOTUNE_NUM_NODES unset
// or 1), which ignores the other three. The error is a usage error.
tl::expected<std::optional<NodeGroup>, std::string> nodeGroup(const Environment& environment);

// The GPUs of the whole launch: per node --num_gpus (DeepSpeed's launcher counts it per node),
// else the number of devices in CUDA_VISIBLE_DEVICES, times `nodes`; with neither, the profile's
// GPUs, which describe the whole launch already.
int worldSize(const Options& options, const Environment& environment, const Profile& profile,
              int nodes = 1);

// The node rank made to run out of memory: --oom-rank, else AUTOTUNE_SIM_OOM_RANK; nullopt when
// neither is given. The error is a usage error.
tl::expected<std::optional<int>, std::string> outOfMemoryRank(const Options& options,
                                                              const Environment& environment);

// The memory of each GPU in bytes, as the node's GPUs have it (AUTOTUNE_SIM_GPU_MEMORY_MIB, which
// the node simulator sets as a real GPU tells CUDA): nullopt when unset, the profile's then. The
// error is a usage error.
tl::expected<std::optional<double>, std::string> gpuMemoryBytes(const Environment& environment);

// AUTOTUNE_SIM_SEED as a number (0 when unset), or a usage error.
tl::expected<std::uint64_t, std::string> environmentSeed(const Environment& environment);

std::string usage();

}  // namespace autotune::trialsim
