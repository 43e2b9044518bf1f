#include "deepspeed_config.h"

#include <limits>
#include <optional>
#include <string_view>

namespace autotune::trialsim {
namespace {

using Error = tl::unexpected<std::string>;

constexpr std::string_view kTrainBatch = "train_batch_size";
constexpr std::string_view kMicroBatch = "train_micro_batch_size_per_gpu";
constexpr std::string_view kAccumulation = "gradient_accumulation_steps";

Error assertionError(const std::string& message) { return Error("AssertionError: " + message); }

// A batch key's integer value, nothing when absent or null (DeepSpeed's None). Anything else is
// refused the way Python refuses "auto" or 2.5 in integer arithmetic. Values beyond 32 bits are
// refused too, so that the batch products below cannot overflow.
tl::expected<std::optional<std::int64_t>, std::string> batchValue(const nlohmann::json& config,
                                                                  std::string_view key) {
  const auto found = config.find(key);
  if (found == config.end() || found->is_null()) {
    return std::nullopt;
  }
  const bool integer = found->is_number_integer() &&
                       found->get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max() &&
                       found->get<std::int64_t>() >= std::numeric_limits<std::int32_t>::min();
  if (!integer) {
    return assertionError(std::string(key) + " must be an integer, got " + found->dump());
  }
  return found->get<std::int64_t>();
}

// Python's `//`, which rounds towards negative infinity; nothing for a zero divisor, where Python
// raises ZeroDivisionError.
std::optional<std::int64_t> floorDivide(std::int64_t dividend, std::int64_t divisor) {
  if (divisor == 0) {
    return std::nullopt;
  }
  const std::int64_t quotient = dividend / divisor;
  const bool roundedUp = (dividend % divisor != 0) && ((dividend < 0) != (divisor < 0));
  return roundedUp ? quotient - 1 : quotient;
}

struct Batch {
  std::optional<std::int64_t> train;
  std::optional<std::int64_t> micro;
  std::optional<std::int64_t> accumulation;
};

// DeepSpeed's _set_batch_related_parameters: any two of the three keys give the third, and one
// alone implies no gradient accumulation.
tl::expected<Batch, std::string> deriveBatch(Batch batch, std::int64_t world) {
  auto& [train, micro, accumulation] = batch;
  const auto divide = [](std::optional<std::int64_t> dividend, std::int64_t divisor) {
    return dividend ? floorDivide(*dividend, divisor) : std::nullopt;
  };
  if (train && micro && accumulation) {
    return batch;
  }
  if (train && micro) {
    accumulation = divide(floorDivide(*train, *micro), world);
  } else if (train && accumulation) {
    micro = divide(floorDivide(*train, world), *accumulation);
  } else if (micro && accumulation) {
    train = *micro * *accumulation * world;
  } else if (train) {
    accumulation = 1;
    micro = floorDivide(*train, world);
  } else if (micro) {
    train = *micro * world;
    accumulation = 1;
  } else {
    return assertionError(
        "Either train_batch_size or train_micro_batch_size_per_gpu needs to be set");
  }
  if (!train || !micro || !accumulation) {
    return Error("ZeroDivisionError: integer division or modulo by zero");
  }
  return batch;
}

// DeepSpeed's _batch_assertion, messages verbatim.
tl::expected<void, std::string> assertBatch(const Batch& batch, std::int64_t world) {
  const std::int64_t train = *batch.train;
  const std::int64_t micro = *batch.micro;
  const std::int64_t accumulation = *batch.accumulation;
  if (train <= 0) {
    return assertionError("Train batch size: " + std::to_string(train) +
                          " has to be greater than 0");
  }
  if (micro <= 0) {
    return assertionError("Micro batch size per gpu: " + std::to_string(micro) +
                          " has to be greater than 0");
  }
  if (accumulation <= 0) {
    return assertionError("Gradient accumulation steps: " + std::to_string(accumulation) +
                          " has to be greater than 0");
  }
  if (train != micro * accumulation * world) {
    return assertionError(
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size " +
        std::to_string(train) + " != " + std::to_string(micro) + " * " +
        std::to_string(accumulation) + " * " + std::to_string(world));
  }
  return {};
}

tl::expected<Batch, std::string> readBatch(const nlohmann::json& config, std::int64_t world) {
  Batch batch;
  for (const auto& [key, value] :
       {std::pair{kTrainBatch, &batch.train}, std::pair{kMicroBatch, &batch.micro},
        std::pair{kAccumulation, &batch.accumulation}}) {
    const auto read = batchValue(config, key);
    if (!read) {
      return tl::unexpected(read.error());
    }
    *value = *read;
  }
  auto derived = deriveBatch(batch, world);
  if (!derived) {
    return derived;
  }
  if (const auto valid = assertBatch(*derived, world); !valid) {
    return tl::unexpected(valid.error());
  }
  return derived;
}

// Whether a ZeRO offload section (offload_optimizer or offload_param) moves its state off the GPU.
bool offloads(const nlohmann::json& zero, std::string_view section) {
  const auto found = zero.find(section);
  if (found == zero.end() || !found->is_object()) {
    return false;
  }
  const auto device = found->find("device");
  return device != found->end() && device->is_string() &&
         (device->get<std::string>() == "cpu" || device->get<std::string>() == "nvme");
}

tl::expected<void, std::string> readZero(const nlohmann::json& config, TrainingRun& run) {
  const auto zero = config.find("zero_optimization");
  if (zero == config.end() || zero->is_null()) {
    return {};
  }
  if (!zero->is_object()) {
    return assertionError("zero_optimization must be an object, got " + zero->dump());
  }
  if (const auto stage = zero->find("stage"); stage != zero->end()) {
    if (!stage->is_number_integer() || stage->get<std::int64_t>() < 0 ||
        stage->get<std::int64_t>() > 3) {
      return assertionError("zero_optimization.stage must be an integer from 0 to 3, got " +
                            stage->dump());
    }
    run.stage = stage->get<int>();
  }
  // DeepSpeed only builds a ZeRO optimizer from stage 1 and only partitions parameters at
  // stage 3; elsewhere these sections change nothing.
  run.offloadOptimizer = run.stage >= 1 && offloads(*zero, "offload_optimizer");
  run.offloadParameters = run.stage == 3 && offloads(*zero, "offload_param");
  return {};
}

tl::expected<std::string, std::string> pathSetting(const nlohmann::json& autotuning,
                                                   std::string_view key, std::string fallback) {
  const auto found = autotuning.find(key);
  if (found == autotuning.end() || found->is_null()) {
    return fallback;
  }
  if (!found->is_string() || found->get<std::string>().empty()) {
    return assertionError("autotuning." + std::string(key) + " must be a path, got " +
                          found->dump());
  }
  return found->get<std::string>();
}

tl::expected<AutotuningOutputs, std::string> readAutotuning(const nlohmann::json& config) {
  AutotuningOutputs outputs;
  const auto autotuning = config.find("autotuning");
  if (autotuning == config.end() || autotuning->is_null()) {
    return outputs;
  }
  if (!autotuning->is_object()) {
    return assertionError("autotuning must be an object, got " + autotuning->dump());
  }
  const auto metricPath = pathSetting(*autotuning, "metric_path", outputs.metricPath);
  const auto modelInfoPath = pathSetting(*autotuning, "model_info_path", outputs.modelInfoPath);
  if (!metricPath) {
    return tl::unexpected(metricPath.error());
  }
  if (!modelInfoPath) {
    return tl::unexpected(modelInfoPath.error());
  }
  outputs.metricPath = *metricPath;
  outputs.modelInfoPath = *modelInfoPath;
  const auto modelInfo = autotuning->find("model_info");
  if (modelInfo == autotuning->end() || !modelInfo->is_object()) {
    return outputs;
  }
  const auto profile = modelInfo->find("profile");
  if (profile != modelInfo->end() && !profile->is_boolean()) {
    return assertionError("autotuning.model_info.profile must be true or false, got " +
                          profile->dump());
  }
  outputs.profileModel = profile != modelInfo->end() && profile->get<bool>();
  return outputs;
}

}  // namespace

tl::expected<CheckedConfig, std::string> checkConfig(const nlohmann::json& config,
                                                     const Parallelism& parallelism) {
  if (!config.is_object()) {
    return assertionError("the DeepSpeed config must be a JSON object");
  }
  if (!parallelism.consistent()) {
    return assertionError("world size " + std::to_string(parallelism.worldSize) +
                          " is not divisible by model parallel size " +
                          std::to_string(parallelism.modelParallel));
  }
  CheckedConfig checked;
  checked.run.parallelism = parallelism;
  const auto batch = readBatch(config, parallelism.dataParallel());
  if (!batch) {
    return tl::unexpected(batch.error());
  }
  checked.run.trainBatch = *batch->train;
  checked.run.microBatch = *batch->micro;
  checked.run.gradientAccumulation = *batch->accumulation;
  if (const auto zero = readZero(config, checked.run); !zero) {
    return tl::unexpected(zero.error());
  }
  const auto outputs = readAutotuning(config);
  if (!outputs) {
    return tl::unexpected(outputs.error());
  }
  checked.outputs = *outputs;
  return checked;
}

}  // namespace autotune::trialsim
