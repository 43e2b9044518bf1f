#pragma once
// What one launch ends with, decided without I/O: the model report of a profiling run, an
// out-of-memory failure, or the metrics of the profiled steps. The caller writes the files.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "deepspeed_config.h"
#include "model.h"
#include "profile.h"

namespace autotune::trialsim {

// autotuning.model_info.profile: DeepSpeed writes this during the first forward and exits.
struct ModelReport {
  std::int64_t numParameters = 0;
  double activationBytesPerGpu = 0;
};

struct OutOfMemory {
  std::string message;  // PyTorch's text
};

using LaunchResult = std::variant<ModelReport, OutOfMemory, Measurement>;

LaunchResult simulate(const Profile& profile, const CheckedConfig& config,
                      std::uint64_t environmentSeed);

// The error of a run that runs out of memory whatever its micro-batch: a stage of the profile's
// failingStages, or a node made to fail with --oom-rank.
OutOfMemory outOfMemoryAnyway(const Profile& profile, const TrainingRun& run);

// {"num_params", "trainable_num_params", "activation_mem_per_gpu", "rank"}, as DeepSpeed writes.
nlohmann::json toJson(const ModelReport& report);
// {"fwd", "bwd", "step", "latency", "FLOPS_per_gpu", "throughput", "rank"}, as DeepSpeed writes.
nlohmann::json toJson(const Measurement& measurement);
// What a trial adds to its metrics as "effective": the values DeepSpeed's engine ran `run` with,
// as a script reads them back from it (docs/trial-protocol.md).
nlohmann::json effectiveValues(const TrainingRun& run);

// PyTorch's error for an allocation that did not fit: `needed` bytes on a GPU of `capacity`.
std::string outOfMemoryMessage(double capacity, double needed);

}  // namespace autotune::trialsim
