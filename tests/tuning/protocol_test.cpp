#include "tuning/protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/job.h"
#include "support/fast_trial.h"
#include "support/text.h"
#include "tuning/space.h"

namespace {

using autotune::api::MeasuredModel;
using autotune::api::Metric;
using autotune::api::Outcome;
using autotune::api::Spec;
using autotune::api::TrialRecord;
using autotune::testing::contains;
using autotune::testing::fastTrial;
using autotune::tuning::askedGlobalBatch;
using autotune::tuning::Classification;
using autotune::tuning::classify;
using autotune::tuning::describeSpace;
using autotune::tuning::howTheConfigIsPassed;
using autotune::tuning::launchConfig;
using autotune::tuning::makeProfileTrial;
using autotune::tuning::mentionsOutOfMemory;
using autotune::tuning::protocolEnvironment;
using autotune::tuning::RecordedExit;
using autotune::tuning::recordExit;
using autotune::tuning::shellJoin;
using autotune::tuning::substitutePlaceholders;
using autotune::tuning::tail;
using autotune::tuning::Trial;
using autotune::tuning::trialCommand;
using autotune::tuning::TrialExit;
using autotune::tuning::TrialFiles;
using nlohmann::json;

constexpr std::string_view kConfigPath = "/etc/autotune/ds_config.json";
constexpr std::string_view kMetrics =
    R"({"throughput": 87.3, "latency": 5865000.0, "FLOPS_per_gpu": 1.2e13, "flops": 7})";
constexpr std::string_view kPyTorchOutOfMemory =
    "Traceback (most recent call last):\n"
    "  File \"train.py\", line 212, in <module>\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 31.75 "
    "GiB total capacity; 28.12 GiB already allocated; 1.43 GiB free)\n";

const TrialFiles kFiles{"/runs/gpt2/results/z1_gas1_tmbspg3/ds_config.json",
                        "/runs/gpt2/results/z1_gas1_tmbspg3/metrics.json"};

Spec specWithArgs(json args, int gpus = 1) {
  Spec spec;
  spec.deepspeedConfig = {{"zero_optimization", {{"stage", "all"}}},
                          {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 0.0001}}}}},
                          {"fp16", {{"enabled", true}}}};
  spec.resources.gpusPerTrial = gpus;
  spec.podTemplate = {
      {"spec",
       {{"containers",
         {{{"name", "trainer"}, {"command", {"deepspeed", "train.py"}}, {"args", args}}}}}}};
  return spec;
}

Spec plainSpec() { return specWithArgs(json::array()); }

std::vector<std::string> command(const Spec& spec, const Trial& trial) {
  return trialCommand(spec, "gpt2-large", trial, kConfigPath);
}

TrialExit exitedWith(int code, std::string message = "",
                     std::optional<std::string> metrics = std::nullopt) {
  TrialExit exit;
  exit.exitCode = code;
  exit.message = std::move(message);
  exit.metrics = std::move(metrics);
  return exit;
}

TrialExit succeededWith(std::string_view metrics, std::string message = "") {
  return exitedWith(0, std::move(message), std::string(metrics));
}

Classification classifyFast(const TrialExit& exit, Metric metric = Metric::kThroughput) {
  return classify(exit, metric, false);
}

// --- classify: clean exits ----------------------------------------------------------------------

TEST(Classify, ACleanExitWithMetricsSucceedsWithTheMeasuredThroughput) {
  const auto result = classifyFast(succeededWith(kMetrics));
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  EXPECT_EQ(result.value, 87.3);
  EXPECT_EQ(result.measured, std::nullopt);
}

TEST(Classify, ASucceededTrialsRecordKeepsAllItsMetricsAndAFailedOneNone) {
  const TrialExit succeeded = succeededWith(kMetrics);
  // "flops": 7 is not what DeepSpeed writes; FLOPS_per_gpu is.
  const std::map<std::string, double> expected{
      {"flops", 1.2e13}, {"latency", 5865000.0}, {"throughput", 87.3}};
  EXPECT_EQ(classifyFast(succeeded).metrics, expected);
  const TrialExit failed = exitedWith(1, "ValueError: unknown optimizer Adamw\n");
  EXPECT_TRUE(classifyFast(failed).metrics.empty());
}

TEST(Classify, TheLatencyMetricIsReadFromLatency) {
  const auto result = classifyFast(succeededWith(kMetrics), Metric::kLatency);
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  EXPECT_EQ(result.value, 5865000.0);
}

TEST(Classify, TheFlopsMetricIsReadFromFlopsPerGpuAsDeepSpeedWritesIt) {
  const auto result = classifyFast(succeededWith(kMetrics), Metric::kFlops);
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  EXPECT_EQ(result.value, 1.2e13);
}

TEST(Classify, ACleanExitWithoutAMetricsFileIsMetricsUnavailable) {
  const auto result = classifyFast(exitedWith(0));
  EXPECT_EQ(result.outcome, Outcome::kMetricsUnavailable);
  EXPECT_EQ(result.value, std::nullopt);
  EXPECT_FALSE(result.reason.empty());
}

// A metrics file of 4 KiB whose throughput is an object: the reason quotes it, within 256 bytes
// of valid UTF-8.
TEST(Classify, AHugeUnusableMetricsValueGivesABoundedReason) {
  const std::string big(4000, 'x');
  const auto result =
      classifyFast(succeededWith(R"({"throughput": {"a": ")" + big + "\xE2\x96\x88" + R"("}})"));
  EXPECT_EQ(result.outcome, Outcome::kMetricsUnavailable);
  EXPECT_LE(result.reason.size(), 256U);
  EXPECT_NE(result.reason.find("throughput"), std::string::npos) << result.reason;
  EXPECT_NO_THROW((void)nlohmann::json(result.reason).dump());
}

TEST(Classify, ACleanExitWithGarbageMetricsIsMetricsUnavailableAndSaysWhy) {
  const auto garbage = classifyFast(succeededWith("throughput=87.3"));
  EXPECT_EQ(garbage.outcome, Outcome::kMetricsUnavailable);
  EXPECT_EQ(garbage.value, std::nullopt);
  EXPECT_TRUE(contains(garbage.reason, "not a JSON object")) << garbage.reason;

  const auto missing = classifyFast(succeededWith(R"({"latency": 5865000.0})"));
  EXPECT_EQ(missing.outcome, Outcome::kMetricsUnavailable);
  EXPECT_TRUE(contains(missing.reason, "throughput")) << missing.reason;
}

TEST(Classify, AStrayOutOfMemoryWarningDoesNotSpoilATrialThatMeasured) {
  const auto result =
      classifyFast(succeededWith(kMetrics,
                                 "[WARNING] CUDA out of memory while probing the bucket size; "
                                 "retrying with a smaller one\n"));
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  EXPECT_EQ(result.value, 87.3);
}

TEST(Classify, AWarningThatSaysErrorDoesNotFailASuccessfulTrial) {
  // DeepSpeed's own autotuner marks any stderr containing "error" as a failure (defect B9).
  const auto result = classifyFast(succeededWith(
      kMetrics,
      "/usr/lib/python3/dist-packages/torch/utils/checkpoint.py:31: UserWarning: None of the "
      "inputs have requires_grad=True; this will be an error in a future release\n"));
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  EXPECT_EQ(result.value, 87.3);
  EXPECT_TRUE(result.reason.empty()) << result.reason;
}

TEST(Classify, ACleanExitWithoutMetricsButAnOutOfMemoryErrorIsOOM) {
  const auto result = classifyFast(exitedWith(0, std::string(kPyTorchOutOfMemory)));
  EXPECT_EQ(result.outcome, Outcome::kOOM);
  EXPECT_EQ(result.value, std::nullopt);
}

// --- classify: failures -------------------------------------------------------------------------

TEST(Classify, APyTorchOutOfMemoryErrorIsOOMWithTheMessageAsReason) {
  const auto result = classifyFast(exitedWith(1, std::string(kPyTorchOutOfMemory)));
  EXPECT_EQ(result.outcome, Outcome::kOOM);
  EXPECT_TRUE(contains(result.reason, "CUDA out of memory. Tried to allocate 2.00 GiB"))
      << result.reason;
}

TEST(Classify, OOMKilledIsOOMWhateverTheMessage) {
  TrialExit exit = exitedWith(137, "Killed");
  exit.oomKilled = true;
  const auto result = classifyFast(exit);
  EXPECT_EQ(result.outcome, Outcome::kOOM);
  EXPECT_EQ(result.reason, "OOMKilled");
}

TEST(Classify, AnotherNonZeroExitIsFailedWithTheExitCodeAndMessage) {
  const auto result = classifyFast(exitedWith(1, "ValueError: unknown optimizer Adamw\n"));
  EXPECT_EQ(result.outcome, Outcome::kFailed);
  EXPECT_EQ(result.value, std::nullopt);
  EXPECT_EQ(result.reason, "exited 1: ValueError: unknown optimizer Adamw");
}

TEST(Classify, ANonZeroExitWithoutMessageNamesTheExitCode) {
  const auto result = classifyFast(exitedWith(2));
  EXPECT_EQ(result.outcome, Outcome::kFailed);
  EXPECT_EQ(result.reason, "exited 2");
}

TEST(Classify, ANonZeroExitIsFailedEvenWithValidMetrics) {
  const auto result = classifyFast(exitedWith(1, "Segmentation fault", std::string(kMetrics)));
  EXPECT_EQ(result.outcome, Outcome::kFailed);
  EXPECT_EQ(result.value, std::nullopt);
}

TEST(Classify, KilledByASignalIsFailedNamingTheSignal) {
  TrialExit exit;
  exit.signal = 9;
  const auto result = classifyFast(exit);
  EXPECT_EQ(result.outcome, Outcome::kFailed);
  EXPECT_EQ(result.reason, "killed by signal 9");
}

TEST(Classify, TimedOutWinsOverACleanExitWithMetrics) {
  TrialExit exit = succeededWith(kMetrics);
  exit.timedOut = true;
  const auto result = classifyFast(exit);
  EXPECT_EQ(result.outcome, Outcome::kTimedOut);
  EXPECT_EQ(result.value, std::nullopt);
}

TEST(Classify, TimedOutWinsOverAnOutOfMemoryError) {
  TrialExit exit = exitedWith(1, std::string(kPyTorchOutOfMemory));
  exit.timedOut = true;
  exit.oomKilled = true;
  EXPECT_EQ(classifyFast(exit).outcome, Outcome::kTimedOut);
}

// Every finished trial keeps its reason in status.results: 256 bytes at most.
TEST(Classify, ALongMessageIsCutToItsTailInTheReason) {
  std::string message;
  for (int line = 0; line < 100; ++line) {
    message += "  frame " + std::to_string(line) + " of a very long Python traceback ......\n";
  }
  message += "RuntimeError: NCCL communicator was aborted\n";
  ASSERT_GT(message.size(), 2048U);
  const auto result = classifyFast(exitedWith(1, message));
  EXPECT_EQ(result.outcome, Outcome::kFailed);
  const std::string prefix = "exited 1: ";
  ASSERT_TRUE(result.reason.starts_with(prefix)) << result.reason;
  const std::string cut = result.reason.substr(prefix.size());
  EXPECT_LE(result.reason.size(), 256U);
  EXPECT_TRUE(cut.ends_with("RuntimeError: NCCL communicator was aborted")) << cut;
  EXPECT_TRUE(cut.starts_with("  frame ")) << cut;
  EXPECT_FALSE(contains(cut, "frame 0 ")) << cut;
}

// --- classify: the profiling trial --------------------------------------------------------------

TEST(Classify, AProfilingTrialSucceedsWithTheMeasuredModel) {
  const auto result =
      classify(succeededWith(R"({"num_params": 774000000, "activation_mem_per_gpu": 9600000000})"),
               Metric::kThroughput, true);
  EXPECT_EQ(result.outcome, Outcome::kSucceeded);
  ASSERT_TRUE(result.measured.has_value());
  EXPECT_EQ(result.measured->numParameters, 774000000);
  EXPECT_EQ(result.measured->activationMemoryPerSample, 9600000000);
}

// Whatever number a trial writes is held within a byte count's range before it is converted.
TEST(Classify, AProfilingTrialsActivationMemoryIsHeldWithinRange) {
  const auto measured = [](const std::string& activation) {
    const auto result = classify(
        succeededWith(R"({"num_params": 774000000, "activation_mem_per_gpu": )" + activation + "}"),
        Metric::kThroughput, true);
    EXPECT_EQ(result.outcome, Outcome::kSucceeded) << activation;
    return result.measured.value_or(MeasuredModel{}).activationMemoryPerSample;
  };
  EXPECT_EQ(measured("1e300"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(measured("18446744073709551615"), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(measured("-5"), 0);
  EXPECT_EQ(measured("-1e300"), 0);
  EXPECT_EQ(measured("1.5e9"), 1500000000);
}

TEST(Classify, AProfilingTrialWithoutNumParamsIsMetricsUnavailable) {
  const auto result = classify(succeededWith(R"({"activation_mem_per_gpu": 9600000000})"),
                               Metric::kThroughput, true);
  EXPECT_EQ(result.outcome, Outcome::kMetricsUnavailable);
  EXPECT_EQ(result.measured, std::nullopt);
  EXPECT_FALSE(result.reason.empty());
}

TEST(Classify, AProfilingTrialReadsModelInfoNotTheSearchMetric) {
  const auto result = classify(succeededWith(kMetrics), Metric::kThroughput, true);
  EXPECT_EQ(result.outcome, Outcome::kMetricsUnavailable);
  EXPECT_EQ(result.measured, std::nullopt);
}

// --- recordExit ---------------------------------------------------------------------------------

// kMetrics are those of a global batch of 512: 87.3 samples/s over 5.865 s a step, as
// z1_gas1_tmbspg32 on 16 GPUs runs.
constexpr std::string_view kTrial = "z1_gas1_tmbspg32";

RecordedExit recordOn(int gpus, std::string_view metrics, std::string_view trial = kTrial) {
  return recordExit(trial, "z1", succeededWith(metrics), specWithArgs(json::array(), gpus), false,
                    "2026-01-02T03:04:05Z", 1);
}

// kMetrics and what the engine of z1_gas1_tmbspg32 on 16 GPUs reports it ran, with `changed`.
std::string withEffective(const json& changed = json::object()) {
  json metrics = json::parse(kMetrics);
  metrics["effective"] = {{"train_micro_batch_size_per_gpu", 32},
                          {"gradient_accumulation_steps", 1},
                          {"zero_optimization.stage", 1},
                          {"dp_world_size", 16}};
  metrics["effective"].update(changed);
  return metrics.dump();
}

TEST(RecordExit, ARecordHoldsTheClassificationUnderTheTrialsNameAndTimes) {
  const auto recorded =
      recordExit(kTrial, "z1", succeededWith(kMetrics), specWithArgs(json::array(), 16), false,
                 "2026-01-02T03:04:05.678Z", 42.5);
  const std::map<std::string, double> metrics{
      {"flops", 1.2e13}, {"latency", 5865000.0}, {"throughput", 87.3}};
  TrialRecord expected;
  expected.name = kTrial;
  expected.space = "z1";
  expected.outcome = Outcome::kSucceeded;
  expected.value = 87.3;
  expected.startTime = "2026-01-02T03:04:05.678Z";
  expected.durationSeconds = 42.5;
  expected.metrics = metrics;
  expected.configVerified = false;
  EXPECT_EQ(recorded.record, expected);
  EXPECT_EQ(recorded.measured, std::nullopt);
}

TEST(RecordExit, AFailedTrialKeepsItsReasonAndNoMetrics) {
  const auto recorded = recordExit(kTrial, "z1", exitedWith(1, "ValueError: bad\n"), plainSpec(),
                                   false, "2026-01-02T03:04:05Z", 1);
  EXPECT_EQ(recorded.record.outcome, Outcome::kFailed);
  EXPECT_EQ(recorded.record.reason, "exited 1: ValueError: bad");
  EXPECT_EQ(recorded.record.value, std::nullopt);
  EXPECT_TRUE(recorded.record.metrics.empty());
  EXPECT_EQ(recorded.record.configVerified, std::nullopt) << "nothing measured to verify";
}

TEST(RecordExit, AProfilingTrialHandsOverTheMeasuredModel) {
  const auto recorded = recordExit("profile_model_info", "profile_model_info",
                                   succeededWith(R"({"num_params": 774000000})"), plainSpec(), true,
                                   "2026-01-02T03:04:05Z", 1);
  EXPECT_EQ(recorded.record.outcome, Outcome::kSucceeded);
  ASSERT_TRUE(recorded.measured.has_value());
  EXPECT_EQ(recorded.measured->numParameters, 774000000);
}

TEST(RecordExit, ASuccessThatRanAnotherGlobalBatchIsConfigNotApplied) {
  EXPECT_EQ(recordOn(16, kMetrics).record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(recordOn(16, R"({"throughput": 87.3, "latency": 5845000.0})").record.outcome,
            Outcome::kSucceeded)
      << "within rounding";
  const auto other = recordOn(7, kMetrics);
  EXPECT_EQ(other.record.outcome, Outcome::kConfigNotApplied);
  EXPECT_EQ(other.record.value, std::nullopt) << "no measurement of the trial's config";
  EXPECT_NE(other.record.reason.find("the engine ran a global batch of 512"), std::string::npos)
      << other.record.reason;
  EXPECT_NE(other.record.reason.find("not the 224"), std::string::npos);
  EXPECT_LE(other.record.reason.size(), 256U);
  EXPECT_EQ(recordOn(7, R"({"throughput": 87.3})").record.outcome, Outcome::kSucceeded)
      << "without a latency nothing can be told";
}

TEST(RecordExit, EffectiveValuesThatAgreeVerifyTheConfigAndOneThatDiffersIsConfigNotApplied) {
  const auto agreed = recordOn(16, withEffective());
  EXPECT_EQ(agreed.record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(agreed.record.configVerified, true);
  EXPECT_EQ(recordOn(16, kMetrics).record.configVerified, false) << "reported none";

  // The stage a script fixes for itself leaves the global batch as asked: only the report shows.
  const auto otherStage = recordOn(16, withEffective({{"zero_optimization.stage", 2}}));
  EXPECT_EQ(otherStage.record.outcome, Outcome::kConfigNotApplied);
  EXPECT_EQ(otherStage.record.configVerified, std::nullopt);
  EXPECT_EQ(otherStage.record.reason,
            "the engine ran zero_optimization.stage = 2, not the 1 the trial's config asks: the "
            "command does not pass the trial's config, or the script or DeepSpeed overrides it");
  EXPECT_EQ(recordOn(16, withEffective({{"dp_world_size", 8}})).record.outcome,
            Outcome::kConfigNotApplied);
  EXPECT_EQ(recordOn(16, withEffective({{"fp16.enabled", false}})).record.reason,
            "the engine ran fp16.enabled = false, not the true the trial's config asks: the "
            "command does not pass the trial's config, or the script or DeepSpeed overrides it");

  // Keys that say nothing of the trial are passed over: unknown, a section, a list, null.
  const auto passedOver =
      recordOn(16, withEffective({{"steps_per_print", 10},
                                  {"zero_optimization.offload_param", {{"a", 1}}},
                                  {"optimizer.params.betas", {0.9, 0.999}},
                                  {"gradient_clipping", nullptr}}));
  EXPECT_EQ(passedOver.record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(passedOver.record.configVerified, true);
  const auto nothingKnown = recordOn(
      16,
      json{{"throughput", 87.3}, {"latency", 5865000.0}, {"effective", {{"steps_per_print", 10}}}}
          .dump());
  EXPECT_EQ(nothingKnown.record.configVerified, false) << "nothing checked is nothing verified";
}

TEST(RecordExit, ATunedKeyIsHeldToTheCandidateTheTrialsNameSpells) {
  Spec spec = specWithArgs(json::array(), 16);
  spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = {50000000, 500000000};
  spec.deepspeedConfig["gradient_clipping"] = {0.5, 1};
  const std::string trial = "z1_rbs5.0e+07_gas1_tmbspg32_gc1";
  const auto reported = [&](const json& ran) {
    json metrics = json::parse(withEffective());
    metrics["effective"].update(ran);
    return recordExit(trial, "z1_rbs_tmbspg", succeededWith(metrics.dump()), spec, false,
                      "2026-01-02T03:04:05Z", 1)
        .record;
  };
  // The engine reads numbers back as floats: 5.0e7 and 1.0 are the candidates 50000000 and 1.
  EXPECT_EQ(reported({{"zero_optimization.reduce_bucket_size", 5e7}, {"gradient_clipping", 1.0}})
                .configVerified,
            true);
  const TrialRecord other = reported({{"zero_optimization.reduce_bucket_size", 5e8}});
  EXPECT_EQ(other.outcome, Outcome::kConfigNotApplied);
  EXPECT_EQ(other.reason,
            "the engine ran zero_optimization.reduce_bucket_size = 500000000.0, not the 50000000 "
            "the trial's config asks: the command does not pass the trial's config, or the script "
            "or DeepSpeed overrides it");
}

TEST(Classify, HuggingFacesRefusalOfAContradictedConfigIsConfigNotApplied) {
  const auto result =
      classifyFast(exitedWith(1,
                              "Traceback (most recent call last):\n"
                              "ValueError: Please correct the following DeepSpeed config values "
                              "that mismatch TrainingArguments values:\n"
                              "- ds train_micro_batch_size_per_gpu=14 vs hf "
                              "per_device_train_batch_size=1\n"
                              "The easiest method is to set these DeepSpeed config values to "
                              "'auto'.\n"));
  EXPECT_EQ(result.outcome, Outcome::kConfigNotApplied);
  EXPECT_NE(result.reason.find("train_micro_batch_size_per_gpu=14 vs hf "
                               "per_device_train_batch_size=1"),
            std::string::npos)
      << result.reason;
  EXPECT_NE(result.reason.find("spec.argMappings"), std::string::npos);

  // The global batch the Trainer calculates from the GPUs it sees: fewer GPUs than the trial asked
  // for (a ResourceClaimTemplate of another count) show here.
  const auto fewerGpus = classifyFast(
      exitedWith(1,
                 "ValueError: Please correct the following DeepSpeed config values that mismatch "
                 "TrainingArguments values:\n- ds train_batch_size=32 vs hf train_batch_size "
                 "(calculated)=16\n"));
  EXPECT_EQ(fewerGpus.outcome, Outcome::kConfigNotApplied);
  EXPECT_EQ(fewerGpus.reason,
            "the Trainer's flags contradict the trial's config (train_batch_size=32 vs hf "
            "train_batch_size (calculated)=16): the trial had another number of GPUs than "
            "spec.resources.gpusPerTrial, or the Trainer another gradient accumulation");
}

TEST(AskedGlobalBatch, IsMicroBatchTimesAccumulationTimesDataParallelRanks) {
  Spec spec = specWithArgs(json::array(), 16);
  EXPECT_EQ(askedGlobalBatch(spec, "z1_gas2_tmbspg4"), 128);
  EXPECT_EQ(askedGlobalBatch(spec, "z1_rbs5.0e+08_gas1_tmbspg11"), 176);
  EXPECT_EQ(askedGlobalBatch(spec, "z3_tmbspg4_gas2"), 128) << "gas after tmbspg";
  EXPECT_EQ(askedGlobalBatch(spec, "profile_model_info"), std::nullopt);
  EXPECT_EQ(askedGlobalBatch(spec, "z1_abs1.0e+09_gas1_tmbspg3~0123456789abcdef"), std::nullopt)
      << "a name cut short";
  spec.resources.modelParallelSize = 4;
  EXPECT_EQ(askedGlobalBatch(spec, "z1_gas2_tmbspg4"), 32);
}

// --- launchConfig -------------------------------------------------------------------------------

TEST(LaunchConfig, EnablesAutotuningWithTheMetricsPathAndDefaultProfileSteps) {
  const Spec spec = plainSpec();
  const json config = launchConfig(spec, fastTrial(spec, 1, 3, 1), kFiles);
  EXPECT_EQ(config["autotuning"], json({{"enabled", true},
                                        {"metric_path", kFiles.metrics},
                                        {"start_profile_step", 3},
                                        {"end_profile_step", 5}}));
}

TEST(LaunchConfig, KeepsTheProfileStepsTheUserSet) {
  Spec spec = plainSpec();
  spec.deepspeedConfig["autotuning"] = {
      {"enabled", true}, {"start_profile_step", 10}, {"end_profile_step", 20}};
  const json config = launchConfig(spec, fastTrial(spec, 1, 3, 1), kFiles);
  EXPECT_EQ(config["autotuning"]["start_profile_step"], 10);
  EXPECT_EQ(config["autotuning"]["end_profile_step"], 20);
  EXPECT_EQ(config["autotuning"]["metric_path"], kFiles.metrics);
}

TEST(LaunchConfig, AProfilingTrialAsksForModelInfoInsteadOfMetrics) {
  const Spec spec = plainSpec();
  const TrialFiles files{"/runs/gpt2/results/profile_model_info/ds_config.json",
                         "/runs/gpt2/results/profile_model_info/model_info.json"};
  const json config = launchConfig(spec, makeProfileTrial(describeSpace(spec)), files);
  const json& autotuning = config["autotuning"];
  EXPECT_EQ(autotuning["enabled"], true);
  EXPECT_EQ(autotuning["model_info"], json({{"profile", true}}));
  EXPECT_EQ(autotuning["model_info_path"], files.metrics);
  EXPECT_FALSE(autotuning.contains("metric_path")) << autotuning.dump();
}

TEST(LaunchConfig, LeavesTheRestOfTheTrialConfigUnchanged) {
  const Spec spec = plainSpec();
  const Trial trial = fastTrial(spec, 2, 4, 1);
  json config = launchConfig(spec, trial, kFiles);
  ASSERT_TRUE(config.contains("autotuning"));
  config.erase("autotuning");
  EXPECT_EQ(config, trial.config);
}

// --- protocolEnvironment ------------------------------------------------------------------------

TEST(ProtocolEnvironment, NamesTheJobTheTrialTheConfigAndTheMetricsPath) {
  const Spec spec = plainSpec();
  const auto environment = protocolEnvironment("gpt2-large", fastTrial(spec, 1, 3, 1), kFiles);
  EXPECT_EQ(environment, (std::vector<std::pair<std::string, std::string>>{
                             {"AUTOTUNE_JOB", "gpt2-large"},
                             {"AUTOTUNE_TRIAL", "z1_gas1_tmbspg3"},
                             {"AUTOTUNE_DS_CONFIG", kFiles.config},
                             {"AUTOTUNE_METRICS_PATH", kFiles.metrics}}));
}

// --- mentionsOutOfMemory ------------------------------------------------------------------------

TEST(MentionsOutOfMemory, RecognisesCudaPyTorchCublasAndRocmErrors) {
  EXPECT_TRUE(mentionsOutOfMemory(kPyTorchOutOfMemory));
  EXPECT_TRUE(mentionsOutOfMemory("torch.OutOfMemoryError: Tried to allocate 20.00 MiB"));
  EXPECT_TRUE(mentionsOutOfMemory("RuntimeError: CUDA error: out of memory"));
  EXPECT_TRUE(mentionsOutOfMemory(
      "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"));
  EXPECT_TRUE(mentionsOutOfMemory("torch.OutOfMemoryError: HIP out of memory."));
}

TEST(MentionsOutOfMemory, IgnoresOtherErrors) {
  EXPECT_FALSE(mentionsOutOfMemory(""));
  EXPECT_FALSE(mentionsOutOfMemory("ValueError: unknown optimizer Adamw"));
  EXPECT_FALSE(mentionsOutOfMemory("RuntimeError: NCCL error: unhandled system error"));
  EXPECT_FALSE(mentionsOutOfMemory("[INFO] memory usage: 12.3 GiB of 31.7 GiB"));
}

// --- tail ---------------------------------------------------------------------------------------

TEST(Tail, KeepsAShortTextWhole) { EXPECT_EQ(tail("one\ntwo", 100), "one\ntwo"); }

TEST(Tail, DropsTrailingNewlinesAndSpaces) { EXPECT_EQ(tail("Killed \n\n", 100), "Killed"); }

// A tqdm bar has no newline to cut at, and is made of 3-byte characters.
TEST(Tail, CutsAProgressBarBetweenCharactersAsValidUtf8) {
  std::string bar;
  for (int i = 0; i < 500; ++i) {
    bar += "\xE2\x96\x88\r";
  }
  for (std::size_t bound = 100; bound < 110; ++bound) {
    const std::string last = tail(bar + "\xE2", bound);
    EXPECT_LE(last.size(), bound);
    EXPECT_NO_THROW((void)nlohmann::json(last).dump()) << bound;
  }
}

TEST(Tail, KeepsTheLastBytesFromALineStart) {
  EXPECT_EQ(tail("first line\nsecond line\nthird\n", 12), "third");
}

TEST(Tail, KeepsEveryWholeLineThatFits) {
  // The last 9 bytes start exactly at a line start: both lines fit.
  EXPECT_EQ(tail("aaaa\nbbbb\ncccc", 9), "bbbb\ncccc");
}

TEST(Tail, CutsALongSingleLineToItsLastBytes) { EXPECT_EQ(tail("0123456789abcdef", 6), "abcdef"); }

// --- substitutePlaceholders ---------------------------------------------------------------------

TEST(SubstitutePlaceholders, FillsInADottedConfigKey) {
  const Spec spec = plainSpec();
  EXPECT_EQ(substitutePlaceholders("--zero_stage=${zero_optimization.stage}",
                                   fastTrial(spec, 2, 4, 1), "gpt2-large"),
            "--zero_stage=2");
}

TEST(SubstitutePlaceholders, FillsInATopLevelConfigKey) {
  const Spec spec = plainSpec();
  EXPECT_EQ(substitutePlaceholders("${train_micro_batch_size_per_gpu}", fastTrial(spec, 2, 4, 1),
                                   "gpt2-large"),
            "4");
}

// Such keys are legal in JSON and YAML; a JSON pointer would have to escape them.
TEST(SubstitutePlaceholders, FillsInKeysHoldingATildeOrASlash) {
  Trial trial = fastTrial(plainSpec(), 1, 1, 1);
  trial.config["paths"] = {{"data/dir~1", "/mnt/data"}, {"~", 7}};
  EXPECT_EQ(substitutePlaceholders("--data=${paths.data/dir~1}", trial, "j"), "--data=/mnt/data");
  EXPECT_EQ(substitutePlaceholders("${data/dir~1} ${~}", trial, "j"), "/mnt/data 7");
  EXPECT_EQ(substitutePlaceholders("${paths.data/dir~1.deeper}", trial, "j"),
            "${paths.data/dir~1.deeper}");
}

TEST(SubstitutePlaceholders, FillsInAStringValueWithoutQuotes) {
  const Spec spec = plainSpec();
  EXPECT_EQ(
      substitutePlaceholders("--optim=${optimizer.type}", fastTrial(spec, 1, 1, 1), "gpt2-large"),
      "--optim=AdamW");
}

TEST(SubstitutePlaceholders, FillsInTheTrialAndTheJob) {
  const Spec spec = plainSpec();
  EXPECT_EQ(
      substitutePlaceholders("/out/${job}/${trial}/${trial}", fastTrial(spec, 1, 3, 1), "gpt2"),
      "/out/gpt2/z1_gas1_tmbspg3/z1_gas1_tmbspg3");
}

TEST(SubstitutePlaceholders, LeavesKubernetesVariablesAlone) {
  const Spec spec = plainSpec();
  EXPECT_EQ(substitutePlaceholders("$(POD_NAME)/${trial}/$(HOME)", fastTrial(spec, 1, 3, 1),
                                   "gpt2-large"),
            "$(POD_NAME)/z1_gas1_tmbspg3/$(HOME)");
}

TEST(SubstitutePlaceholders, LeavesATextWithoutPlaceholdersAsItIs) {
  const Spec spec = plainSpec();
  EXPECT_EQ(substitutePlaceholders("--fp16 $ {trial} ${", fastTrial(spec, 1, 3, 1), "gpt2-large"),
            "--fp16 $ {trial} ${");
}

// --- trialCommand -------------------------------------------------------------------------------

TEST(TrialCommand, PointsDeepSpeedFlagsAtTheTrialConfig) {
  const Spec spec =
      specWithArgs({"--deepspeed", "ds_config.json", "--deepspeed_config", "other.json"});
  const auto argv = command(spec, fastTrial(spec, 1, 3, 1));
  EXPECT_EQ(argv, (std::vector<std::string>{"deepspeed", "train.py", "--deepspeed",
                                            std::string(kConfigPath), "--deepspeed_config",
                                            std::string(kConfigPath)}));
}

TEST(TrialCommand, ReplacesAMappedFlagThatIsPresent) {
  Spec spec = specWithArgs({"--per_device_train_batch_size", "1", "--fp16"});
  spec.argMappings = {{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"}};
  const auto argv = command(spec, fastTrial(spec, 1, 6, 1));
  EXPECT_EQ(argv, (std::vector<std::string>{"deepspeed", "train.py",
                                            "--per_device_train_batch_size", "6", "--fp16"}));
}

TEST(TrialCommand, AppendsAMappedFlagThatIsAbsent) {
  Spec spec = specWithArgs({"--fp16"});
  spec.argMappings = {{"gradient_accumulation_steps", "--gradient_accumulation_steps"}};
  const auto argv = command(spec, fastTrial(spec, 1, 6, 2));
  EXPECT_EQ(argv, (std::vector<std::string>{"deepspeed", "train.py", "--fp16",
                                            "--gradient_accumulation_steps", "2"}));
}

TEST(TrialCommand, ReplacesAMappedFlagGivenWithEquals) {
  Spec spec = specWithArgs({"--per_device_train_batch_size=1"});
  spec.argMappings = {{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"}};
  const auto argv = command(spec, fastTrial(spec, 1, 6, 1));
  EXPECT_EQ(argv,
            (std::vector<std::string>{"deepspeed", "train.py", "--per_device_train_batch_size=6"}));
}

TEST(TrialCommand, FillsInPlaceholders) {
  const Spec spec = specWithArgs({"--zero_stage", "${zero_optimization.stage}",
                                  "--output_dir=/out/${job}/${trial}",
                                  "--batch=${train_micro_batch_size_per_gpu}"});
  const auto argv = command(spec, fastTrial(spec, 2, 4, 1));
  EXPECT_EQ(argv, (std::vector<std::string>{"deepspeed", "train.py", "--zero_stage", "2",
                                            "--output_dir=/out/gpt2-large/z2_gas1_tmbspg4",
                                            "--batch=4"}));
}

// A shell's -c script as the command, as launch scripts are: the mapped flag cannot go into the
// script's text, and after it, it would be the script's $0. It is one of the script's positional
// parameters, after the name the script runs under, which "$@" in the script passes on.
TEST(TrialCommand, AShellScriptGetsTheMappedFlagsAsItsArguments) {
  const std::string script = R"(trial-sim --profile gpt2 --deepspeed "$AUTOTUNE_DS_CONFIG" "$@")";
  Spec spec = plainSpec();
  spec.argMappings = {{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"}};
  spec.podTemplate["spec"]["containers"][0]["command"] = {"bash", "-c", script};
  const Trial trial = fastTrial(spec, 1, 14, 1);
  EXPECT_EQ(command(spec, trial),
            (std::vector<std::string>{"bash", "-c", script, "autotune-trial",
                                      "--per_device_train_batch_size", "14"}));

  // A name and arguments of its own after the script: the flag joins them, or replaces its own.
  spec.podTemplate["spec"]["containers"][0]["command"] = {"/bin/sh", "-ec", script};
  spec.podTemplate["spec"]["containers"][0]["args"] = {"train", "--per_device_train_batch_size",
                                                       "1", "--fp16"};
  EXPECT_EQ(command(spec, trial),
            (std::vector<std::string>{"/bin/sh", "-ec", script, "train",
                                      "--per_device_train_batch_size", "14", "--fp16"}));

  // Through env, with a shell option taking a value.
  spec.podTemplate["spec"]["containers"][0]["command"] = {
      "env", "NCCL_DEBUG=INFO", "bash", "-o", "pipefail", "-c", script};
  spec.podTemplate["spec"]["containers"][0]["args"] = json::array();
  EXPECT_EQ(command(spec, trial).back(), "14");
  EXPECT_EQ(command(spec, trial).at(7), "autotune-trial");
}

// What a search that failed for ConfigNotApplied tells of the command: where the config goes.
TEST(HowTheConfigIsPassed, NamesTheConfigFlagAndEachMappedFlag) {
  Spec spec = specWithArgs({"--deepspeed", "ds_config.json"});
  spec.argMappings = {{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"}};
  EXPECT_EQ(howTheConfigIsPassed(spec),
            "the command gets the trial's config as the file after --deepspeed, "
            "train_micro_batch_size_per_gpu as --per_device_train_batch_size");
  spec.podTemplate["spec"]["containers"][0]["command"] = {
      "bash", "-c", R"(python train.py --deepspeed "$AUTOTUNE_DS_CONFIG" "$@")"};
  spec.podTemplate["spec"]["containers"][0]["args"] = json::array();
  EXPECT_EQ(howTheConfigIsPassed(spec),
            "the command gets the trial's config only as $AUTOTUNE_DS_CONFIG (it has no "
            "--deepspeed or --deepspeed_config), train_micro_batch_size_per_gpu as "
            "--per_device_train_batch_size (appended after the shell script: it must pass them "
            "on with \"$@\")");
}

// "$${" is a literal "${" for the container's shell, and ${AUTOTUNE_...} the container's own
// variable: neither is a placeholder.
TEST(TrialCommand, EscapedAndContainerVariablesAreLeftForTheShell) {
  const Spec spec = specWithArgs({"--nproc=$${NPROC:-8}", "--home=$${HOME}/${trial}",
                                  "--config=${AUTOTUNE_DS_CONFIG}", "--pid=$$"});
  EXPECT_EQ(command(spec, fastTrial(spec, 1, 4, 1)),
            (std::vector<std::string>{"deepspeed", "train.py", "--nproc=${NPROC:-8}",
                                      "--home=${HOME}/z1_gas1_tmbspg4",
                                      "--config=${AUTOTUNE_DS_CONFIG}", "--pid=$$"}));
}

TEST(TrialCommand, UsesTheNamedPrimaryContainer) {
  Spec spec = specWithArgs({"--fp16"});
  spec.podTemplate["spec"]["containers"].insert(
      spec.podTemplate["spec"]["containers"].begin(),
      json({{"name", "sidecar"}, {"command", {"sleep", "infinity"}}}));
  spec.primaryContainer = "trainer";
  EXPECT_EQ(command(spec, fastTrial(spec, 1, 1, 1)),
            (std::vector<std::string>{"deepspeed", "train.py", "--fp16"}));
}

// --- shellJoin ----------------------------------------------------------------------------------

TEST(ShellJoin, LeavesPlainWordsAlone) {
  EXPECT_EQ(shellJoin({"deepspeed", "train.py", "--deepspeed", "/etc/autotune/ds_config.json"}),
            "deepspeed train.py --deepspeed /etc/autotune/ds_config.json");
}

TEST(ShellJoin, QuotesWordsWithSpacesOrQuotes) {
  EXPECT_EQ(shellJoin({"echo", "hello world", "it's", ""}), "echo 'hello world' 'it'\\''s' ''");
}

TEST(ShellJoin, QuotesShellVariablesAndPlaceholders) {
  EXPECT_EQ(shellJoin({"echo", "$HOME", "${trial}"}), "echo '$HOME' '${trial}'");
}

}  // namespace
