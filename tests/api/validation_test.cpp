#include "api/validation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "api/job.h"
#include "support/field_errors.h"

namespace autotune::api {

namespace {

using nlohmann::json;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

// A valid job built in code, as the operator's other layers would build one.
AutotuneJob validJob() {
  AutotuneJob job;
  job.metadata = {{"name", "gpt2"}, {"namespace", "ml"}};
  job.spec.deepspeedConfig = json::parse(R"({
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": 1,
    "fp16": {"enabled": true},
    "optimizer": {"type": "Adam", "params": {"lr": 0.0001, "betas": [0.9, 0.999]}},
    "zero_optimization": {"stage": "all", "offload_optimizer": {"device": ["none", "cpu"]}}
  })");
  job.spec.resources.gpusPerTrial = 8;
  job.spec.podTemplate = json::parse(R"({"spec": {"containers": [
    {"name": "sidecar", "image": "busybox", "args": ["${unchecked}"]},
    {"name": "trainer", "image": "train:1", "command": ["python", "train.py"],
     "args": ["--stage=${zero_optimization.stage}", "--out=/out/${job}/${trial}"],
     "env": [{"name": "DEVICE", "value": "${zero_optimization.offload_optimizer.device}"},
             {"name": "FROM_FIELD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}
  ]}})");
  job.spec.primaryContainer = "trainer";
  job.spec.output.configMapName = "gpt2-optimal";
  return job;
}

std::vector<std::string> pathsOf(const AutotuneJob& job) {
  std::vector<std::string> paths;
  for (const FieldError& error : validate(job)) {
    paths.push_back(error.path);
  }
  return paths;
}

// Only the config's own errors: the template's placeholders would not match another config.
FieldErrors errorsWithConfig(const char* configJson) {
  AutotuneJob job = validJob();
  job.spec.deepspeedConfig = json::parse(configJson);
  job.spec.podTemplate = {{"spec", {{"containers", {{{"name", "trainer"}}}}}}};
  return validate(job);
}

TEST(Validate, AValidJobHasNoErrors) { EXPECT_THAT(validate(validJob()), IsEmpty()); }

TEST(Validate, PlaceholdersAreOnlyCheckedInThePrimaryContainer) {
  AutotuneJob job = validJob();
  job.spec.primaryContainer = "sidecar";
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"spec.template.spec.containers[0].args[0]",
                                                    "unknown placeholder ${unchecked}"}));
}

TEST(Validate, EveryUnknownPlaceholderInOneValueIsNamed) {
  AutotuneJob job = validJob();
  job.spec.podTemplate["spec"]["containers"][1]["command"] = {"run", "${a}-${trial}-${b}"};
  EXPECT_THAT(
      validate(job),
      ElementsAre(
          FieldError{"spec.template.spec.containers[1].command[1]", "unknown placeholder ${a}"},
          FieldError{"spec.template.spec.containers[1].command[1]", "unknown placeholder ${b}"}));
}

// A variable for the container's shell is written $${NAME}; the trial's own ${AUTOTUNE_...} are
// the container's: neither is an unknown placeholder, and the error for one says how to write it.
TEST(Validate, ShellVariablesAreEscapedAndTheTrialsOwnAreTheContainers) {
  AutotuneJob job = validJob();
  job.spec.podTemplate["spec"]["containers"][1]["args"] = {
      "--home=$${HOME}", "--nproc=$${NPROC:-8}", "--config=${AUTOTUNE_DS_CONFIG}"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.podTemplate["spec"]["containers"][1]["args"] = {"--home=${HOME}"};
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.template.spec.containers[1].args[0]",
                                     "unknown placeholder ${HOME}: a variable for the "
                                     "container's shell is written $${HOME}"}));
}

// A shell script run with -c gets the mapped flags as its arguments: it must pass them on with
// "$@", and not set them itself, or every trial would measure the script's own value.
TEST(Validate, AShellScriptMustForwardTheMappedFlags) {
  AutotuneJob job = validJob();
  job.spec.argMappings = {{"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"}};
  json& trainer = job.spec.podTemplate["spec"]["containers"][1];
  trainer["command"] = {"bash", "-c"};
  trainer["args"] = {
      R"(python train.py --deepspeed "$AUTOTUNE_DS_CONFIG" --per_device_train_batch_size 1)"};
  trainer.erase("env");
  EXPECT_THAT(
      validate(job),
      ElementsAre(
          FieldError{"spec.template.spec.containers[1].args[0]",
                     "a shell script gets the flags of spec.argMappings as its arguments, and "
                     "passes them on only with \"$@\" (python train.py \"$@\"): add it, or map "
                     "no flags"},
          FieldError{"spec.template.spec.containers[1].args[0]",
                     "sets --per_device_train_batch_size itself, which spec.argMappings passes "
                     "through \"$@\" with each trial's train_micro_batch_size_per_gpu: remove it "
                     "from the script"}));
  trainer["args"] = {R"(python train.py --deepspeed "$AUTOTUNE_DS_CONFIG" "$@")"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.argMappings.clear();
  trainer["args"] = {R"(python train.py --per_device_train_batch_size 1)"};
  EXPECT_THAT(validate(job), IsEmpty()) << "nothing mapped, nothing to pass on";
}

TEST(Validate, AnUnterminatedPlaceholderIsNamed) {
  AutotuneJob job = validJob();
  job.spec.podTemplate["spec"]["containers"][1]["env"][0]["value"] = "${zero_optimization.stage";
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.template.spec.containers[1].env[0].value",
                                     "unterminated placeholder ${zero_optimization.stage"}));
}

TEST(Validate, ConfigKeyPathsListEveryNestedKeyAndThePerTrialKeys) {
  EXPECT_THAT(configKeyPaths(json::parse(R"({"fp16": {"enabled": true},
                                              "zero_optimization": {"stage": [1, 2]}})")),
              ElementsAre("fp16", "fp16.enabled", "gradient_accumulation_steps",
                          "train_micro_batch_size_per_gpu", "zero_optimization",
                          "zero_optimization.stage"));
  EXPECT_THAT(configKeyPaths(json::object()),
              ElementsAre("gradient_accumulation_steps", "train_micro_batch_size_per_gpu"));
}

TEST(Validate, ArgMappingsMayNameADottedPathALeafKeyOrAPerTrialKey) {
  AutotuneJob job = validJob();
  job.spec.deepspeedConfig.erase("train_micro_batch_size_per_gpu");
  job.spec.argMappings = {
      {"zero_optimization.stage", "--zero_stage"},
      {"device", "--offload_device"},
      {"train_micro_batch_size_per_gpu", "--per_device_train_batch_size"},
      {"gradient_accumulation_steps", "--gas"},
  };
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.argMappings = {{"zero_optimization", "--zero"}, {"zero_optimization.bogus", "--b"}};
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"spec.argMappings.zero_optimization.bogus",
                                                    "names no key of spec.deepspeedConfig"}));
}

TEST(Validate, StageAcceptsAnIntegerAListOrAll) {
  for (const char* stage : {"0", "3", R"("all")", "[0, 1, 2, 3]", "[2]"}) {
    const std::string config = std::string(R"({"zero_optimization": {"stage": )") + stage + "}}";
    EXPECT_THAT(errorsWithConfig(config.c_str()), IsEmpty()) << stage;
  }
}

TEST(Validate, StageRejectsEverythingElse) {
  for (const char* stage : {"-1", "4", R"("two")", "1.5", "true", "[]", R"([1, "all"])"}) {
    const std::string config = std::string(R"({"zero_optimization": {"stage": )") + stage + "}}";
    EXPECT_THAT(errorsWithConfig(config.c_str()), Not(IsEmpty())) << stage;
  }
}

TEST(Validate, NumbersUnderOptimizerParamsArePlainValues) {
  EXPECT_THAT(errorsWithConfig(R"({"optimizer": {"params": {"betas": [0.9, 0.95]}},
                                   "scheduler": {"params": {"warmup": [1, 2]}}})"),
              IsEmpty());
  EXPECT_THAT(errorsWithConfig(R"({"optimizer": {"params": {"betas": []}}})"),
              ElementsAre(FieldError{"spec.deepspeedConfig.optimizer.params.betas",
                                     "a list of candidate values must not be empty"}));
}

TEST(Validate, CandidateSectionsAreCheckedInside) {
  EXPECT_THAT(
      errorsWithConfig(
          R"({"zero_optimization": {"offload_optimizer": [{"device": "cpu"}, {"device": "gpu"}]}})"),
      ElementsAre(FieldError{"spec.deepspeedConfig.zero_optimization.offload_optimizer[1].device",
                             "must be one of none, cpu, nvme"}));
  EXPECT_THAT(errorsWithConfig(R"({"comms_logger": {"prof_ops": [[], ["all_reduce"]]}})"),
              ElementsAre(FieldError{"spec.deepspeedConfig.comms_logger.prof_ops[0]",
                                     "a list of candidate values must not be empty"}));
}

TEST(Validate, BatchKeysAcceptAutoAPositiveStartOrCandidates) {
  for (const char* value : {R"("auto")", "4", "[1, 2, 4]"}) {
    const std::string config = std::string(R"({"train_micro_batch_size_per_gpu": )") + value +
                               std::string(R"(, "gradient_accumulation_steps": )") + value + "}";
    EXPECT_THAT(errorsWithConfig(config.c_str()), IsEmpty()) << value;
  }
  EXPECT_THAT(errorsWithConfig(R"({"gradient_accumulation_steps": 0})"),
              ElementsAre(FieldError{"spec.deepspeedConfig.gradient_accumulation_steps",
                                     "must be a positive integer"}));
}

TEST(Validate, TrainBatchSizeMayBeFixedButNotTuned) {
  EXPECT_THAT(errorsWithConfig(R"({"train_batch_size": 256})"), IsEmpty());
  EXPECT_THAT(pathsOf([] {
                AutotuneJob job = validJob();
                job.spec.deepspeedConfig["train_batch_size"] = {128, 256};
                return job;
              }()),
              ElementsAre("spec.deepspeedConfig.train_batch_size"));
}

TEST(Validate, RangesAreCheckedAtTheirBounds) {
  AutotuneJob job = validJob();
  job.spec.search.maxTrials = 1000;
  job.spec.search.earlyStopping = 0;
  job.spec.search.plateauThreshold = 0;
  job.spec.search.minMicroBatchSize = 4;
  job.spec.search.maxMicroBatchSize = 4;
  job.spec.parallelism = 1000;
  job.spec.resources.gpusPerTrial = 1024;
  EXPECT_THAT(validate(job), IsEmpty());

  job.spec.search.maxTrials = 1001;
  job.spec.parallelism = 1001;
  job.spec.resources.gpusPerTrial = 1025;
  job.spec.search.plateauThreshold = 1.0;
  job.spec.search.numTuningMicroBatchSizes = 0;
  job.spec.resources.nodesPerTrial = 0;
  job.spec.resources.modelParallelSize = 0;
  job.spec.resources.gpuMemory = Quantity::fromValue(0);
  job.spec.model.hiddenSize = 0;
  job.spec.trialTimeout = Duration::fromSeconds(0);
  EXPECT_THAT(pathsOf(job),
              ElementsAre("spec.model.hiddenSize", "spec.resources.gpusPerTrial",
                          "spec.resources.nodesPerTrial", "spec.resources.modelParallelSize",
                          "spec.resources.gpuMemory", "spec.search.maxTrials",
                          "spec.search.plateauThreshold", "spec.search.numTuningMicroBatchSizes",
                          "spec.parallelism", "spec.trialTimeout"));
}

// A GPU model becomes a nodeSelector value: one, a label value, and the template's own choice of
// model, if it makes one, the same.
TEST(Validate, GpuModelsAreLabelValuesOrAllAlone) {
  AutotuneJob job = validJob();
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.podTemplate["spec"]["nodeSelector"] = {
      {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}, {"pool", "training"}};
  EXPECT_THAT(validate(job), IsEmpty());

  const FieldError selectsItself{"spec.template.spec.nodeSelector.nvidia.com/gpu.product",
                                 "selects a GPU model itself: spec.gpuModels chooses the models "
                                 "the trials run on"};
  job.spec.podTemplate["spec"]["nodeSelector"]["nvidia.com/gpu.product"] = "NVIDIA-A100-SXM4-80GB";
  EXPECT_THAT(validate(job), ElementsAre(selectsItself));
  job.spec.gpuModels = {"NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3"};
  EXPECT_THAT(validate(job), ElementsAre(selectsItself));
  job.spec.podTemplate["spec"].erase("nodeSelector");

  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.gpuModels = {"All"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3", "All"};
  EXPECT_THAT(
      validate(job),
      ElementsAre(FieldError{"spec.gpuModels[1]", "All stands for every model and stands alone"}));
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"};
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"spec.gpuModels[1]",
                                                    "names NVIDIA-H100-80GB-HBM3 a second time"}));
  job.spec.gpuModels = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.gpuModels", "must name at most 8 GPU models, not 9"}));
  job.spec.gpuModels = {""};
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.gpuModels[0]"));
  job.spec.gpuModels = {"H100 80GB"};
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.gpuModels[0]"));
}

// Each trial gets a claim of its own from a ResourceClaimTemplate; one claim for all is refused.
TEST(Validate, TrialsClaimThroughATemplateEach) {
  AutotuneJob job = validJob();
  job.spec.podTemplate["spec"]["resourceClaims"] =
      json::parse(R"([{"name": "gpus", "resourceClaimTemplateName": "sixteen-gpus"}])");
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.podTemplate["spec"]["resourceClaims"].push_back(
      json::parse(R"({"name": "shared", "resourceClaimName": "team-gpus"})"));
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.template.spec.resourceClaims[1].resourceClaimName"));
}

// MIG's mixed strategy advertises slices as resources of their own, which the operator neither
// counts nor asks for: a trial that asks for one is refused, naming it.
TEST(Validate, TrialsTakeWholeGpusNotMigDevices) {
  AutotuneJob job = validJob();
  job.spec.podTemplate["spec"]["containers"][0]["resources"] =
      json::parse(R"({"limits": {"nvidia.com/gpu": 1, "memory": "64Gi"}})");
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.podTemplate["spec"]["containers"][0]["resources"] = json::parse(
      R"({"limits": {"nvidia.com/mig-3g.20gb": 1}, "requests": {"nvidia.com/mig-3g.20gb": 1}})");
  EXPECT_THAT(
      pathsOf(job),
      ElementsAre("spec.template.spec.containers[0].resources.limits.nvidia.com/mig-3g.20gb",
                  "spec.template.spec.containers[0].resources.requests.nvidia.com/mig-3g.20gb"));
}

// A required node affinity that admits none of a model's nodes would leave its trials waiting for
// ever: refused, naming the models.
TEST(Validate, ARequiredNodeAffinityMustAdmitEachGpuModel) {
  AutotuneJob job = validJob();
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"};
  job.spec.podTemplate["spec"]["affinity"] = json::parse(R"({"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In",
                             "values": ["NVIDIA-H100-80GB-HBM3"]},
                            {"key": "pool", "operator": "In", "values": ["training"]}]},
      {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "NotIn",
                             "values": ["NVIDIA-A100-SXM4-40GB"]}]}]}}})");
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.template.spec.affinity.nodeAffinity."
                                     "requiredDuringSchedulingIgnoredDuringExecution",
                                     "admits no node of GPU model NVIDIA-A100-SXM4-40GB "
                                     "(spec.gpuModels) by the label nvidia.com/gpu.product"}));
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.gpuModels = {"All"};
  EXPECT_THAT(validate(job), IsEmpty()) << "which models All finds is not known yet";
  job.spec.gpuModels = {"NVIDIA-L40S"};
  job.spec.podTemplate["spec"]["affinity"]["nodeAffinity"]
                      ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][1]
                      ["matchExpressions"][0]["operator"] = "DoesNotExist";
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.template.spec.affinity.nodeAffinity."
                                        "requiredDuringSchedulingIgnoredDuringExecution"));
}

// Which model's config a training Job would run is the user's to say.
TEST(Validate, AfterTuningTakesOneGpuModel) {
  AutotuneJob job = validJob();
  job.spec.afterTuning = json::parse(R"({"spec": {"template": {"spec": {
    "containers": [{"name": "trainer", "image": "train:1"}]}}}})");
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3"};
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.gpuModels = {"All"};
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.afterTuning"));
}

TEST(Validate, NodesPerTrialMustDivideTheGpus) {
  AutotuneJob job = validJob();
  job.spec.resources.gpusPerTrial = 16;
  job.spec.resources.nodesPerTrial = 4;
  EXPECT_THAT(validate(job), IsEmpty());
  job.spec.resources.nodesPerTrial = 3;
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.resources.nodesPerTrial",
                                     "must divide spec.resources.gpusPerTrial (16): each node of a "
                                     "trial gets the same number of GPUs"}));
  job.spec.resources.nodesPerTrial = 0;
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.resources.nodesPerTrial", "must be at least 1"}));
  job.spec.resources.gpusPerTrial = 65;
  job.spec.resources.nodesPerTrial = 65;
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.resources.nodesPerTrial", "must be at most 64"}));
}

TEST(Validate, RendezvousPlaceholdersNeedAMultiNodeJob) {
  AutotuneJob job = validJob();
  job.spec.resources.gpusPerTrial = 16;
  job.spec.podTemplate["spec"]["containers"][1]["command"] =
      nlohmann::json{"torchrun",
                     "--nnodes",
                     "${AUTOTUNE_NUM_NODES}",
                     "--node_rank",
                     "${AUTOTUNE_NODE_RANK}",
                     "--master_addr=${AUTOTUNE_MASTER_ADDR}",
                     "--master_port=${AUTOTUNE_MASTER_PORT}",
                     "train.py"};
  const auto errors = validate(job);
  ASSERT_EQ(errors.size(), 4U);
  EXPECT_EQ(errors[1], (FieldError{"spec.template.spec.containers[1].command[4]",
                                   "${AUTOTUNE_NODE_RANK} is set only for multi-node trials "
                                   "(spec.resources.nodesPerTrial above 1)"}));
  job.spec.resources.nodesPerTrial = 2;
  EXPECT_THAT(validate(job), IsEmpty());
}

TEST(Validate, NamesFollowKubernetesRules) {
  AutotuneJob job = validJob();
  job.metadata["name"] = std::string(253, 'a');
  EXPECT_THAT(validate(job), IsEmpty());
  for (const char* bad : {"", "-a", "a-", "A", "a_b", "a..b", ".a"}) {
    job.metadata["name"] = bad;
    EXPECT_THAT(pathsOf(job), ElementsAre("metadata.name")) << bad;
  }
  job.metadata["name"] = std::string(254, 'a');
  EXPECT_THAT(pathsOf(job), ElementsAre("metadata.name"));
  job.metadata["name"] = 7;
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"metadata.name", "must be a string"}));
}

TEST(Validate, TheTemplateMustNameItsContainers) {
  AutotuneJob job = validJob();
  job.spec.podTemplate = json::object();
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"spec.template", "is required"}));
  job.spec.podTemplate = {{"spec", {{"containers", {{{"image", "x"}}, {{"name", ""}}}}}}};
  job.spec.primaryContainer.clear();
  EXPECT_THAT(pathsOf(job), ElementsAre("spec.template.spec.containers[0].name",
                                        "spec.template.spec.containers[1].name"));
  job.spec.podTemplate = {{"spec", 3}};
  EXPECT_THAT(validate(job), ElementsAre(FieldError{"spec.template.spec", "must be an object"}));
}

// The afterTuning Job is checked as the trial template is, before any trial runs: what the API
// server would refuse once the search is over is refused now.
TEST(Validate, TheAfterTuningTemplateIsCheckedAsTheTrialTemplateIs) {
  AutotuneJob job = validJob();
  job.spec.afterTuning = json::parse(R"({"spec": {"template": {"spec": {
    "containers": [{"name": "trainer", "image": "train:1",
                    "args": ["--stage=${zero_optimization.stage}", "--out=${job}"]}]}}}})");
  EXPECT_THAT(validate(job), IsEmpty()) << "restartPolicy Never is filled in when unset";

  job.spec.afterTuning = json::parse(R"({
    "metadata": {"labels": {"team": 7}},
    "spec": {"template": {"spec": {"restartPolicy": "Always", "containers": [
      {"name": "trainer", "command": "python train.py", "args": ["${trial}", "${nope}"]}]}}}})");
  EXPECT_THAT(
      validate(job),
      ElementsAre(
          FieldError{"spec.afterTuning.metadata.labels.team", "must be a string"},
          FieldError{"spec.afterTuning.spec.template.spec.restartPolicy",
                     "must be Never or OnFailure: a Job's Pods may not restart Always (Never "
                     "when unset)"},
          FieldError{"spec.afterTuning.spec.template.spec.containers[0].command",
                     "must be a list of strings"},
          FieldError{"spec.afterTuning.spec.template.spec.containers[0].args[1]",
                     "unknown placeholder ${nope}"}));

  job.spec.afterTuning = json::parse(R"({"spec": {"template": {"spec": {"containers": {}}}}})");
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.afterTuning.spec.template.spec.containers",
                                     "must list at least one container"}));
  job.spec.afterTuning = json::parse(R"({"spec": "run it"})");
  EXPECT_THAT(validate(job),
              ElementsAre(FieldError{"spec.afterTuning.spec",
                                     "must be an object holding the Job's template"}));
}

TEST(Validate, ReportsEveryProblemNotOnlyTheFirst) {
  AutotuneJob job = validJob();
  job.spec.parallelism = 0;
  job.spec.maxFailedTrials = 0;
  job.spec.resources.gpusPerTrial = 0;
  job.spec.primaryContainer = "nobody";
  job.spec.output.configMapName = "Not Valid";
  EXPECT_THAT(pathsOf(job),
              ElementsAre("spec.resources.gpusPerTrial", "spec.parallelism", "spec.maxFailedTrials",
                          "spec.primaryContainer", "spec.output.configMapName"));
  EXPECT_THAT(pathsOf(job), Not(Contains("spec.resources.modelParallelSize")));
}

}  // namespace
}  // namespace autotune::api

namespace autotune::api {
namespace {

// A megabyte of config (here a long string, as a pasted data set path list would be) could never
// reach a trial: each Pod carries its config in an annotation, 256 KiB for all of them.
TEST(DeepSpeedConfigBounds, AConfigOver64KiBIsRefusedWithItsSize) {
  AutotuneJob job = validJob();
  job.spec.deepspeedConfig["data_paths"] = std::string(1024 * 1024, 'a');
  const FieldErrors errors = validate(job);
  ASSERT_EQ(errors.size(), 1U) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].path, "spec.deepspeedConfig");
  EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("is 1048"));
  EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("at most 65536"));
}

TEST(DeepSpeedConfigBounds, NestingDeeperThan32LevelsIsRefusedAtTheFirstTooDeepValue) {
  AutotuneJob job = validJob();
  json nested = 1;
  for (int level = 0; level < 200; ++level) {
    nested = json{{"n", nested}};
  }
  job.spec.deepspeedConfig["deep"] = nested;
  const FieldErrors errors = validate(job);
  ASSERT_EQ(errors.size(), 1U) << ::testing::PrintToString(errors);
  std::string expected = "spec.deepspeedConfig.deep";
  for (int level = 0; level < 32; ++level) {
    expected += ".n";
  }
  EXPECT_EQ(errors[0].path, expected);
  EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("deeper than 32 levels"));
  job.spec.deepspeedConfig["deep"] = json{{"a", {{"b", {{"c", 1}}}}}};
  EXPECT_THAT(validate(job), IsEmpty());
}

// The candidates 1, 2, ..., last.
json oneTo(int last) {
  json values = json::array();
  for (int value = 1; value <= last; ++value) {
    values.push_back(value);
  }
  return values;
}

// Ten thousand candidates in one list, or a few lists whose product is as large: refused before
// the engine would build every configuration on every decision.
TEST(DeepSpeedConfigBounds, CandidateListsOfMoreThan10000ConfigurationsAreRefused) {
  AutotuneJob job = validJob();
  job.spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = oneTo(10'000);
  FieldErrors errors = validate(job);
  ASSERT_EQ(errors.size(), 1U) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0].path, "spec.deepspeedConfig");
  EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("more than 10000 configurations"));

  job = validJob();
  const json ten = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  job.spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = ten;
  job.spec.deepspeedConfig["zero_optimization"]["allgather_bucket_size"] = ten;
  job.spec.deepspeedConfig["zero_optimization"]["sub_group_size"] = ten;
  job.spec.deepspeedConfig["gradient_accumulation_steps"] = ten;
  errors = validate(job);
  ASSERT_EQ(errors.size(), 1U) << ::testing::PrintToString(errors);
  EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("more than 10000 configurations"));

  job.spec.deepspeedConfig["gradient_accumulation_steps"] = 1;
  EXPECT_THAT(validate(job), IsEmpty());  // 2 offload devices x 1,000, in 4 stages
}

// Every ZeRO stage searched is a space of its own: "all" counts four times, as a list of four does.
TEST(DeepSpeedConfigBounds, EachStageSearchedCountsItsConfigurations) {
  AutotuneJob job = validJob();
  job.spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = oneTo(1'300);
  for (const json& stages : {json("all"), json{0, 1, 2, 3}}) {
    job.spec.deepspeedConfig["zero_optimization"]["stage"] = stages;
    const FieldErrors errors = validate(job);  // 2 offload devices x 1,300 x 4 stages
    ASSERT_EQ(errors.size(), 1U) << stages << ::testing::PrintToString(errors);
    EXPECT_THAT(errors[0].reason, ::testing::HasSubstr("more than 10000 configurations"));
  }
  job.spec.deepspeedConfig["zero_optimization"]["stage"] = json{1, 2, 3};
  EXPECT_THAT(validate(job), IsEmpty());  // 7,800
}

}  // namespace
}  // namespace autotune::api
