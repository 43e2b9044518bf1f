// Configs as users hand them to DeepSpeed: Hugging Face's "auto" values, DeepSpeed's own
// autotuning section, a fixed global batch, numbers as YAML and JSON spell them, and the type of
// every value the engine reads, each refused at its own field path.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "api/codec.h"
#include "support/field_errors.h"

namespace autotune::api {

namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A job whose spec is `specYaml` (a YAML flow mapping's members, after the template's) around a
// DeepSpeed config.
std::string jobYaml(const std::string& config, const std::string& specExtras = "") {
  return "apiVersion: autotune.io/v1alpha1\n"
         "kind: AutotuneJob\n"
         "metadata: {name: hf}\n"
         "spec:\n"
         "  deepspeedConfig: " +
         config +
         "\n"
         "  resources: {gpusPerTrial: 16}\n"
         "  template: {spec: {containers: [{name: trainer, command: [train]}]}}\n" +
         specExtras;
}

Decoded decoded(const std::string& config, const std::string& specExtras = "") {
  auto result = decodeYaml(jobYaml(config, specExtras));
  EXPECT_TRUE(result.has_value()) << (result ? "" : format(result.error().front()));
  return result ? *result : Decoded{};
}

FieldErrors errors(const std::string& config, const std::string& specExtras = "") {
  auto result = decodeYaml(jobYaml(config, specExtras));
  return result ? FieldErrors{} : result.error();
}

constexpr const char* kHuggingFaceZero3 = R"({
    "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW",
                  "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                  "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
    "zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "cpu", "pin_memory": true},
      "offload_param": {"device": "cpu", "pin_memory": true},
      "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e9,
      "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
      "stage3_param_persistence_threshold": "auto", "stage3_max_live_parameters": 1e9,
      "stage3_max_reuse_distance": 1e9, "stage3_gather_16bit_weights_on_model_save": true},
    "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
    "steps_per_print": 2000, "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto", "wall_clock_breakdown": false})";

TEST(RealWorldConfig, HuggingFacesZero3TemplateDecodesAsWritten) {
  const Decoded job = decoded(kHuggingFaceZero3);
  EXPECT_THAT(job.warnings, IsEmpty());
  const json& config = job.job.spec.deepspeedConfig;
  EXPECT_EQ(config["optimizer"]["params"]["lr"], "auto");
  EXPECT_EQ(config["zero_optimization"]["sub_group_size"], json(1e9));
}

TEST(RealWorldConfig, IntegerKeysWrittenAsWholeFloatsAreIntegers) {
  const json config = decoded(R"({train_batch_size: 5.12e2, train_micro_batch_size_per_gpu: 4.0,
                  zero_optimization: {stage: [1.0, 2]}})")
                          .job.spec.deepspeedConfig;
  EXPECT_TRUE(config["train_batch_size"].is_number_integer());
  EXPECT_EQ(config["train_batch_size"], 512);
  EXPECT_TRUE(config["train_micro_batch_size_per_gpu"].is_number_integer());
  EXPECT_EQ(config["zero_optimization"]["stage"], json::parse("[1, 2]"));
  EXPECT_THAT(errors("{train_micro_batch_size_per_gpu: 2.5}"),
              ElementsAre(FieldError{"spec.deepspeedConfig.train_micro_batch_size_per_gpu",
                                     R"(must be "auto", a positive integer or a non-empty list of )"
                                     "positive integers"}));
}

// --- DeepSpeed's autotuning section -----------------------------------------------------------

TEST(AutotuningSection, FillsWhatTheSpecLeavesOut) {
  const Decoded job = decoded(R"({train_micro_batch_size_per_gpu: auto, autotuning: {
      enabled: true, fast: false, metric: FLOPS, tuner_type: model_based, tuner_num_trials: 20,
      tuner_early_stopping: 3, min_train_micro_batch_size_per_gpu: 2,
      max_train_micro_batch_size_per_gpu: 64, max_train_batch_size: 1024,
      num_tuning_micro_batch_sizes: 4, mp_size: 2, start_profile_step: 4, end_profile_step: 7,
      model_info: {num_params: 774000000, hidden_size: 1280, num_layers: 36},
      arg_mappings: {train_micro_batch_size_per_gpu: --per_device_train_batch_size,
                     "gradient_accumulation_steps ": " --gradient_accumulation_steps"}}})");
  EXPECT_THAT(job.warnings, IsEmpty());
  const Spec& spec = job.job.spec;
  EXPECT_FALSE(spec.search.fast);
  EXPECT_EQ(spec.search.metric, Metric::kFlops);
  EXPECT_EQ(spec.search.strategy, Strategy::kModelBased);
  EXPECT_EQ(spec.search.maxTrials, 20);
  EXPECT_EQ(spec.search.earlyStopping, 3);
  EXPECT_EQ(spec.search.minMicroBatchSize, 2);
  EXPECT_EQ(spec.search.maxMicroBatchSize, 64);
  EXPECT_EQ(spec.search.maxTrainBatchSize, 1024);
  EXPECT_EQ(spec.search.numTuningMicroBatchSizes, 4);
  EXPECT_EQ(spec.resources.modelParallelSize, 2);
  EXPECT_EQ(spec.model.numParameters, 774000000);
  EXPECT_EQ(spec.model.hiddenSize, 1280);
  EXPECT_EQ(spec.model.numLayers, 36);
  // DeepSpeed's own tutorial has the key with a trailing space; its scheduler strips it.
  EXPECT_EQ(spec.argMappings.at("train_micro_batch_size_per_gpu"), "--per_device_train_batch_size");
  EXPECT_EQ(spec.argMappings.at("gradient_accumulation_steps"), "--gradient_accumulation_steps");
}

TEST(AutotuningSection, TunerTypesAreTheStrategiesOfTheSameNames) {
  for (const auto& [tuner, strategy] :
       {std::pair{"gridsearch", Strategy::kGrid}, std::pair{"random", Strategy::kRandom},
        std::pair{"model_based", Strategy::kModelBased}}) {
    const Decoded job = decoded(std::string("{autotuning: {tuner_type: ") + tuner + "}}");
    EXPECT_EQ(job.job.spec.search.strategy, strategy) << tuner;
  }
}

TEST(AutotuningSection, TheSpecWinsAndTheUserIsTold) {
  const Decoded job = decoded(
      "{autotuning: {tuner_num_trials: 20, metric: latency, fast: true,"
      " arg_mappings: {train_micro_batch_size_per_gpu: --batch}}}",
      "  search: {maxTrials: 30, fast: true}\n"
      "  argMappings: {train_micro_batch_size_per_gpu: --per_device_train_batch_size}\n");
  EXPECT_EQ(job.job.spec.search.maxTrials, 30);
  EXPECT_EQ(job.job.spec.search.metric, Metric::kLatency);  // the spec is silent on it
  EXPECT_EQ(job.job.spec.argMappings.at("train_micro_batch_size_per_gpu"),
            "--per_device_train_batch_size");
  EXPECT_THAT(
      job.warnings,
      ElementsAre(FieldError{"spec.deepspeedConfig.autotuning.tuner_num_trials",
                             "is overridden by spec.search.maxTrials"},
                  FieldError{"spec.deepspeedConfig.autotuning.arg_mappings.train_micro_batch_"
                             "size_per_gpu",
                             "is overridden by spec.argMappings.train_micro_batch_size_per_gpu"}));
}

TEST(AutotuningSection, KeysWithNoMeaningHereAreReportedNotFatal) {
  const Decoded job = decoded(
      "{autotuning: {enabled: true, results_dir: autotuning_results, exps_dir: autotuning_exps,"
      " overwrite: false, metric_path: m.json, model_info_path: i.json, min_train_batch_size: 1,"
      " num_gpus: 8, num_nodes: 1, model_info: {profile: true}, tuner_kind: grid}}");
  std::vector<std::string> paths;
  for (const FieldError& warning : job.warnings) {
    paths.push_back(warning.path);
  }
  const std::string section = "spec.deepspeedConfig.autotuning.";
  EXPECT_THAT(
      paths, ElementsAre(section + "model_info.profile", section + "metric_path",
                         section + "model_info_path", section + "results_dir", section + "exps_dir",
                         section + "overwrite", section + "min_train_batch_size",
                         section + "num_gpus", section + "num_nodes", section + "tuner_kind"));
  EXPECT_EQ(job.warnings.back().reason, "is not a key of DeepSpeed's autotuning section; ignored");
}

TEST(AutotuningSection, BadValuesAreErrorsAtTheSectionsKeys) {
  const std::string section = "spec.deepspeedConfig.autotuning.";
  EXPECT_THAT(errors("{autotuning: {tuner_type: bayes}}"),
              ElementsAre(FieldError{section + "tuner_type",
                                     "must be one of gridsearch, random, model_based"}));
  EXPECT_THAT(errors("{autotuning: {fast: sometimes}}"),
              ElementsAre(FieldError{section + "fast", "must be a boolean"}));
  EXPECT_THAT(errors("{autotuning: {start_profile_step: 5, end_profile_step: 2}}"),
              ElementsAre(FieldError{section + "end_profile_step",
                                     "must be at least start_profile_step (5)"}));
  EXPECT_THAT(errors("{autotuning: {end_profile_step: 2}}"),
              ElementsAre(FieldError{section + "end_profile_step",
                                     "must be at least start_profile_step (3)"}));
  EXPECT_THAT(errors("{autotuning: {start_profile_step: three}}"),
              ElementsAre(FieldError{section + "start_profile_step", "must be an integer"}));
  EXPECT_THAT(errors("{autotuning: true}"),
              ElementsAre(FieldError{"spec.deepspeedConfig.autotuning", "must be an object"}));
  EXPECT_THAT(errors("{autotuning: {arg_mappings: [a]}}"),
              ElementsAre(FieldError{section + "arg_mappings", "must be an object, not a list"}));
}

// Validation runs on the values the section supplied; its findings name where they were written.
TEST(AutotuningSection, ValidationErrorsNameTheSectionsKey) {
  const std::string section = "spec.deepspeedConfig.autotuning.";
  EXPECT_THAT(errors("{autotuning: {tuner_num_trials: 5000}}"),
              ElementsAre(FieldError{section + "tuner_num_trials", "must be between 1 and 1000"}));
  EXPECT_THAT(
      errors("{autotuning: {mp_size: 3}}"),
      ElementsAre(FieldError{section + "mp_size", "must divide spec.resources.gpusPerTrial (16)"}));
  EXPECT_THAT(errors("{autotuning: {arg_mappings: {no_such_key: --x}}}"),
              ElementsAre(FieldError{section + "arg_mappings.no_such_key",
                                     "names no key of spec.deepspeedConfig"}));
}

// --- a fixed global batch ---------------------------------------------------------------------

TEST(FixedTrainBatch, ANumberNoMicroBatchCanReachIsAnError) {
  const std::string path = "spec.deepspeedConfig.train_batch_size";
  EXPECT_THAT(errors("{train_batch_size: 100}"),
              Contains(::testing::Field(&FieldError::path, path)));
  EXPECT_THAT(errors("{train_batch_size: 512}", "  search: {minMicroBatchSize: 33}\n"),
              ElementsAre(FieldError{path,
                                     "no micro-batch between spec.search.minMicroBatchSize (33) "
                                     "and maxMicroBatchSize (1024) divides it per data-parallel "
                                     "rank (32)"}));
  EXPECT_THAT(errors(R"({train_batch_size: "512"})"),
              ElementsAre(FieldError{path, R"(must be "auto" or a positive integer (a fixed )"
                                           "global batch)"}));
}

TEST(FixedTrainBatch, TheBatchKeysMustReachIt) {
  const std::string config = "spec.deepspeedConfig.";
  EXPECT_THAT(errors("{train_batch_size: 512, train_micro_batch_size_per_gpu: 3}"),
              ElementsAre(FieldError{config + "train_micro_batch_size_per_gpu",
                                     "must divide train_batch_size ÷ data-parallel size (32)"}));
  EXPECT_THAT(errors("{train_batch_size: 512, train_micro_batch_size_per_gpu: [2, 6]}"),
              ElementsAre(FieldError{config + "train_micro_batch_size_per_gpu[1]",
                                     "must divide train_batch_size ÷ data-parallel size (32)"}));
  EXPECT_THAT(errors("{train_batch_size: 512, gradient_accumulation_steps: [1, 2]}"),
              ElementsAre(FieldError{config + "gradient_accumulation_steps",
                                     "follows from the micro-batch when train_batch_size is a "
                                     "number; list micro-batch sizes instead"}));
  EXPECT_THAT(errors("{train_batch_size: 512, train_micro_batch_size_per_gpu: 4,"
                     " gradient_accumulation_steps: 2}"),
              ElementsAre(FieldError{config + "gradient_accumulation_steps",
                                     "follows from the micro-batch when train_batch_size is a "
                                     R"(number: 32 ÷ 4 = 8, not 2; set it to "auto")"}));
  EXPECT_THAT(errors("{train_batch_size: 512}", "  search: {maxTrainBatchSize: 256}\n"),
              ElementsAre(FieldError{"spec.search.maxTrainBatchSize",
                                     "is less than the fixed train_batch_size (512)"}));
  EXPECT_THAT(errors("{train_batch_size: 512, train_micro_batch_size_per_gpu: 4,"
                     " gradient_accumulation_steps: 8}"),
              IsEmpty());
}

// --- the type of every value the engine reads -------------------------------------------------

TEST(ConfigValueTypes, EachValueTheEngineReadsIsCheckedAtItsPath) {
  const std::string config = "spec.deepspeedConfig.";
  const struct {
    const char* config;
    std::string path;
    std::string reason;
  } cases[] = {
      {"{fp16: {enabled: maybe}}", config + "fp16.enabled", R"(must be true, false or "auto")"},
      {"{bf16: {enabled: [true, 1]}}", config + "bf16.enabled[1]",
       R"(must be true, false or "auto")"},
      {"{fp16: true}", config + "fp16", "must be an object"},
      {"{zero_optimization: 3}", config + "zero_optimization", "must be an object"},
      {"{zero_optimization: [{stage: 1}]}", config + "zero_optimization",
       "must be an object, not a list: put the candidates inside it"},
      {"{zero_optimization: {offload_optimizer: {device: gpu}}}",
       config + "zero_optimization.offload_optimizer.device", "must be one of none, cpu, nvme"},
      {"{zero_optimization: {offload_param: {device: 1}}}",
       config + "zero_optimization.offload_param.device", "must be one of none, cpu, nvme"},
      {"{zero_optimization: {reduce_bucket_size: big}}",
       config + "zero_optimization.reduce_bucket_size",
       R"(must be "auto" or a number of elements, at least 0)"},
      {"{zero_optimization: {allgather_bucket_size: [5e8, -1]}}",
       config + "zero_optimization.allgather_bucket_size[1]",
       R"(must be "auto" or a number of elements, at least 0)"},
      {R"({zero_force_ds_cpu_optimizer: "false"})", config + "zero_force_ds_cpu_optimizer",
       "must be true or false"},
      {"{optimizer: Adam}", config + "optimizer", "must be an object"},
  };
  for (const auto& example : cases) {
    EXPECT_THAT(errors(example.config), ElementsAre(FieldError{example.path, example.reason}))
        << example.config;
  }
}

// The errors of a job whose Pod template's spec is `podSpec` (flow-style YAML).
FieldErrors podSpecErrors(const std::string& podSpec) {
  const std::string yaml =
      "apiVersion: autotune.io/v1alpha1\nkind: AutotuneJob\n"
      "metadata: {name: x}\nspec:\n  deepspeedConfig: {}\n"
      "  template: {spec: " +
      podSpec + "}\n";
  auto result = decodeYaml(yaml);
  return result ? FieldErrors{} : result.error();
}

TEST(ConfigValueTypes, ThePrimaryContainersCommandArgsAndEnvAreStrings) {
  const auto templateErrors = [](const std::string& container) {
    return podSpecErrors("{containers: [" + container + "]}");
  };
  const std::string container = "spec.template.spec.containers[0].";
  EXPECT_THAT(templateErrors("{name: t, command: [train, 3]}"),
              ElementsAre(FieldError{container + "command[1]", "must be a string"}));
  EXPECT_THAT(templateErrors("{name: t, args: --deepspeed}"),
              ElementsAre(FieldError{container + "args", "must be a list of strings"}));
  EXPECT_THAT(templateErrors("{name: t, env: [{name: A, value: 1}]}"),
              ElementsAre(FieldError{container + "env[0].value", "must be a string"}));
  EXPECT_THAT(templateErrors("{name: t, env: [{value: x}]}"),
              ElementsAre(FieldError{container + "env[0].name", "must be a string"}));
  EXPECT_THAT(templateErrors("{name: t, env: A=1}"),
              ElementsAre(FieldError{container + "env", "must be a list"}));
}

// The trial Pod adds its config volume and mount, matched by name (and mount path), and keeps
// the template's termination message path: those fields must be what Kubernetes says they are.
TEST(ConfigValueTypes, TheVolumesMountsAndTerminationMessagePathTheTrialPodAddsToAreStrings) {
  const std::string podSpec = "spec.template.spec.";
  const std::string container = podSpec + "containers[0].";
  EXPECT_THAT(podSpecErrors("{containers: [{name: t}], volumes: [{name: 5, emptyDir: {}}]}"),
              ElementsAre(FieldError{podSpec + "volumes[0].name", "must be a string"}));
  EXPECT_THAT(podSpecErrors("{containers: [{name: t}], volumes: {data: {emptyDir: {}}}}"),
              ElementsAre(FieldError{podSpec + "volumes", "must be a list"}));
  EXPECT_THAT(podSpecErrors("{containers: [{name: t}], volumes: [data]}"),
              ElementsAre(FieldError{podSpec + "volumes[0]", "must be an object"}));
  EXPECT_THAT(
      podSpecErrors("{containers: [{name: t, volumeMounts: [{name: data, mountPath: 7}]}]}"),
      ElementsAre(FieldError{container + "volumeMounts[0].mountPath", "must be a string"}));
  EXPECT_THAT(podSpecErrors("{containers: [{name: t, volumeMounts: [{mountPath: /data}]}]}"),
              ElementsAre(FieldError{container + "volumeMounts[0].name", "must be a string"}));
  EXPECT_THAT(podSpecErrors("{containers: [{name: t, terminationMessagePath: 1}]}"),
              ElementsAre(FieldError{container + "terminationMessagePath", "must be a string"}));
  EXPECT_THAT(podSpecErrors("{containers: [{name: t, terminationMessagePath: /tmp/metrics.json,"
                            " volumeMounts: [{name: data, mountPath: /data}]}],"
                            " volumes: [{name: data, emptyDir: {}}]}"),
              ElementsAre());
}

}  // namespace
}  // namespace autotune::api
