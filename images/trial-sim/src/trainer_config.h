#pragma once
// What Hugging Face's Trainer does to a DeepSpeed config before DeepSpeed reads it
// (transformers' HfTrainerDeepSpeedConfig): it fills the "auto" values from its own flags and
// defaults, and refuses batch values that disagree with the flags. A launch without any of the
// Trainer's flags below is a plain DeepSpeed script, whose config DeepSpeed reads as written.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "deepspeed_config.h"

namespace autotune::trialsim {

// The fields of the Trainer's TrainingArguments that fill DeepSpeed's batch and precision keys,
// as given on the command line (unset: not given).
struct TrainerArguments {
  std::optional<int> perDeviceTrainBatchSize;    // --per_device_train_batch_size
  std::optional<int> gradientAccumulationSteps;  // --gradient_accumulation_steps
  std::optional<bool> fp16;                      // --fp16
  std::optional<bool> bf16;                      // --bf16

  bool givesABatch() const { return perDeviceTrainBatchSize || gradientAccumulationSteps; }
  bool given() const { return givesABatch() || fp16 || bf16; }
};

// The config as the Trainer hands it to DeepSpeed on `parallelism`: "auto" batch and precision
// keys replaced by the Trainer's values (a flag not given takes the Trainer's default: 8 samples
// per device, 1 accumulation step, no fp16 or bf16), every other key as written. Without Trainer
// arguments, `config` itself. The error is the Trainer's ("ValueError: Please correct the
// following DeepSpeed config values that mismatch TrainingArguments values: ...").
tl::expected<nlohmann::json, std::string> applyTrainerArguments(const nlohmann::json& config,
                                                                const TrainerArguments& trainer,
                                                                const Parallelism& parallelism);

}  // namespace autotune::trialsim
