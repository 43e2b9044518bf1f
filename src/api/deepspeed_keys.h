#pragma once
// The DeepSpeed config keys the operator reads or writes, spelled in one place, and DeepSpeed's
// defaults for those it fills in.

#include <string_view>

namespace autotune::api {

// The keys each trial sets itself.
inline constexpr std::string_view kMicroBatchKey = "train_micro_batch_size_per_gpu";
inline constexpr std::string_view kGradientAccumulationKey = "gradient_accumulation_steps";
inline constexpr std::string_view kTrainBatchKey = "train_batch_size";
inline constexpr std::string_view kZeroKey = "zero_optimization";
inline constexpr std::string_view kStageKey = "stage";  // in zero_optimization
inline constexpr std::string_view kZeroStagePath = "zero_optimization.stage";

// Keys the memory model and DeepSpeed's consistency rules read.
inline constexpr std::string_view kOffloadParamKey = "offload_param";  // in zero_optimization
inline constexpr std::string_view kOffloadOptimizerKey =
    "offload_optimizer";  // in zero_optimization
inline constexpr std::string_view kOptimizerKey = "optimizer";
inline constexpr std::string_view kForceDeepSpeedCpuOptimizerKey = "zero_force_ds_cpu_optimizer";
inline constexpr std::string_view kFp16Key = "fp16";
inline constexpr std::string_view kBf16Key = "bf16";
inline constexpr std::string_view kBfloat16Key = "bfloat16";  // bf16's older spelling
inline constexpr std::string_view kEnabledKey = "enabled";    // in fp16, bf16 and autotuning

// DeepSpeed's autotuning section: it configures the tuner and, in each trial, the trial protocol.
inline constexpr std::string_view kAutotuningKey = "autotuning";
inline constexpr std::string_view kModelInfoKey = "model_info";
inline constexpr std::string_view kModelInfoPathKey = "model_info_path";
inline constexpr std::string_view kMetricPathKey = "metric_path";
inline constexpr std::string_view kStartProfileStepKey = "start_profile_step";
inline constexpr std::string_view kEndProfileStepKey = "end_profile_step";
// DeepSpeed profiles steps 3 to 5 unless the section says otherwise.
inline constexpr int kDefaultStartProfileStep = 3;
inline constexpr int kDefaultEndProfileStep = 5;

}  // namespace autotune::api
