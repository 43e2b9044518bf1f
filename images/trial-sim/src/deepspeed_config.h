#pragma once
// The checks DeepSpeed's engine makes on a config before training, with DeepSpeed's own messages,
// and what the simulator needs from the config afterwards: the batch, the ZeRO stage and its
// offloading, and where the autotuning section wants results written.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>

namespace autotune::trialsim {

struct Parallelism {
  int worldSize = 1;      // GPUs in the launch
  int modelParallel = 1;  // tensor/pipeline degree
  int dataParallel() const { return worldSize / modelParallel; }
  // Whether model parallelism divides the world, as DeepSpeed requires.
  bool consistent() const {
    return worldSize >= 1 && modelParallel >= 1 && worldSize % modelParallel == 0;
  }
};

// What one launch trains, after DeepSpeed has derived the missing batch keys.
struct TrainingRun {
  int stage = 0;
  std::int64_t microBatch = 1;
  std::int64_t gradientAccumulation = 1;
  std::int64_t trainBatch = 1;
  bool offloadOptimizer = false;   // optimizer states on CPU or NVMe (ZeRO-1 and above)
  bool offloadParameters = false;  // parameters on CPU or NVMe (ZeRO-3)
  Parallelism parallelism;
};

// The autotuning section: what to write where.
struct AutotuningOutputs {
  bool profileModel = false;  // autotuning.model_info.profile: report the model, do not train
  std::string metricPath = "autotuning_metric.json";
  std::string modelInfoPath = "autotuning_model_info.json";
};

struct CheckedConfig {
  TrainingRun run;
  AutotuningOutputs outputs;
};

// The config as DeepSpeed would take it on `parallelism`, or DeepSpeed's assertion message
// ("AssertionError: ...").
tl::expected<CheckedConfig, std::string> checkConfig(const nlohmann::json& config,
                                                     const Parallelism& parallelism);

}  // namespace autotune::trialsim
