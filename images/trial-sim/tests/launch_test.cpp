// The trial-sim executable as a trial runs it: files in, files and exit status out.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Launch {
  int exitCode = -1;
  std::string out;
  std::string err;
};

std::string readText(const fs::path& path) {
  const std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The command that runs trial-sim in `folder` with only the given variables of the protocol set,
// its output in the folder's stdout.txt and stderr.txt.
std::string commandIn(const fs::path& folder, const std::string& arguments,
                      const std::string& environment) {
  return "cd " + folder.string() +
         " && env -u AUTOTUNE_DS_CONFIG -u AUTOTUNE_TRIAL -u CUDA_VISIBLE_DEVICES"
         " -u AUTOTUNE_SIM_LAUNCH_LOG -u AUTOTUNE_SIM_SEED -u AUTOTUNE_NUM_NODES"
         " -u AUTOTUNE_NODE_RANK -u AUTOTUNE_MASTER_ADDR -u AUTOTUNE_MASTER_PORT"
         " -u AUTOTUNE_SIM_OOM_RANK " +
         environment + " " + TRIAL_SIM_BINARY + " " + arguments + " >stdout.txt 2>stderr.txt";
}

// A loopback port that nothing listened on a moment ago.
int freePort() {
  const int socket = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (socket < 0) {
    ADD_FAILURE() << "no socket for a free port";
    return 0;
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes sockaddr
  const bool bound =
      ::bind(socket, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
  ::close(socket);
  EXPECT_TRUE(bound);
  return ntohs(address.sin_port);
}

class TrialSim : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 ("trial-sim-" + std::string(test->name()) + "-" + std::to_string(getpid()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path write(const std::string& name, const std::string& text) const {
    fs::path path = directory_ / name;
    std::ofstream(path) << text;
    return path;
  }

  // A config for 16 GPUs whose results land in this test's directory.
  fs::path config(json settings) const {
    settings["autotuning"] = {{"enabled", true},
                              {"metric_path", (directory_ / "metrics.json").string()},
                              {"model_info_path", (directory_ / "model_info.json").string()}};
    return write("ds_config.json", settings.dump());
  }

  // Runs trial-sim in this test's directory with only the given variables of the protocol set.
  Launch launch(const std::string& arguments, const std::string& environment = "") const {
    const std::string command = commandIn(directory_, arguments, environment);
    // NOLINTNEXTLINE(bugprone-command-processor,concurrency-mt-unsafe): a test command
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, readText(directory_ / "stdout.txt"),
            readText(directory_ / "stderr.txt")};
  }

  // Runs one trial-sim per node of a multi-node launch at once, node rank r in the folder rank<r>
  // (its results there, as each Pod has its own files), and returns each rank's launch.
  std::vector<Launch> launchNodes(int nodes, const std::string& address, int port,
                                  const std::string& arguments,
                                  const std::string& environment = "") const {
    std::string command;
    for (int rank = 0; rank < nodes; ++rank) {
      const fs::path folder = directory_ / ("rank" + std::to_string(rank));
      fs::create_directories(folder);
      const std::string group = "AUTOTUNE_NUM_NODES=" + std::to_string(nodes) +
                                " AUTOTUNE_NODE_RANK=" + std::to_string(rank) +
                                " AUTOTUNE_MASTER_ADDR=" + address +
                                " AUTOTUNE_MASTER_PORT=" + std::to_string(port) + " ";
      command +=
          "(" + commandIn(folder, arguments, group + environment) + "; echo $? >status.txt) & ";
    }
    command += "wait";
    // NOLINTNEXTLINE(bugprone-command-processor,concurrency-mt-unsafe): a test command
    EXPECT_EQ(std::system(command.c_str()), 0);
    std::vector<Launch> launches;
    for (int rank = 0; rank < nodes; ++rank) {
      const fs::path folder = directory_ / ("rank" + std::to_string(rank));
      const std::string status = readText(folder / "status.txt");
      launches.push_back({status.empty() ? -1 : std::stoi(status), readText(folder / "stdout.txt"),
                          readText(folder / "stderr.txt")});
    }
    return launches;
  }

  // A config whose results land in the working directory of each launch.
  fs::path localConfig(json settings) const {
    settings["autotuning"] = {{"enabled", true}, {"metric_path", "metrics.json"}};
    return write("ds_config.json", settings.dump());
  }

  json metrics() const { return json::parse(readText(directory_ / "metrics.json")); }

  fs::path directory_;
};

const json kGpt2LargeBest = {{"train_micro_batch_size_per_gpu", 3},
                             {"gradient_accumulation_steps", 1},
                             {"fp16", {{"enabled", true}}},
                             {"zero_optimization", {{"stage", 1}}}};

TEST_F(TrialSim, WritesTheMetricsOfTheProfiledStepsAndSaysItIsDone) {
  const Launch done = launch("--profile gpt2-large --deepspeed " + config(kGpt2LargeBest).string());
  ASSERT_EQ(done.exitCode, 0) << done.err;
  EXPECT_TRUE(contains(done.out, "Autotuning: done with running current ds config.")) << done.out;
  const json measured = metrics();
  EXPECT_NEAR(measured.at("throughput").get<double>(), 87.3017, 0.05 * 87.3017);
  EXPECT_NEAR(measured.at("latency").get<double>(),
              48 * 1e6 / measured.at("throughput").get<double>(), 1e-6);
  for (const auto* key : {"fwd", "bwd", "step", "FLOPS_per_gpu"}) {
    EXPECT_GT(measured.at(key).get<double>(), 0) << key;
  }
  EXPECT_EQ(measured.at("rank"), 0);
}

TEST_F(TrialSim, TheSameConfigMeasuresTheSameAndTheSeedChangesIt) {
  const std::string arguments = "--deepspeed " + config(kGpt2LargeBest).string();
  ASSERT_EQ(launch(arguments).exitCode, 0);
  const double first = metrics().at("throughput").get<double>();
  ASSERT_EQ(launch(arguments).exitCode, 0);
  EXPECT_EQ(metrics().at("throughput").get<double>(), first);
  ASSERT_EQ(launch(arguments, "AUTOTUNE_SIM_SEED=5").exitCode, 0);
  EXPECT_NE(metrics().at("throughput").get<double>(), first);
}

TEST_F(TrialSim, AMicroBatchThatDoesNotFitIsPyTorchsOutOfMemoryError) {
  json settings = kGpt2LargeBest;
  settings["train_micro_batch_size_per_gpu"] = 4;
  const Launch failed = launch("--deepspeed " + config(settings).string());
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_TRUE(contains(failed.err,
                       "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to "
                       "allocate"))
      << failed.err;
  EXPECT_TRUE(contains(failed.err, "32.00 GiB total capacity")) << failed.err;
  EXPECT_FALSE(fs::exists(directory_ / "metrics.json"));
}

// On a GPU of 80 GiB, as the node simulator says its GPUs are, the micro-batch that does not fit
// in the profile's 32 GiB fits; a larger one is out of memory against the 80 GiB.
TEST_F(TrialSim, TheNodesGpuMemoryMovesWhatFits) {
  json settings = kGpt2LargeBest;
  settings["train_micro_batch_size_per_gpu"] = 4;
  const std::string arguments = "--deepspeed " + config(settings).string();
  EXPECT_EQ(launch(arguments, "AUTOTUNE_SIM_GPU_MEMORY_MIB=81920").exitCode, 0);
  settings["train_micro_batch_size_per_gpu"] = 64;
  const Launch failed =
      launch("--deepspeed " + config(settings).string(), "AUTOTUNE_SIM_GPU_MEMORY_MIB=81920");
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_TRUE(contains(failed.err, "80.00 GiB total capacity")) << failed.err;
  EXPECT_EQ(launch(arguments, "AUTOTUNE_SIM_GPU_MEMORY_MIB=lots").exitCode, 2);
}

TEST_F(TrialSim, TheProfilingRunWritesTheModelReport) {
  json settings = {{"train_micro_batch_size_per_gpu", 1}, {"zero_optimization", {{"stage", 3}}}};
  settings["autotuning"] = {{"enabled", true},
                            {"model_info", {{"profile", true}}},
                            {"model_info_path", (directory_ / "model_info.json").string()}};
  const fs::path file = write("profile.json", settings.dump());
  const Launch done = launch("--profile gpt2-large --deepspeed " + file.string());
  ASSERT_EQ(done.exitCode, 0) << done.err;
  EXPECT_EQ(json::parse(readText(directory_ / "model_info.json")),
            json::parse(R"({"num_params": 774000000, "trainable_num_params": 774000000,
                            "activation_mem_per_gpu": 9600000000, "rank": 0})"));
}

TEST_F(TrialSim, WithoutPathsTheResultsLandInTheWorkingDirectory) {
  const fs::path file = write("plain.json", kGpt2LargeBest.dump());
  ASSERT_EQ(launch("--deepspeed_config " + file.string()).exitCode, 0);
  EXPECT_TRUE(fs::exists(directory_ / "autotuning_metric.json"));
}

TEST_F(TrialSim, TheConfigComesFromTheEnvironmentWhenNoFlagNamesIt) {
  const Launch done = launch("--model_name_or_path gpt2-large --per_device_train_batch_size 3",
                             "AUTOTUNE_DS_CONFIG=" + config(kGpt2LargeBest).string());
  EXPECT_EQ(done.exitCode, 0) << done.err;
  EXPECT_TRUE(fs::exists(directory_ / "metrics.json"));
}

TEST_F(TrialSim, ABatchThatDoesNotAddUpOnTheVisibleGpusIsDeepSpeedsAssertion) {
  json settings = kGpt2LargeBest;
  settings["train_batch_size"] = 48;
  const Launch failed =
      launch("--deepspeed " + config(settings).string(), "CUDA_VISIBLE_DEVICES=0,1,2,3");
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(failed.err,
            "AssertionError: Check batch related parameters. train_batch_size is not equal to "
            "micro_batch_per_gpu * gradient_acc_step * world_size 48 != 3 * 1 * 4\n");
}

TEST_F(TrialSim, AnAutoMicroBatchIsRefusedLikeDeepSpeedWould) {
  json settings = kGpt2LargeBest;
  settings["train_micro_batch_size_per_gpu"] = "auto";
  const Launch failed = launch("--deepspeed " + config(settings).string());
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(failed.err,
            "AssertionError: train_micro_batch_size_per_gpu must be an integer, got \"auto\"\n");
}

// Hugging Face's recommended config: the Trainer fills what it knows.
const json kTrainerConfig = {{"train_batch_size", "auto"},
                             {"train_micro_batch_size_per_gpu", "auto"},
                             {"gradient_accumulation_steps", "auto"},
                             {"gradient_clipping", "auto"},
                             {"fp16", {{"enabled", "auto"}}},
                             {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", "auto"}}}}},
                             {"zero_optimization",
                              {{"stage", 1},
                               {"reduce_bucket_size", "auto"},
                               {"allgather_bucket_size", 5e8},
                               {"sub_group_size", 1e9}}}};

TEST_F(TrialSim, ATrainerLaunchFillsAutoFromItsFlags) {
  const Launch done = launch("--profile gpt2-large --deepspeed " + config(kTrainerConfig).string() +
                             " --per_device_train_batch_size=3 --fp16 --output_dir out");
  ASSERT_EQ(done.exitCode, 0) << done.err;
  // gpt2-large's published best, z1_gas1_tmbspg3: 3 per GPU × 16 GPUs per step.
  const json measured = metrics();
  EXPECT_NEAR(measured.at("throughput").get<double>(), 87.3017, 0.05 * 87.3017);
  EXPECT_NEAR(measured.at("latency").get<double>(),
              48 * 1e6 / measured.at("throughput").get<double>(), 1e-6);
}

TEST_F(TrialSim, ATrainerLaunchRefusesANumberThatDisagreesWithItsFlag) {
  const Launch failed = launch("--deepspeed " + config(kGpt2LargeBest).string() +
                               " --per_device_train_batch_size 8 --gradient_accumulation_steps 1");
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(failed.err,
            "ValueError: Please correct the following DeepSpeed config values that mismatch "
            "TrainingArguments values:\n"
            "- ds train_micro_batch_size_per_gpu=3 vs hf per_device_train_batch_size=8\n"
            "The easiest method is to set these DeepSpeed config values to 'auto'.\n");
  EXPECT_FALSE(fs::exists(directory_ / "metrics.json"));
}

TEST_F(TrialSim, ABadTrainerFlagIsAUsageError) {
  const Launch refused =
      launch("--deepspeed " + config(kTrainerConfig).string() + " --gradient_accumulation_steps x");
  EXPECT_EQ(refused.exitCode, 2);
  EXPECT_TRUE(contains(refused.err,
                       "--gradient_accumulation_steps: expected a positive integer, got \"x\""))
      << refused.err;
}

TEST_F(TrialSim, AMissingOrBrokenConfigFailsTheLaunch) {
  const Launch missing = launch("");
  EXPECT_EQ(missing.exitCode, 1);
  EXPECT_TRUE(contains(missing.err, "no DeepSpeed config")) << missing.err;
  const Launch unreadable = launch("--deepspeed " + (directory_ / "absent.json").string());
  EXPECT_EQ(unreadable.exitCode, 1);
  EXPECT_TRUE(contains(unreadable.err, "cannot read")) << unreadable.err;
  const Launch broken = launch("--deepspeed " + write("broken.json", "{").string());
  EXPECT_EQ(broken.exitCode, 1);
  EXPECT_TRUE(contains(broken.err, "JSONDecodeError")) << broken.err;
}

TEST_F(TrialSim, AnUnknownProfileIsAUsageErrorThatListsTheBuiltInOnes) {
  const Launch refused = launch("--profile gpt5 --deepspeed " + config(kGpt2LargeBest).string());
  EXPECT_EQ(refused.exitCode, 2);
  EXPECT_TRUE(contains(refused.err,
                       "distilbert, bert-base, bert-large, gpt2, gpt2-medium, "
                       "gpt2-large, gpt2-xl, deberta"))
      << refused.err;
}

TEST_F(TrialSim, ACustomProfileFileDescribesAnotherModel) {
  const fs::path profile = write("tiny.json", R"({"name": "tiny", "numParameters": 1000000,
      "gpus": 16, "activationBytesPerSample": 1e9, "microsPerSample": 1000, "noise": 0})");
  json settings = kGpt2LargeBest;
  settings["train_micro_batch_size_per_gpu"] = 20;
  const Launch done =
      launch("--profile-file " + profile.string() + " --deepspeed " + config(settings).string());
  ASSERT_EQ(done.exitCode, 0) << done.err;
  // 20 samples per GPU at 1 ms each, 320 samples per step of 20 ms.
  EXPECT_NEAR(metrics().at("throughput").get<double>(), 16000, 1e-6);

  const fs::path wrong = write("wrong.json", R"({"name": "tiny"})");
  const Launch refused = launch("--profile-file " + wrong.string());
  EXPECT_EQ(refused.exitCode, 2);
  EXPECT_TRUE(contains(refused.err, "numParameters: is required")) << refused.err;
}

TEST_F(TrialSim, FailWithActsAsABrokenScript) {
  const Launch failed = launch("--fail-with 'ModuleNotFoundError: No module named transformers'");
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_EQ(failed.err, "ModuleNotFoundError: No module named transformers\n");
}

TEST_F(TrialSim, GarbageMetricsAreWrittenAndTheLaunchStillSucceeds) {
  const Launch done = launch("--garbage-metrics --deepspeed " + config(kGpt2LargeBest).string());
  ASSERT_EQ(done.exitCode, 0) << done.err;
  EXPECT_TRUE(json::parse(readText(directory_ / "metrics.json"), nullptr, false).is_discarded());
}

TEST_F(TrialSim, EveryLaunchAppendsItsTrialToTheLaunchLogWithoutInterleaving) {
  const fs::path log = directory_ / "launches.log";
  ASSERT_EQ(
      launch("--launch-log " + log.string() + " --fail-with x", "AUTOTUNE_TRIAL=first").exitCode,
      1);
  ASSERT_EQ(launch("--fail-with x", "AUTOTUNE_SIM_LAUNCH_LOG=" + log.string()).exitCode, 1);
  EXPECT_EQ(readText(log), "first\n-\n");

  const fs::path parallel = directory_ / "parallel.log";
  std::string many;
  for (int trial = 0; trial < 20; ++trial) {
    many += "AUTOTUNE_TRIAL=z1_gas1_tmbspg" + std::to_string(trial) + " " + TRIAL_SIM_BINARY +
            " --launch-log " + parallel.string() + " --fail-with x 2>/dev/null & ";
  }
  const std::string command = many + "wait";
  // NOLINTNEXTLINE(bugprone-command-processor,concurrency-mt-unsafe): a test command
  ASSERT_EQ(std::system(command.c_str()), 0);
  std::istringstream lines(readText(parallel));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_TRUE(line.starts_with("z1_gas1_tmbspg")) << line;
  }
  EXPECT_EQ(count, 20);
}

TEST_F(TrialSim, AnOutOfMemoryRankFailsLikeAConfigThatDoesNotFit) {
  const Launch failed = launch("--oom-rank 0 --deepspeed " + config(kGpt2LargeBest).string());
  EXPECT_EQ(failed.exitCode, 1);
  EXPECT_TRUE(
      contains(failed.err, "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate"))
      << failed.err;
  EXPECT_FALSE(fs::exists(directory_ / "metrics.json"));
  // Another rank's switch leaves a single-node launch alone.
  EXPECT_EQ(
      launch("--deepspeed " + config(kGpt2LargeBest).string(), "AUTOTUNE_SIM_OOM_RANK=1").exitCode,
      0);
}

// Two nodes of 8 GPUs: gpt2-large's published best on 16 GPUs.
const std::string kEightGpus = "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7";

TEST_F(TrialSim, TwoNodesMeetAndOnlyRankZeroWritesTheMetrics) {
  const fs::path log = directory_ / "launches.log";
  const auto nodes = launchNodes(
      2, "127.0.0.1", freePort(),
      "--profile gpt2-large --deepspeed " + localConfig(kGpt2LargeBest).string(),
      kEightGpus + " AUTOTUNE_TRIAL=z1_gas1_tmbspg3 AUTOTUNE_SIM_LAUNCH_LOG=" + log.string());
  ASSERT_EQ(nodes[0].exitCode, 0) << nodes[0].err;
  ASSERT_EQ(nodes[1].exitCode, 0) << nodes[1].err;
  EXPECT_TRUE(contains(nodes[0].out, "Autotuning: done with running current ds config."));
  EXPECT_FALSE(fs::exists(directory_ / "rank1" / "metrics.json"));
  // The world is both nodes' GPUs: 3 samples per GPU on 16 GPUs per step.
  const json measured = json::parse(readText(directory_ / "rank0" / "metrics.json"));
  EXPECT_NEAR(measured.at("throughput").get<double>(), 87.3017, 0.05 * 87.3017);
  EXPECT_NEAR(measured.at("latency").get<double>(),
              48 * 1e6 / measured.at("throughput").get<double>(), 1e-6);
  EXPECT_EQ(measured.at("rank"), 0);
  // One launch, however many nodes it spans.
  EXPECT_EQ(readText(log), "z1_gas1_tmbspg3\n");
}

TEST_F(TrialSim, TheBatchIsCheckedAgainstTheGpusOfEveryNode) {
  json settings = kGpt2LargeBest;
  settings["train_batch_size"] = 24;
  const auto nodes = launchNodes(2, "127.0.0.1", freePort(),
                                 "--deepspeed " + localConfig(settings).string(), kEightGpus);
  for (const Launch& node : nodes) {
    EXPECT_EQ(node.exitCode, 1);
    EXPECT_EQ(node.err,
              "AssertionError: Check batch related parameters. train_batch_size is not equal to "
              "micro_batch_per_gpu * gradient_acc_step * world_size 24 != 3 * 1 * 16\n");
  }
  EXPECT_FALSE(fs::exists(directory_ / "rank0" / "metrics.json"));
}

TEST_F(TrialSim, APeerOutOfMemoryFailsRankZeroWithoutMetrics) {
  const auto nodes =
      launchNodes(2, "127.0.0.1", freePort(), "--deepspeed " + localConfig(kGpt2LargeBest).string(),
                  "AUTOTUNE_SIM_OOM_RANK=1");
  EXPECT_EQ(nodes[1].exitCode, 1);
  EXPECT_TRUE(nodes[1].err.starts_with(
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate"))
      << nodes[1].err;
  EXPECT_EQ(nodes[0].exitCode, 1);
  EXPECT_FALSE(fs::exists(directory_ / "rank0" / "metrics.json"));
  // Rank 0's log names the peer and carries its error, so the trial reads as out of memory.
  EXPECT_EQ(nodes[0].err, "node rank 1 of 2 failed with exit status 1: " + nodes[1].err);
}

TEST_F(TrialSim, TwoLaunchesUseOnePortEachOnItsOwnAddress) {
  const int port = freePort();
  const fs::path config = localConfig(kGpt2LargeBest);
  std::string command;
  for (const std::string address : {"127.0.0.2", "127.0.0.3"}) {
    for (int rank = 0; rank < 2; ++rank) {
      const fs::path folder = directory_ / (address + "-rank" + std::to_string(rank));
      fs::create_directories(folder);
      command += "(" +
                 commandIn(folder, "--deepspeed " + config.string(),
                           "AUTOTUNE_NUM_NODES=2 AUTOTUNE_NODE_RANK=" + std::to_string(rank) +
                               " AUTOTUNE_MASTER_ADDR=" + address +
                               " AUTOTUNE_MASTER_PORT=" + std::to_string(port)) +
                 "; echo $? >status.txt) & ";
    }
  }
  // NOLINTNEXTLINE(bugprone-command-processor,concurrency-mt-unsafe): a test command
  ASSERT_EQ(std::system((command + "wait").c_str()), 0);
  for (const std::string address : {"127.0.0.2", "127.0.0.3"}) {
    const fs::path rankZero = directory_ / (address + "-rank0");
    EXPECT_EQ(readText(rankZero / "status.txt"), "0\n") << readText(rankZero / "stderr.txt");
    EXPECT_TRUE(fs::exists(rankZero / "metrics.json")) << address;
    EXPECT_EQ(readText(directory_ / (address + "-rank1") / "status.txt"), "0\n");
  }
}

TEST_F(TrialSim, ARendezvousWithoutItsPeersTimesOutWithAClearError) {
  const int port = freePort();
  const std::string arguments =
      "--rendezvous-timeout 0.5 --deepspeed " + localConfig(kGpt2LargeBest).string();
  const std::string group =
      "AUTOTUNE_NUM_NODES=2 AUTOTUNE_MASTER_ADDR=127.0.0.1 "
      "AUTOTUNE_MASTER_PORT=" +
      std::to_string(port);
  const std::string prefix =
      "rendezvous with 127.0.0.1:" + std::to_string(port) + " timed out after 0.5 s (";
  const Launch alone = launch(arguments, group + " AUTOTUNE_NODE_RANK=0");
  EXPECT_EQ(alone.exitCode, 1);
  EXPECT_EQ(alone.err, prefix + "1 of 2 nodes joined; missing node ranks 1)\n");
  const Launch lost = launch(arguments, group + " AUTOTUNE_NODE_RANK=1");
  EXPECT_EQ(lost.exitCode, 1);
  EXPECT_EQ(lost.err, prefix + "node rank 1 of 2: connect: Connection refused)\n");
  EXPECT_FALSE(fs::exists(directory_ / "metrics.json"));
}

TEST_F(TrialSim, HelpListsTheFlagsAndTheBuiltInProfiles) {
  const Launch help = launch("--help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_TRUE(contains(help.out, "--startup-seconds")) << help.out;
  EXPECT_TRUE(contains(help.out, "--oom-rank R")) << help.out;
  EXPECT_TRUE(contains(help.out, "AUTOTUNE_SIM_OOM_RANK")) << help.out;
  EXPECT_TRUE(contains(help.out, "Built-in profiles: distilbert")) << help.out;
}

}  // namespace
