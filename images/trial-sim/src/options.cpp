#include "options.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>

namespace autotune::trialsim {
namespace {

using UsageError = tl::unexpected<std::string>;

bool isFlag(std::string_view token) { return token.starts_with("--"); }

tl::expected<int, std::string> positiveInteger(std::string_view flag, std::string_view text) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || value < 1) {
    return UsageError(std::string(flag) + ": expected a positive integer, got \"" +
                      std::string(text) + "\"");
  }
  return value;
}

tl::expected<int, std::string> nonNegativeInteger(std::string_view name, std::string_view text) {
  int value = 0;
  const auto* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end || value < 0) {
    return UsageError(std::string(name) + ": expected a non-negative integer, got \"" +
                      std::string(text) + "\"");
  }
  return value;
}

tl::expected<double, std::string> seconds(std::string_view flag, const std::string& text) {
  char* stop = nullptr;
  const double value = std::strtod(text.c_str(), &stop);
  if (text.empty() || stop != text.c_str() + text.size() || !std::isfinite(value) || value < 0) {
    return UsageError(std::string(flag) + ": expected a number of seconds, got \"" + text + "\"");
  }
  return value;
}

// Hugging Face's words for a boolean flag's value (transformers' string_to_bool).
std::optional<bool> booleanWord(std::string_view text) {
  std::string lower(text);
  std::ranges::transform(lower, lower.begin(), [](unsigned char letter) {
    return static_cast<char>(std::tolower(letter));
  });
  if (lower == "yes" || lower == "true" || lower == "t" || lower == "y" || lower == "1") {
    return true;
  }
  if (lower == "no" || lower == "false" || lower == "f" || lower == "n" || lower == "0") {
    return false;
  }
  return std::nullopt;
}

bool isTrainerSwitch(std::string_view flag) { return flag == "--fp16" || flag == "--bf16"; }

// The Trainer's --fp16 and --bf16: alone they mean true, with a value it is one of booleanWord's.
tl::expected<void, std::string> applyTrainerSwitch(TrainerArguments& trainer, std::string_view flag,
                                                   const std::optional<std::string>& value) {
  const std::optional<bool> enabled = value ? booleanWord(*value) : true;
  if (!enabled) {
    return UsageError(std::string(flag) + ": expected true or false, got \"" + *value + "\"");
  }
  auto& target = flag == "--fp16" ? trainer.fp16 : trainer.bf16;
  target = *enabled;
  return {};
}

// Applies one of the simulator's flags that takes a value; false when `flag` is not one of them.
tl::expected<bool, std::string> applyValueFlag(Options& options, std::string_view flag,
                                               const std::string& value) {
  const auto assign = [](auto& target, auto parsed) -> tl::expected<bool, std::string> {
    if (!parsed) {
      return UsageError(parsed.error());
    }
    target = *parsed;
    return true;
  };
  if (flag == "--deepspeed" || flag == "--deepspeed_config") {
    options.configPath = value;
  } else if (flag == "--num_gpus") {
    return assign(options.numGpus, positiveInteger(flag, value));
  } else if (flag == "--model_parallel_size") {
    return assign(options.modelParallelSize, positiveInteger(flag, value));
  } else if (flag == "--per_device_train_batch_size") {
    return assign(options.trainer.perDeviceTrainBatchSize, positiveInteger(flag, value));
  } else if (flag == "--gradient_accumulation_steps") {
    return assign(options.trainer.gradientAccumulationSteps, positiveInteger(flag, value));
  } else if (flag == "--startup-seconds") {
    return assign(options.startupSeconds, seconds(flag, value));
  } else if (flag == "--step-seconds") {
    return assign(options.stepSeconds, seconds(flag, value));
  } else if (flag == "--launch-log") {
    options.launchLog = value;
  } else if (flag == "--profile") {
    options.profileName = value;
  } else if (flag == "--profile-file") {
    options.profileFile = value;
  } else if (flag == "--fail-with") {
    options.failWith = value;
  } else if (flag == "--oom-rank") {
    return assign(options.outOfMemoryRank, nonNegativeInteger(flag, value));
  } else if (flag == "--run-micro-batch") {
    return assign(options.runMicroBatch, positiveInteger(flag, value));
  } else if (flag == "--run-stage") {
    return assign(options.runStage, nonNegativeInteger(flag, value));
  } else if (flag == "--rendezvous-timeout") {
    const auto parsed = seconds(flag, value);
    if (!parsed) {
      return UsageError(parsed.error());
    }
    options.rendezvousTimeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(*parsed));
  } else {
    return false;
  }
  return true;
}

bool takesValue(std::string_view flag) {
  constexpr std::array<std::string_view, 15> kValueFlags = {"--deepspeed_config",
                                                            "--num_gpus",
                                                            "--model_parallel_size",
                                                            "--per_device_train_batch_size",
                                                            "--gradient_accumulation_steps",
                                                            "--startup-seconds",
                                                            "--step-seconds",
                                                            "--launch-log",
                                                            "--profile",
                                                            "--profile-file",
                                                            "--fail-with",
                                                            "--oom-rank",
                                                            "--run-micro-batch",
                                                            "--run-stage",
                                                            "--rendezvous-timeout"};
  return std::ranges::find(kValueFlags, flag) != kValueFlags.end();
}

std::optional<std::string> nonEmpty(const std::optional<std::string>& value) {
  return value && !value->empty() ? value : std::nullopt;
}

}  // namespace

tl::expected<Options, std::string> parseArguments(const std::vector<std::string>& arguments) {
  Options options;
  for (std::size_t index = 0; index < arguments.size(); ++index) {
    const std::string& token = arguments[index];
    if (!isFlag(token)) {
      continue;  // a value of a flag the simulator does not know
    }
    const auto equals = token.find('=');
    const std::string flag = token.substr(0, equals);
    std::optional<std::string> value;
    if (equals != std::string::npos) {
      value = token.substr(equals + 1);
    }
    if (flag == "--help") {
      options.help = true;
    } else if (flag == "--garbage-metrics") {
      options.garbageMetrics = true;
    } else if (flag == "--no-effective-values") {
      options.reportsEffectiveValues = false;
    } else if (isTrainerSwitch(flag)) {
      // Like the Trainer's parser, take the next argument as the value when it is one.
      if (!value && index + 1 < arguments.size() && booleanWord(arguments[index + 1]).has_value()) {
        value = arguments[++index];
      }
      if (const auto applied = applyTrainerSwitch(options.trainer, flag, value); !applied) {
        return UsageError(applied.error());
      }
    } else if (flag == "--deepspeed" && !value) {
      // Hugging Face's --deepspeed takes the config path; DeepSpeed's own is a switch used
      // together with --deepspeed_config.
      const bool pathFollows = index + 1 < arguments.size() && !isFlag(arguments[index + 1]);
      if (pathFollows) {
        options.configPath = arguments[++index];
      }
    } else if (takesValue(flag) || flag == "--deepspeed") {
      if (!value) {
        if (index + 1 >= arguments.size()) {
          return UsageError(flag + ": expected a value");
        }
        value = arguments[++index];
      }
      if (const auto applied = applyValueFlag(options, flag, *value); !applied) {
        return UsageError(applied.error());
      }
    }
  }
  if (options.profileName && options.profileFile) {
    return UsageError(std::string("--profile and --profile-file: give one of them"));
  }
  return options;
}

std::optional<std::string> configPath(const Options& options, const Environment& environment) {
  return options.configPath ? options.configPath : nonEmpty(environment.deepspeedConfig);
}

std::optional<std::string> launchLogPath(const Options& options, const Environment& environment) {
  return options.launchLog ? options.launchLog : nonEmpty(environment.launchLog);
}

std::string launchLine(const Environment& environment) {
  return nonEmpty(environment.trial).value_or("-") + "\n";
}

tl::expected<std::optional<NodeGroup>, std::string> nodeGroup(const Environment& environment) {
  const auto nodesText = nonEmpty(environment.numNodes);
  if (!nodesText) {
    return std::nullopt;
  }
  const auto nodes = positiveInteger("AUTOTUNE_NUM_NODES", *nodesText);
  if (!nodes) {
    return UsageError(nodes.error());
  }
  if (*nodes == 1) {
    return std::nullopt;
  }
  NodeGroup group;
  group.nodes = *nodes;
  const auto rankText = nonEmpty(environment.nodeRank);
  if (!rankText) {
    return UsageError("AUTOTUNE_NODE_RANK: required when AUTOTUNE_NUM_NODES is " +
                      std::to_string(group.nodes));
  }
  const auto rank = nonNegativeInteger("AUTOTUNE_NODE_RANK", *rankText);
  if (!rank) {
    return UsageError(rank.error());
  }
  if (*rank >= group.nodes) {
    return UsageError("AUTOTUNE_NODE_RANK: " + std::to_string(*rank) +
                      " is not below AUTOTUNE_NUM_NODES " + std::to_string(group.nodes));
  }
  group.rank = *rank;
  const auto address = nonEmpty(environment.masterAddress);
  if (!address) {
    return UsageError("AUTOTUNE_MASTER_ADDR: required when AUTOTUNE_NUM_NODES is " +
                      std::to_string(group.nodes));
  }
  group.masterAddress = *address;
  if (const auto portText = nonEmpty(environment.masterPort)) {
    const auto port = positiveInteger("AUTOTUNE_MASTER_PORT", *portText);
    if (!port || *port > std::numeric_limits<std::uint16_t>::max()) {
      return UsageError("AUTOTUNE_MASTER_PORT: expected a port from 1 to 65535, got \"" +
                        *portText + "\"");
    }
    group.masterPort = static_cast<std::uint16_t>(*port);
  }
  return group;
}

int worldSize(const Options& options, const Environment& environment, const Profile& profile,
              int nodes) {
  if (options.numGpus) {
    return *options.numGpus * nodes;
  }
  int devices = 0;
  if (const auto visible = nonEmpty(environment.cudaVisibleDevices)) {
    std::string_view rest = *visible;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      devices += rest.substr(0, comma).empty() ? 0 : 1;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return devices > 0 ? devices * nodes : profile.gpus;
}

tl::expected<std::optional<int>, std::string> outOfMemoryRank(const Options& options,
                                                              const Environment& environment) {
  if (options.outOfMemoryRank) {
    return options.outOfMemoryRank;
  }
  const auto text = nonEmpty(environment.outOfMemoryRank);
  if (!text) {
    return std::nullopt;
  }
  const auto rank = nonNegativeInteger("AUTOTUNE_SIM_OOM_RANK", *text);
  if (!rank) {
    return UsageError(rank.error());
  }
  return *rank;
}

tl::expected<std::optional<double>, std::string> gpuMemoryBytes(const Environment& environment) {
  const auto text = nonEmpty(environment.gpuMemoryMiB);
  if (!text) {
    return std::nullopt;
  }
  const auto mib = nonNegativeInteger("AUTOTUNE_SIM_GPU_MEMORY_MIB", *text);
  if (!mib || *mib == 0) {
    return UsageError("AUTOTUNE_SIM_GPU_MEMORY_MIB: expected a positive integer, got \"" + *text +
                      "\"");
  }
  constexpr double kMiB = 1024.0 * 1024.0;
  return *mib * kMiB;
}

tl::expected<std::uint64_t, std::string> environmentSeed(const Environment& environment) {
  const auto text = nonEmpty(environment.seed);
  if (!text) {
    return 0;
  }
  std::uint64_t seed = 0;
  const auto* end = text->data() + text->size();
  const auto [stop, error] = std::from_chars(text->data(), end, seed);
  if (error != std::errc() || stop != end) {
    return UsageError("AUTOTUNE_SIM_SEED: expected a non-negative integer, got \"" + *text + "\"");
  }
  return seed;
}

std::string usage() {
  return R"(Usage: trial-sim [--profile NAME | --profile-file FILE] [--deepspeed CONFIG] [options]
                 [any other training-script arguments, ignored]

Behaves like one DeepSpeed training launch under autotuning, without GPUs: checks the config as
DeepSpeed does, then writes the model report (autotuning.model_info.profile) or the metrics of the
profiled steps to autotuning.metric_path, or fails with PyTorch's out-of-memory error.

  --deepspeed FILE, --deepspeed_config FILE
                          the DeepSpeed config (else $AUTOTUNE_DS_CONFIG)
  --profile NAME          a built-in model/hardware profile (default gpt2-large)
  --profile-file FILE     a custom profile (JSON, see README.md)
  --num_gpus N            world size (else the devices in $CUDA_VISIBLE_DEVICES, else the profile's)
  --model_parallel_size N tensor/pipeline parallel degree (default 1)
  --per_device_train_batch_size N, --gradient_accumulation_steps N, --fp16, --bf16
                          Hugging Face Trainer flags: they fill the config's "auto" values
                          (defaults 8, 1, false, false) and must agree with its numbers
  --startup-seconds S     sleep S seconds first: process start and model load (default 0)
  --step-seconds S        sleep S more seconds after the simulated steps
  --launch-log FILE       append this launch's $AUTOTUNE_TRIAL to FILE (else $AUTOTUNE_SIM_LAUNCH_LOG)
  --fail-with TEXT        print TEXT on stderr and exit 1, like a broken script
  --garbage-metrics       write a metrics file that is not JSON and exit 0
  --oom-rank R            node rank R ends with the out-of-memory error whatever the config
                          (else $AUTOTUNE_SIM_OOM_RANK); in a multi-node launch rank 0 then fails
                          too, without writing results, as a real job does when a peer dies
  --rendezvous-timeout S  how long multi-node ranks wait for each other (default 300)
  --run-micro-batch N     act as a script that sets its own micro-batch: DeepSpeed runs N samples
                          a GPU whatever the config says (its train_batch_size then follows)
  --run-stage N           act as a script that sets its own ZeRO stage: DeepSpeed runs stage N
  --no-effective-values   act as a script that does not add to its metrics the values its
                          engine ran ("effective"; by default it does, as docs/trial-protocol.md
                          asks)
  --help                  this text

Multi-node: with AUTOTUNE_NUM_NODES=N > 1 this process is node AUTOTUNE_NODE_RANK of N. Rank 0
listens on AUTOTUNE_MASTER_ADDR:AUTOTUNE_MASTER_PORT (default 29500), the others connect to it,
and the world size is the GPUs per node (--num_gpus or $CUDA_VISIBLE_DEVICES) times N. Only rank
0 writes the results, and only when every rank succeeded; a rank whose peer failed exits 1.

Environment: AUTOTUNE_DS_CONFIG, AUTOTUNE_TRIAL, CUDA_VISIBLE_DEVICES, AUTOTUNE_SIM_LAUNCH_LOG,
AUTOTUNE_SIM_SEED (changes the measurement noise; default 0), AUTOTUNE_NUM_NODES,
AUTOTUNE_NODE_RANK, AUTOTUNE_MASTER_ADDR, AUTOTUNE_MASTER_PORT, AUTOTUNE_SIM_OOM_RANK,
AUTOTUNE_SIM_GPU_MEMORY_MIB (the memory of each GPU, as the node simulator gives it; default: the
profile's).
Exit status: 0 done, 1 the launch failed (config, out of memory, --fail-with, a failed peer, the
rendezvous timed out), 2 usage error.
)";
}

}  // namespace autotune::trialsim
