#include "options.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace autotune::trialsim {
namespace {

Options parsed(const std::vector<std::string>& arguments) {
  const auto options = parseArguments(arguments);
  EXPECT_TRUE(options) << options.error();
  return options.value_or(Options{});
}

std::string refusedArguments(const std::vector<std::string>& arguments) {
  const auto options = parseArguments(arguments);
  EXPECT_FALSE(options);
  return options ? std::string() : options.error();
}

TEST(Options, TheConfigComesFromHuggingFacesOrDeepSpeedsFlag) {
  EXPECT_EQ(parsed({"--deepspeed", "ds.json"}).configPath, "ds.json");
  EXPECT_EQ(parsed({"--deepspeed_config", "ds.json"}).configPath, "ds.json");
  EXPECT_EQ(parsed({"--deepspeed=ds.json"}).configPath, "ds.json");
  // DeepSpeed's own --deepspeed is a switch next to --deepspeed_config.
  EXPECT_EQ(parsed({"--deepspeed", "--deepspeed_config", "ds.json"}).configPath, "ds.json");
  EXPECT_EQ(parsed({"--deepspeed_config", "ds.json", "--deepspeed"}).configPath, "ds.json");
}

TEST(Options, ArgumentsOfTheTrainingScriptAreIgnored) {
  const Options options =
      parsed({"--model_name_or_path", "gpt2-large", "--per_device_train_batch_size", "3",
              "--do_train", "--profile", "gpt2", "--output_dir=/tmp/out", "positional"});
  EXPECT_EQ(options.profileName, "gpt2");
  EXPECT_FALSE(options.configPath);
}

TEST(Options, TheSimulatorsOwnFlags) {
  const Options options =
      parsed({"--num_gpus", "8", "--model_parallel_size=2", "--startup-seconds", "0.25",
              "--step-seconds", "3", "--launch-log", "/tmp/log", "--profile-file", "p.json",
              "--fail-with", "RuntimeError: boom", "--garbage-metrics", "--help"});
  EXPECT_EQ(options.numGpus, 8);
  EXPECT_EQ(options.modelParallelSize, 2);
  EXPECT_DOUBLE_EQ(options.startupSeconds, 0.25);
  EXPECT_DOUBLE_EQ(options.stepSeconds, 3);
  EXPECT_EQ(options.launchLog, "/tmp/log");
  EXPECT_EQ(options.profileFile, "p.json");
  EXPECT_EQ(options.failWith, "RuntimeError: boom");
  EXPECT_TRUE(options.garbageMetrics);
  EXPECT_TRUE(options.help);
}

TEST(Options, BadValuesAreUsageErrors) {
  EXPECT_EQ(refusedArguments({"--num_gpus", "many"}),
            "--num_gpus: expected a positive integer, got \"many\"");
  EXPECT_EQ(refusedArguments({"--num_gpus", "0"}),
            "--num_gpus: expected a positive integer, got \"0\"");
  EXPECT_EQ(refusedArguments({"--startup-seconds", "-1"}),
            "--startup-seconds: expected a number of seconds, got \"-1\"");
  EXPECT_EQ(refusedArguments({"--profile"}), "--profile: expected a value");
  EXPECT_EQ(refusedArguments({"--profile", "gpt2", "--profile-file", "p.json"}),
            "--profile and --profile-file: give one of them");
}

TEST(Options, TheTrainersBatchAndPrecisionFlagsAreRead) {
  const TrainerArguments trainer =
      parsed({"--per_device_train_batch_size", "3", "--gradient_accumulation_steps=4", "--fp16"})
          .trainer;
  EXPECT_EQ(trainer.perDeviceTrainBatchSize, 3);
  EXPECT_EQ(trainer.gradientAccumulationSteps, 4);
  EXPECT_EQ(trainer.fp16, true);
  EXPECT_FALSE(trainer.bf16);
  EXPECT_EQ(parsed({"--per_device_train_batch_size=6"}).trainer.perDeviceTrainBatchSize, 6);
  EXPECT_EQ(parsed({"--bf16"}).trainer.bf16, true);
}

TEST(Options, WithoutTrainerFlagsTheLaunchIsNotATrainers) {
  EXPECT_FALSE(parsed({"--deepspeed", "ds.json", "--num_gpus", "2", "--do_train"}).trainer.given());
  EXPECT_TRUE(parsed({"--bf16"}).trainer.given());
  EXPECT_TRUE(parsed({"--gradient_accumulation_steps", "1"}).trainer.given());
}

TEST(Options, TrainerSwitchesTakeHuggingFacesWordsForTrueAndFalse) {
  const TrainerArguments words = parsed({"--fp16", "False", "--bf16=yes"}).trainer;
  EXPECT_EQ(words.fp16, false);
  EXPECT_EQ(words.bf16, true);
  EXPECT_EQ(parsed({"--fp16=0"}).trainer.fp16, false);
  // Anything else after the switch is not its value.
  const Options options = parsed({"--fp16", "--profile", "gpt2"});
  EXPECT_EQ(options.trainer.fp16, true);
  EXPECT_EQ(options.profileName, "gpt2");
  EXPECT_EQ(parsed({"--bf16", "positional"}).trainer.bf16, true);
}

TEST(Options, BadTrainerValuesAreUsageErrors) {
  EXPECT_EQ(refusedArguments({"--per_device_train_batch_size", "auto"}),
            "--per_device_train_batch_size: expected a positive integer, got \"auto\"");
  EXPECT_EQ(refusedArguments({"--per_device_train_batch_size=2.5"}),
            "--per_device_train_batch_size: expected a positive integer, got \"2.5\"");
  EXPECT_EQ(refusedArguments({"--gradient_accumulation_steps=0"}),
            "--gradient_accumulation_steps: expected a positive integer, got \"0\"");
  EXPECT_EQ(refusedArguments({"--gradient_accumulation_steps", "-2"}),
            "--gradient_accumulation_steps: expected a positive integer, got \"-2\"");
  EXPECT_EQ(refusedArguments({"--per_device_train_batch_size"}),
            "--per_device_train_batch_size: expected a value");
  EXPECT_EQ(refusedArguments({"--fp16=maybe"}), "--fp16: expected true or false, got \"maybe\"");
}

TEST(Options, TheEnvironmentFillsWhatTheFlagsLeaveOut) {
  Environment environment;
  environment.deepspeedConfig = "/etc/autotune/ds_config.json";
  environment.launchLog = "/tmp/launches";
  EXPECT_EQ(configPath(parsed({}), environment), "/etc/autotune/ds_config.json");
  EXPECT_EQ(configPath(parsed({"--deepspeed", "mine.json"}), environment), "mine.json");
  EXPECT_EQ(launchLogPath(parsed({}), environment), "/tmp/launches");
  environment.deepspeedConfig = "";
  EXPECT_FALSE(configPath(parsed({}), environment));
}

TEST(Options, TheWorldSizeIsTheFlagThenTheVisibleDevicesThenTheProfile) {
  Profile profile;
  profile.gpus = 16;
  Environment environment;
  EXPECT_EQ(worldSize(parsed({}), environment, profile), 16);
  environment.cudaVisibleDevices = "";
  EXPECT_EQ(worldSize(parsed({}), environment, profile), 16);
  environment.cudaVisibleDevices = "0,1,2,3";
  EXPECT_EQ(worldSize(parsed({}), environment, profile), 4);
  EXPECT_EQ(worldSize(parsed({"--num_gpus", "2"}), environment, profile), 2);
}

TEST(Options, TheWorldOfAMultiNodeLaunchIsTheGpusPerNodeTimesTheNodes) {
  Profile profile;
  profile.gpus = 16;
  Environment environment;
  environment.cudaVisibleDevices = "0,1,2,3";
  EXPECT_EQ(worldSize(parsed({}), environment, profile, 2), 8);
  EXPECT_EQ(worldSize(parsed({"--num_gpus", "2"}), environment, profile, 3), 6);
  // The profile's GPUs describe the whole launch already.
  EXPECT_EQ(worldSize(parsed({}), Environment{}, profile, 2), 16);
}

Environment multiNode(const std::string& nodes, const std::string& rank) {
  Environment environment;
  environment.numNodes = nodes;
  environment.nodeRank = rank;
  environment.masterAddress = "job-0.job";
  return environment;
}

TEST(Options, OneNodeOrNoneIsASingleNodeLaunch) {
  EXPECT_EQ(nodeGroup(Environment{}), std::nullopt);
  EXPECT_EQ(nodeGroup(multiNode("", "3")), std::nullopt);
  // One node ignores the rest, whatever it says.
  Environment one = multiNode("1", "7");
  one.masterPort = "none";
  EXPECT_EQ(nodeGroup(one), std::nullopt);
}

TEST(Options, TheNodeGroupComesFromTheEnvironment) {
  Environment environment = multiNode("4", "2");
  auto group = nodeGroup(environment);
  ASSERT_TRUE(group && *group) << (group ? "single node" : group.error());
  EXPECT_EQ((*group)->nodes, 4);
  EXPECT_EQ((*group)->rank, 2);
  EXPECT_EQ((*group)->masterAddress, "job-0.job");
  EXPECT_EQ((*group)->masterPort, 29500);
  environment.masterPort = "29511";
  EXPECT_EQ((**nodeGroup(environment)).masterPort, 29511);
}

TEST(Options, ABadNodeGroupIsAUsageError) {
  EXPECT_EQ(nodeGroup(multiNode("two", "0")).error(),
            "AUTOTUNE_NUM_NODES: expected a positive integer, got \"two\"");
  EXPECT_EQ(nodeGroup(multiNode("2", "")).error(),
            "AUTOTUNE_NODE_RANK: required when AUTOTUNE_NUM_NODES is 2");
  EXPECT_EQ(nodeGroup(multiNode("2", "-1")).error(),
            "AUTOTUNE_NODE_RANK: expected a non-negative integer, got \"-1\"");
  EXPECT_EQ(nodeGroup(multiNode("2", "2")).error(),
            "AUTOTUNE_NODE_RANK: 2 is not below AUTOTUNE_NUM_NODES 2");
  Environment noAddress = multiNode("2", "1");
  noAddress.masterAddress.reset();
  EXPECT_EQ(nodeGroup(noAddress).error(),
            "AUTOTUNE_MASTER_ADDR: required when AUTOTUNE_NUM_NODES is 2");
  Environment badPort = multiNode("2", "1");
  badPort.masterPort = "65536";
  EXPECT_EQ(nodeGroup(badPort).error(),
            "AUTOTUNE_MASTER_PORT: expected a port from 1 to 65535, got \"65536\"");
}

TEST(Options, TheOutOfMemoryRankIsTheFlagThenTheEnvironment) {
  Environment environment;
  EXPECT_EQ(outOfMemoryRank(parsed({}), environment), std::nullopt);
  environment.outOfMemoryRank = "1";
  EXPECT_EQ(outOfMemoryRank(parsed({}), environment), 1);
  EXPECT_EQ(outOfMemoryRank(parsed({"--oom-rank", "0"}), environment), 0);
  environment.outOfMemoryRank = "last";
  EXPECT_EQ(outOfMemoryRank(parsed({}), environment).error(),
            "AUTOTUNE_SIM_OOM_RANK: expected a non-negative integer, got \"last\"");
  EXPECT_EQ(refusedArguments({"--oom-rank", "-1"}),
            "--oom-rank: expected a non-negative integer, got \"-1\"");
}

TEST(Options, TheRendezvousTimeoutIsFiveMinutesUnlessSaidOtherwise) {
  EXPECT_EQ(parsed({}).rendezvousTimeout, std::chrono::minutes(5));
  EXPECT_EQ(parsed({"--rendezvous-timeout", "1.5"}).rendezvousTimeout,
            std::chrono::milliseconds(1500));
  EXPECT_EQ(refusedArguments({"--rendezvous-timeout", "soon"}),
            "--rendezvous-timeout: expected a number of seconds, got \"soon\"");
}

TEST(Options, TheLaunchLineIsTheTrialName) {
  Environment environment;
  EXPECT_EQ(launchLine(environment), "-\n");
  environment.trial = "z1_gas1_tmbspg3";
  EXPECT_EQ(launchLine(environment), "z1_gas1_tmbspg3\n");
}

// The node's GPU memory, as the node simulator passes it, replaces the profile's.
TEST(Options, TheGpuMemoryIsTheNodesWhenItIsGiven) {
  Environment environment;
  EXPECT_EQ(gpuMemoryBytes(environment), std::nullopt);
  environment.gpuMemoryMiB = "81920";
  EXPECT_EQ(gpuMemoryBytes(environment), 80.0 * 1024 * 1024 * 1024);
  for (const char* bad : {"0", "80Gi", "-1"}) {
    environment.gpuMemoryMiB = bad;
    EXPECT_FALSE(gpuMemoryBytes(environment)) << bad;
  }
}

TEST(Options, TheNoiseSeedIsANumber) {
  Environment environment;
  EXPECT_EQ(environmentSeed(environment), 0U);
  environment.seed = "42";
  EXPECT_EQ(environmentSeed(environment), 42U);
  environment.seed = "forty-two";
  EXPECT_FALSE(environmentSeed(environment));
}

}  // namespace
}  // namespace autotune::trialsim
