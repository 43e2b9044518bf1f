// Keys of spec.deepspeedConfig that DeepSpeed does not read: refused when the job would tune one,
// a warning otherwise, each naming the key DeepSpeed reads that was most likely meant.

#include "api/deepspeed_config_keys.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/codec.h"
#include "support/field_errors.h"

namespace autotune::api {

namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const std::string kAt = "spec.deepspeedConfig.";
const std::string kIgnored = "is not a DeepSpeed config key (DeepSpeed 0.19.8 ignores it)";

std::string jobWithConfig(const std::string& config) {
  return "apiVersion: autotune.io/v1alpha1\n"
         "kind: AutotuneJob\n"
         "metadata: {name: keys}\n"
         "spec:\n"
         "  deepspeedConfig: " +
         config +
         "\n"
         "  resources: {gpusPerTrial: 8}\n"
         "  template: {spec: {containers: [{name: trainer, command: [train]}]}}\n";
}

FieldErrors warningsFor(const std::string& config) {
  auto decoded = decodeYaml(jobWithConfig(config));
  EXPECT_TRUE(decoded.has_value()) << (decoded ? "" : format(decoded.error().front()));
  return decoded ? decoded->warnings : FieldErrors{};
}

FieldErrors errorsFor(const std::string& config) {
  auto decoded = decodeYaml(jobWithConfig(config));
  return decoded ? FieldErrors{} : decoded.error();
}

std::string sectionReason(const std::string& section, const std::string& meant) {
  return "is not a key of DeepSpeed's " + section +
         " section (DeepSpeed 0.19.8 refuses a config with it); did you mean " + meant + "?";
}

TEST(UnknownConfigKeys, AMisspeltKeyWithCandidatesIsRefusedNamingTheKeyMeant) {
  EXPECT_THAT(errorsFor("{zero_optimisation: {stage: [1, 2]}}"),
              ElementsAre(FieldError{kAt + "zero_optimisation",
                                     kIgnored + "; did you mean zero_optimization?"}));
  EXPECT_THAT(errorsFor("{gradient_acumulation_steps: auto}"),
              ElementsAre(FieldError{kAt + "gradient_acumulation_steps",
                                     kIgnored + "; did you mean gradient_accumulation_steps?"}));
}

TEST(UnknownConfigKeys, AMisspeltKeyWithoutCandidatesIsAWarningAndTheJobIsAccepted) {
  EXPECT_THAT(warningsFor("{wall_clock_breakdwn: true, zero_optimization: {stage: [1, 2]}}"),
              ElementsAre(FieldError{kAt + "wall_clock_breakdwn",
                                     kIgnored + "; did you mean wall_clock_breakdown?"}));
}

TEST(UnknownConfigKeys, AMisspeltKeyInsideASectionNamesTheSectionsKey) {
  const FieldError overlap{kAt + "zero_optimization.overlap_com",
                           sectionReason("zero_optimization", "overlap_comm")};
  EXPECT_THAT(warningsFor("{zero_optimization: {stage: 2, overlap_com: true}}"),
              ElementsAre(overlap));
  EXPECT_THAT(errorsFor("{zero_optimization: {stage: 2, overlap_com: [true, false]}}"),
              ElementsAre(overlap));
}

TEST(UnknownConfigKeys, OffloadSectionsAndListsOfCandidateSectionsAreCheckedToo) {
  EXPECT_THAT(
      warningsFor(
          "{fp16: [{enabled: true, loss_scal: 0}, {enabled: false}],"
          " zero_optimization: {stage: 3, offload_param: {device: cpu, pin_memroy: true}}}"),
      ElementsAre(FieldError{kAt + "fp16[0].loss_scal", sectionReason("fp16", "loss_scale")},
                  FieldError{kAt + "zero_optimization.offload_param.pin_memroy",
                             sectionReason("zero_optimization.offload_param", "pin_memory")}));
  EXPECT_THAT(warningsFor("{activation_checkpointing: {partition_activation: true}}"),
              ElementsAre(FieldError{kAt + "activation_checkpointing.partition_activation",
                                     "is not a key of DeepSpeed's activation_checkpointing section "
                                     "(DeepSpeed 0.19.8 ignores it); did you mean "
                                     "partition_activations?"}));
}

TEST(UnknownConfigKeys, AKeyFarFromEveryKeyHasNoSuggestion) {
  EXPECT_THAT(warningsFor("{my_custom_setting: 1, foo: 2}"),
              ElementsAre(FieldError{kAt + "foo", kIgnored},
                          FieldError{kAt + "my_custom_setting", kIgnored}));
  EXPECT_THAT(errorsFor("{my_custom_knob: [1, 2]}"),
              ElementsAre(FieldError{kAt + "my_custom_knob", kIgnored}));
}

TEST(UnknownConfigKeys, ASwapOfNeighboursAndLetterCaseCountAsTheKeyMeant) {
  EXPECT_THAT(warningsFor("{aoi: {block_size: 1048576}, FP16: {enabled: true}}"),
              ElementsAre(FieldError{kAt + "FP16", kIgnored + "; did you mean fp16?"},
                          FieldError{kAt + "aoi", kIgnored + "; did you mean aio?"}));
}

TEST(UnknownConfigKeys, FreeFormSectionsAreNotLookedInto) {
  EXPECT_THAT(
      warningsFor("{optimizer: {type: AdamW, params: {lr: [1.0e-4, 3.0e-4], my_param: auto}},"
                  " scheduler: {type: WarmupLR, params: {warmup_num_steps: [100, 1000]}},"
                  " tensorboard: {enabled: true, output_path: logs, job_name: tune},"
                  " comms_logger: {enabled: false, prof_ops: [all_reduce]},"
                  " autotuning: {enabled: true, fast: true}}"),
      IsEmpty());
  EXPECT_THAT(warningsFor("{optimizer: {type: AdamW, parms: {lr: 1.0e-4}}}"),
              ElementsAre(FieldError{kAt + "optimizer.parms",
                                     "is not a key of DeepSpeed's optimizer section (DeepSpeed "
                                     "0.19.8 ignores it); did you mean params?"}));
}

TEST(UnknownConfigKeys, AliasesAndOlderSpellingsDeepSpeedAcceptsAreKnown) {
  EXPECT_THAT(warningsFor("{bfloat16: {enabled: true}, amp: {enabled: false, opt_level: O1},"
                          " zero_optimization: {stage: 3, cpu_offload: false,"
                          " prefetch_bucket_size: 5.0e+8, stage3_prefetch_bucket_size: 5.0e+8,"
                          " stage3_gather_fp16_weights_on_model_save: true, mics_shard_size: -1},"
                          " seq_parallel_comm_data_type: fp32, torch_autocast: {enabled: false}}"),
              IsEmpty());
}

// Each finding as "path: reason", with " [tuned]" after one whose value the search would vary.
std::vector<std::string> findings(const char* configJson) {
  std::vector<std::string> found;
  for (const UnknownConfigKey& key : unknownConfigKeys(nlohmann::json::parse(configJson))) {
    found.push_back(key.path + ": " + key.reason + (key.tuned ? " [tuned]" : ""));
  }
  return found;
}

TEST(UnknownConfigKeys, TheFindingsSayWhetherTheKeyIsTuned) {
  EXPECT_THAT(
      findings(
          R"({"zero_optimisation": {"stage": 2, "offload_optimizer": {"device": ["cpu", "nvme"]}},
                   "fp16": {"enabeld": "auto"}, "steps_per_prnt": 10})"),
      ElementsAre(
          kAt + "fp16.enabeld: " + sectionReason("fp16", "enabled") + " [tuned]",
          kAt + "steps_per_prnt: " + kIgnored + "; did you mean steps_per_print?",
          kAt + "zero_optimisation: " + kIgnored + "; did you mean zero_optimization? [tuned]"));
}

std::string fileContents(const std::filesystem::path& path) {
  const std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The jobs users start from: every key of their configs is one DeepSpeed reads.
TEST(UnknownConfigKeys, NoKeyOfTheConfigCorpusOrTheExamplesIsUnknown) {
  const std::filesystem::path source(AUTOTUNE_SOURCE_DIR);
  std::vector<std::filesystem::path> jobs;
  for (const char* folder : {"tests/configs", "examples"}) {
    for (const auto& entry : std::filesystem::directory_iterator(source / folder)) {
      const std::string extension = entry.path().extension().string();
      if (extension == ".yaml" || extension == ".json") {
        jobs.push_back(entry.path());
      }
    }
  }
  ASSERT_GE(jobs.size(), 20U);
  for (const auto& path : jobs) {
    const auto decoded = decodeYaml(fileContents(path));
    ASSERT_TRUE(decoded.has_value()) << path << ": " << format(decoded.error().front());
    EXPECT_THAT(unknownConfigKeys(decoded->job.spec.deepspeedConfig), IsEmpty()) << path;
  }
}

}  // namespace
}  // namespace autotune::api
