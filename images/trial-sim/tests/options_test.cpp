#include "options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace autotune::trialsim {
namespace {

Options parsed(const std::vector<std::string>& arguments) {
  const auto options = parseArguments(arguments);
  EXPECT_TRUE(options) << options.error();
  return options.value_or(Options{});
}

std::string refused(const std::vector<std::string>& arguments) {
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
  EXPECT_EQ(refused({"--num_gpus", "many"}),
            "--num_gpus: expected a positive integer, got \"many\"");
  EXPECT_EQ(refused({"--num_gpus", "0"}), "--num_gpus: expected a positive integer, got \"0\"");
  EXPECT_EQ(refused({"--startup-seconds", "-1"}),
            "--startup-seconds: expected a number of seconds, got \"-1\"");
  EXPECT_EQ(refused({"--profile"}), "--profile: expected a value");
  EXPECT_EQ(refused({"--profile", "gpt2", "--profile-file", "p.json"}),
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
  EXPECT_EQ(refused({"--per_device_train_batch_size", "auto"}),
            "--per_device_train_batch_size: expected a positive integer, got \"auto\"");
  EXPECT_EQ(refused({"--per_device_train_batch_size=2.5"}),
            "--per_device_train_batch_size: expected a positive integer, got \"2.5\"");
  EXPECT_EQ(refused({"--gradient_accumulation_steps=0"}),
            "--gradient_accumulation_steps: expected a positive integer, got \"0\"");
  EXPECT_EQ(refused({"--gradient_accumulation_steps", "-2"}),
            "--gradient_accumulation_steps: expected a positive integer, got \"-2\"");
  EXPECT_EQ(refused({"--per_device_train_batch_size"}),
            "--per_device_train_batch_size: expected a value");
  EXPECT_EQ(refused({"--fp16=maybe"}), "--fp16: expected true or false, got \"maybe\"");
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

TEST(Options, TheLaunchLineIsTheTrialName) {
  Environment environment;
  EXPECT_EQ(launchLine(environment), "-\n");
  environment.trial = "z1_gas1_tmbspg3";
  EXPECT_EQ(launchLine(environment), "z1_gas1_tmbspg3\n");
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
