#include "controller/objects/trial_pod.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "api/job.h"
#include "controller/objects/objects.h"
#include "tuning/protocol.h"
#include "tuning/space.h"

namespace {

using autotune::api::AutotuneJob;
using autotune::controller::decodePod;
using autotune::controller::jobLabelValue;
using autotune::controller::trialBatchJob;
using autotune::controller::trialBatchJobName;
using autotune::controller::trialPod;
using autotune::controller::trialPodName;
using autotune::controller::trialService;
using autotune::tuning::describeSpace;
using autotune::tuning::launchConfig;
using autotune::tuning::makeFastTrial;
using autotune::tuning::makeProfileTrial;
using autotune::tuning::Trial;
using autotune::tuning::TuningSpace;
using nlohmann::json;

constexpr std::string_view kUid = "6c1f0d5e-2b47-4a8e-9d11-3f0c2a7b9e10";

// The example GPT2-large job, field by field.
constexpr std::string_view kDesignExample = R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: gpt2-large, namespace: ml}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    gradient_accumulation_steps: 1
    fp16: {enabled: true}
    zero_optimization: {stage: [0, 1, 2, 3]}
  model: {numParameters: 774000000}
  resources: {gpusPerTrial: 16, gpuMemory: 32Gi}
  search: {strategy: deepspeed, fast: true, metric: throughput, maxTrials: 50, seed: 1}
  parallelism: 2
  trialTimeout: 30m
  argMappings: {train_micro_batch_size_per_gpu: --per_device_train_batch_size}
  template:
    spec:
      containers:
      - name: trainer
        image: example.org/gpt2-train:1.0
        command: [deepspeed, run_clm.py, --deepspeed, /etc/autotune/ds_config.json]
  output: {configMapName: gpt2-large-optimal}
)";

json parseYaml(std::string_view text) {
  auto document = autotune::api::yamlToJson(text);
  EXPECT_TRUE(document.has_value()) << document.error().reason;
  return document.value_or(json::object());
}

json designDocument() { return parseYaml(kDesignExample); }

json exampleFileDocument() {
  const std::ifstream file(std::string(AUTOTUNE_SOURCE_DIR) + "/examples/gpt2-large.yaml");
  std::ostringstream text;
  text << file.rdbuf();
  return parseYaml(text.str());
}

AutotuneJob decode(json document) {
  document["metadata"]["uid"] = kUid;
  auto job = autotune::api::decodeJob(document);
  if (!job) {
    std::string all;
    for (const auto& error : job.error()) {
      all += autotune::api::format(error) + "\n";
    }
    ADD_FAILURE() << all;
    return {};
  }
  return *job;
}

AutotuneJob gpt2Large() { return decode(designDocument()); }

// The design example with its trainer container patched (RFC 7386 merge patch on containers[0]).
AutotuneJob withTrainer(const json& patch) {
  json document = designDocument();
  document["spec"]["template"]["spec"]["containers"][0].merge_patch(patch);
  return decode(document);
}

Trial z1Trial(const AutotuneJob& job) { return makeFastTrial(describeSpace(job.spec), 1, 3, 1); }

json trainer(const json& pod) { return pod["spec"]["containers"][0]; }

std::string env(const json& container, const std::string& name) {
  for (const auto& variable : container["env"]) {
    if (variable["name"] == name) {
      return variable.value("value", "<valueFrom>");
    }
  }
  return "<unset>";
}

TEST(TrialPod, MatchesTheDesignExampleFieldByField) {
  const AutotuneJob job = gpt2Large();
  const Trial trial = z1Trial(job);
  ASSERT_EQ(trial.name, "z1_gas1_tmbspg3");
  const json pod = trialPod(job, trial);

  EXPECT_EQ(pod["apiVersion"], "v1");
  EXPECT_EQ(pod["kind"], "Pod");
  const json& metadata = pod["metadata"];
  EXPECT_EQ(metadata["name"], "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(metadata["namespace"], "ml");
  EXPECT_EQ(metadata["labels"], (json{{"autotune.io/job", "gpt2-large"},
                                      {"autotune.io/trial", "z1-gas1-tmbspg3"},
                                      {"autotune.io/space", "z1"}}));
  EXPECT_EQ(metadata["annotations"]["autotune.io/trial-name"], "z1_gas1_tmbspg3");
  EXPECT_EQ(metadata["annotations"]["autotune.io/attempt"], "0");
  // The API server keeps it, deleted or not, until the job's status accounts for it.
  EXPECT_EQ(metadata["finalizers"], json::array({"autotune.io/trial-result"}));
  EXPECT_EQ(metadata["ownerReferences"], json::parse(R"([{
      "apiVersion": "autotune.io/v1alpha1", "kind": "AutotuneJob", "name": "gpt2-large",
      "uid": "6c1f0d5e-2b47-4a8e-9d11-3f0c2a7b9e10", "controller": true,
      "blockOwnerDeletion": true}])"));

  const json config =
      json::parse(metadata["annotations"]["autotune.io/ds-config"].get<std::string>());
  EXPECT_EQ(config["train_micro_batch_size_per_gpu"], 3);
  EXPECT_EQ(config["gradient_accumulation_steps"], 1);
  EXPECT_EQ(config["zero_optimization"]["stage"], 1);
  EXPECT_EQ(config["autotuning"], (json{{"enabled", true},
                                        {"metric_path", "/dev/termination-log"},
                                        {"start_profile_step", 3},
                                        {"end_profile_step", 5}}));

  const json& spec = pod["spec"];
  EXPECT_EQ(spec["restartPolicy"], "Never");
  ASSERT_EQ(spec["containers"].size(), 1U);
  const json container = trainer(pod);
  EXPECT_EQ(container["name"], "trainer");
  EXPECT_EQ(container["image"], "example.org/gpt2-train:1.0");
  EXPECT_EQ(container["command"],
            (json{"deepspeed", "run_clm.py", "--deepspeed", "/etc/autotune/ds_config.json",
                  "--per_device_train_batch_size", "3"}));
  EXPECT_FALSE(container.contains("args"));
  EXPECT_EQ(container["env"], json::parse(R"([
      {"name": "AUTOTUNE_JOB", "value": "gpt2-large"},
      {"name": "AUTOTUNE_TRIAL", "value": "z1_gas1_tmbspg3"},
      {"name": "AUTOTUNE_DS_CONFIG", "value": "/etc/autotune/ds_config.json"},
      {"name": "AUTOTUNE_METRICS_PATH", "value": "/dev/termination-log"}])"));
  EXPECT_EQ(
      container["resources"],
      json::parse(R"({"limits": {"nvidia.com/gpu": 16}, "requests": {"nvidia.com/gpu": 16}})"));
  EXPECT_EQ(container["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(container["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_EQ(container["volumeMounts"], json::parse(R"([
      {"name": "autotune-config", "mountPath": "/etc/autotune", "readOnly": true}])"));
  EXPECT_EQ(spec["volumes"], json::parse(R"([{"name": "autotune-config", "downwardAPI": {"items": [
      {"path": "ds_config.json",
       "fieldRef": {"fieldPath": "metadata.annotations['autotune.io/ds-config']"}}]}}])"));
}

// The template's command with `flag`'s value set, or the flag appended.
json withFlag(json command, const std::string& flag, const std::string& value) {
  for (std::size_t i = 0; i + 1 < command.size(); ++i) {
    if (command[i] == flag) {
      command[i + 1] = value;
      return command;
    }
  }
  command.push_back(flag);
  command.push_back(value);
  return command;
}

json plus(json list, const json& item) {
  list.push_back(item);
  return list;
}

TEST(TrialPod, TheExampleJobsTemplateIsKeptAroundTheProtocol) {
  const json document = exampleFileDocument();
  const AutotuneJob job = decode(document);
  const Trial trial = z1Trial(job);
  const json pod = trialPod(job, trial);
  const json& original = document["spec"]["template"]["spec"]["containers"][0];
  const json container = trainer(pod);

  EXPECT_EQ(pod["metadata"]["name"], "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(pod["metadata"]["namespace"], document["metadata"]["namespace"]);
  EXPECT_EQ(container["command"],
            withFlag(withFlag(original["command"], "--deepspeed", "/etc/autotune/ds_config.json"),
                     "--per_device_train_batch_size", "3"));
  for (const auto& [key, value] : original.items()) {
    if (key != "command" && key != "volumeMounts" && key != "env" && key != "resources") {
      EXPECT_EQ(container[key], value) << key;
    }
  }
  const json ours = {
      {"name", "autotune-config"}, {"mountPath", "/etc/autotune"}, {"readOnly", true}};
  EXPECT_EQ(container["volumeMounts"], plus(original.value("volumeMounts", json::array()), ours));
  const json templateVolumes = document["spec"]["template"]["spec"].value("volumes", json::array());
  ASSERT_EQ(pod["spec"]["volumes"].size(), templateVolumes.size() + 1);
  for (std::size_t i = 0; i < templateVolumes.size(); ++i) {
    EXPECT_EQ(pod["spec"]["volumes"][i], templateVolumes[i]);
  }
  EXPECT_EQ(pod["spec"]["volumes"].back()["name"], "autotune-config");
  EXPECT_EQ(env(container, "AUTOTUNE_TRIAL"), "z1_gas1_tmbspg3");
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"], 16);
}

// A job of one GPU model puts its trials on that model's nodes, beside the template's selectors.
TEST(TrialPod, AJobOfOneGpuModelSelectsThatModelsNodes) {
  AutotuneJob job = gpt2Large();
  EXPECT_FALSE(trialPod(job, z1Trial(job))["spec"].contains("nodeSelector"));
  job.spec.gpuModels = {"NVIDIA-H100-80GB-HBM3"};
  job.spec.podTemplate["spec"]["nodeSelector"] = {{"pool", "training"}};
  const json selector = trialPod(job, z1Trial(job))["spec"]["nodeSelector"];
  EXPECT_EQ(selector,
            json({{"pool", "training"}, {"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}));
  EXPECT_EQ(decodePod(trialPod(job, z1Trial(job)))->gpuModel, "NVIDIA-H100-80GB-HBM3");

  job.spec.resources.nodesPerTrial = 2;
  const json batchJob = trialBatchJob(job, z1Trial(job), {});
  EXPECT_EQ(batchJob["spec"]["template"]["spec"]["nodeSelector"], selector);
}

// A container that takes its GPUs from ResourceClaims asks for no nvidia.com/gpu as well; one
// that asks for both keeps asking for the trial's share.
TEST(TrialPod, AContainerOfClaimsTakesItsGpusFromThem) {
  AutotuneJob job = gpt2Large();
  job.spec.podTemplate["spec"]["resourceClaims"] =
      json::parse(R"([{"name": "gpus", "resourceClaimTemplateName": "sixteen-gpus"}])");
  json& templateContainer = job.spec.podTemplate["spec"]["containers"][0];
  templateContainer["resources"] = json::parse(R"({"claims": [{"name": "gpus"}]})");
  json pod = trialPod(job, z1Trial(job));
  EXPECT_EQ(pod["spec"]["resourceClaims"], job.spec.podTemplate["spec"]["resourceClaims"]);
  EXPECT_EQ(trainer(pod)["resources"], templateContainer["resources"]);
  EXPECT_EQ(decodePod(pod)->gpus, 0);
  EXPECT_EQ(pod["metadata"]["annotations"]["autotune.io/claimed-gpus"], "16");
  EXPECT_EQ(decodePod(pod)->claimedGpus, 16) << "held for it while it waits for the scheduler";

  templateContainer["resources"]["limits"] = {{"nvidia.com/gpu", 1}};
  pod = trialPod(job, z1Trial(job));
  EXPECT_EQ(trainer(pod)["resources"]["limits"]["nvidia.com/gpu"], 16);
  EXPECT_FALSE(pod["metadata"]["annotations"].contains("autotune.io/claimed-gpus"));
}

TEST(TrialPod, TheConfigAnnotationIsTheCompactLaunchConfig) {
  const AutotuneJob job = gpt2Large();
  const Trial trial = z1Trial(job);
  const json pod = trialPod(job, trial);
  EXPECT_EQ(pod["metadata"]["annotations"]["autotune.io/ds-config"],
            launchConfig(job.spec, trial, {"/etc/autotune/ds_config.json", "/dev/termination-log"})
                .dump());
}

TEST(TrialPod, ThePodNameIsTheTuningPodNameSoItIsTheSameOnEveryReconcile) {
  const AutotuneJob job = gpt2Large();
  const Trial trial = z1Trial(job);
  EXPECT_EQ(trialPod(job, trial), trialPod(job, trial));
  EXPECT_EQ(trialPod(job, trial)["metadata"]["name"], trialPodName("gpt2-large", trial.name));
}

TEST(TrialPod, PlaceholdersInCommandArgsAndEnvAreFilledIn) {
  const AutotuneJob job = withTrainer(json::parse(R"json({
      "command": ["python", "train.py"],
      "args": ["--mbs", "${train_micro_batch_size_per_gpu}", "--out", "/runs/${job}/${trial}",
               "--deepspeed_config", "ds.json"],
      "env": [{"name": "STAGE", "value": "z${zero_optimization.stage}"},
              {"name": "RUN_DIR", "value": "/runs/$(AUTOTUNE_TRIAL)"},
              {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hub", "key": "token"}}}]
  })json"));
  const json pod = trialPod(job, z1Trial(job));
  const json container = trainer(pod);
  EXPECT_EQ(container["command"], (json{"python", "train.py"}));
  EXPECT_EQ(container["args"],
            (json{"--mbs", "3", "--out", "/runs/gpt2-large/z1_gas1_tmbspg3", "--deepspeed_config",
                  "/etc/autotune/ds_config.json", "--per_device_train_batch_size", "3"}));
  EXPECT_EQ(env(container, "STAGE"), "z1");
  EXPECT_EQ(env(container, "RUN_DIR"), "/runs/$(AUTOTUNE_TRIAL)");
  EXPECT_EQ(env(container, "TOKEN"), "<valueFrom>");
  EXPECT_EQ(container["env"][6]["valueFrom"]["secretKeyRef"]["name"], "hub");
}

TEST(TrialPod, ArgMappingFlagsAlreadyInArgsAreReplacedWhereTheyAre) {
  const AutotuneJob job = withTrainer(json::parse(R"({
      "command": ["deepspeed"],
      "args": ["run_clm.py", "--per_device_train_batch_size", "8", "--deepspeed", "x.json"]
  })"));
  const json container = trainer(trialPod(job, z1Trial(job)));
  EXPECT_EQ(container["command"], (json{"deepspeed"}));
  EXPECT_EQ(container["args"], (json{"run_clm.py", "--per_device_train_batch_size", "3",
                                     "--deepspeed", "/etc/autotune/ds_config.json"}));
}

TEST(TrialPod, ATemplateWithOnlyArgsKeepsTheImageEntrypoint) {
  json document = designDocument();
  json& container = document["spec"]["template"]["spec"]["containers"][0];
  container.erase("command");
  container["args"] = {"--deepspeed", "/etc/autotune/ds_config.json"};
  const AutotuneJob job = decode(document);
  const json built = trainer(trialPod(job, z1Trial(job)));
  EXPECT_FALSE(built.contains("command"));
  EXPECT_EQ(built["args"], (json{"--deepspeed", "/etc/autotune/ds_config.json",
                                 "--per_device_train_batch_size", "3"}));
}

TEST(TrialPod, AQueueNameBecomesTheKueueLabel) {
  json document = designDocument();
  document["spec"]["queueName"] = "gpu-team";
  const AutotuneJob queued = decode(document);
  const json pod = trialPod(queued, z1Trial(queued));
  EXPECT_EQ(pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "gpu-team");

  const AutotuneJob plain = gpt2Large();
  EXPECT_FALSE(
      trialPod(plain, z1Trial(plain))["metadata"]["labels"].contains("kueue.x-k8s.io/queue-name"));
}

TEST(TrialPod, TemplateLabelsAndAnnotationsAreKeptButOursWin) {
  json document = designDocument();
  document["spec"]["template"]["metadata"] = json::parse(R"({
      "labels": {"team": "nlp", "autotune.io/job": "spoofed"},
      "annotations": {"sidecar.istio.io/inject": "false", "autotune.io/trial-name": "spoofed"}
  })");
  const AutotuneJob job = decode(document);
  const json metadata = trialPod(job, z1Trial(job))["metadata"];
  EXPECT_EQ(metadata["labels"]["team"], "nlp");
  EXPECT_EQ(metadata["labels"]["autotune.io/job"], "gpt2-large");
  EXPECT_EQ(metadata["annotations"]["sidecar.istio.io/inject"], "false");
  EXPECT_EQ(metadata["annotations"]["autotune.io/trial-name"], "z1_gas1_tmbspg3");
}

TEST(TrialPod, TheProtocolEnvironmentReplacesTemplateVariablesOfTheSameName) {
  const AutotuneJob job = withTrainer(json::parse(R"({"env": [
      {"name": "NCCL_DEBUG", "value": "INFO"},
      {"name": "AUTOTUNE_TRIAL", "value": "mine"},
      {"name": "AUTOTUNE_DS_CONFIG", "value": "/elsewhere.json"}]})"));
  const json container = trainer(trialPod(job, z1Trial(job)));
  EXPECT_EQ(container["env"], json::parse(R"([
      {"name": "AUTOTUNE_JOB", "value": "gpt2-large"},
      {"name": "AUTOTUNE_TRIAL", "value": "z1_gas1_tmbspg3"},
      {"name": "AUTOTUNE_DS_CONFIG", "value": "/etc/autotune/ds_config.json"},
      {"name": "AUTOTUNE_METRICS_PATH", "value": "/dev/termination-log"},
      {"name": "NCCL_DEBUG", "value": "INFO"}])"));
}

TEST(TrialPod, TemplateResourcesAreKeptAndTheGpuCountIsTheJobs) {
  const AutotuneJob job = withTrainer(json::parse(R"({"resources": {
      "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 1},
      "requests": {"cpu": "4", "ephemeral-storage": "10Gi"}}})"));
  const json container = trainer(trialPod(job, z1Trial(job)));
  EXPECT_EQ(container["resources"], json::parse(R"({
      "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": 16},
      "requests": {"cpu": "4", "ephemeral-storage": "10Gi", "nvidia.com/gpu": 16}})"));
}

TEST(TrialPod, TheTemplatesTerminationMessagePathIsWhereMetricsGo) {
  const AutotuneJob job = withTrainer(json::parse(R"({
      "terminationMessagePath": "/tmp/metrics.json", "terminationMessagePolicy": "File"})"));
  const json pod = trialPod(job, z1Trial(job));
  const json container = trainer(pod);
  EXPECT_EQ(container["terminationMessagePath"], "/tmp/metrics.json");
  EXPECT_EQ(container["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_EQ(env(container, "AUTOTUNE_METRICS_PATH"), "/tmp/metrics.json");
  const json config =
      json::parse(pod["metadata"]["annotations"]["autotune.io/ds-config"].get<std::string>());
  EXPECT_EQ(config["autotuning"]["metric_path"], "/tmp/metrics.json");
}

TEST(TrialPod, TemplateVolumesAndMountsAreKeptAndTheConfigVolumeIsOnlyOurs) {
  json document = designDocument();
  json& container = document["spec"]["template"]["spec"]["containers"][0];
  container["volumeMounts"] = json::parse(R"([
      {"name": "data", "mountPath": "/data"},
      {"name": "old-config", "mountPath": "/etc/autotune"}])");
  document["spec"]["template"]["spec"]["volumes"] = json::parse(R"([
      {"name": "data", "persistentVolumeClaim": {"claimName": "corpus"}},
      {"name": "autotune-config", "emptyDir": {}}])");
  const AutotuneJob job = decode(document);
  const json pod = trialPod(job, z1Trial(job));
  EXPECT_EQ(trainer(pod)["volumeMounts"], json::parse(R"([
      {"name": "data", "mountPath": "/data"},
      {"name": "autotune-config", "mountPath": "/etc/autotune", "readOnly": true}])"));
  ASSERT_EQ(pod["spec"]["volumes"].size(), 2U);
  EXPECT_EQ(pod["spec"]["volumes"][0]["name"], "data");
  EXPECT_EQ(pod["spec"]["volumes"][1]["name"], "autotune-config");
  EXPECT_TRUE(pod["spec"]["volumes"][1].contains("downwardAPI"));
  EXPECT_FALSE(pod["spec"]["volumes"][1].contains("emptyDir"));
}

TEST(TrialPod, OnlyThePrimaryContainerIsTurnedIntoTheTrial) {
  json document = designDocument();
  json& containers = document["spec"]["template"]["spec"]["containers"];
  containers.insert(containers.begin(), json::parse(R"({
      "name": "log-shipper", "image": "fluent-bit:3", "command": ["fluent-bit"],
      "resources": {"limits": {"memory": "128Mi"}}})"));
  document["spec"]["primaryContainer"] = "trainer";
  document["spec"]["template"]["spec"]["nodeSelector"] = {{"gpu", "v100"}};
  const AutotuneJob job = decode(document);
  const json pod = trialPod(job, z1Trial(job));
  EXPECT_EQ(pod["spec"]["containers"][0], document["spec"]["template"]["spec"]["containers"][0]);
  EXPECT_EQ(pod["spec"]["containers"][1]["env"][1]["value"], "z1_gas1_tmbspg3");
  EXPECT_EQ(pod["spec"]["containers"][1]["resources"]["limits"]["nvidia.com/gpu"], 16);
  EXPECT_EQ(pod["spec"]["nodeSelector"], (json{{"gpu", "v100"}}));
}

TEST(TrialPod, ARestartPolicyInTheTemplateBecomesNever) {
  json document = designDocument();
  document["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure";
  const AutotuneJob job = decode(document);
  EXPECT_EQ(trialPod(job, z1Trial(job))["spec"]["restartPolicy"], "Never");
}

// The kubelet ends a trial that outlives its timeout (plus the operator's grace) even when no
// operator runs: whatever the template said.
TEST(TrialPod, TheKubeletsDeadlineIsTheTrialTimeoutAndAGrace) {
  json document = designDocument();
  document["spec"]["trialTimeout"] = "30m";
  document["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 5;
  const AutotuneJob job = decode(document);
  EXPECT_EQ(trialPod(job, z1Trial(job))["spec"]["activeDeadlineSeconds"], 30 * 60 + 120);
}

bool isLabelValue(const std::string& value) {
  if (value.size() > 63) {
    return false;
  }
  for (const char c : value) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return value.empty() || (std::isalnum(static_cast<unsigned char>(value.front())) != 0 &&
                           std::isalnum(static_cast<unsigned char>(value.back())) != 0);
}

TEST(TrialPod, ALongJobNameStillGivesValidNamesAndLabels) {
  json document = designDocument();
  const std::string longName =
      "gpt2-large-finetune-on-the-whole-of-the-internal-corpus-for-2026-q4";
  ASSERT_GT(longName.size(), 63U);
  document["metadata"]["name"] = longName;
  const AutotuneJob job = decode(document);
  const TuningSpace space = describeSpace(job.spec);
  const json pod = trialPod(job, makeFastTrial(space, 1, 3, 1));
  const json other = trialPod(job, makeFastTrial(space, 1, 4, 1));

  const std::string name = pod["metadata"]["name"];
  EXPECT_LE(name.size(), 63U);
  EXPECT_NE(name, other["metadata"]["name"].get<std::string>());
  for (const auto& [key, value] : pod["metadata"]["labels"].items()) {
    EXPECT_TRUE(isLabelValue(value.get<std::string>())) << key << "=" << value;
  }
  EXPECT_EQ(pod["metadata"]["labels"]["autotune.io/job"], jobLabelValue(longName));
  EXPECT_NE(jobLabelValue(longName), jobLabelValue(longName + "x"));
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["name"], longName);
  EXPECT_EQ(env(trainer(pod), "AUTOTUNE_JOB"), longName);
}

TEST(TrialPod, AShortJobNameIsItsOwnLabel) { EXPECT_EQ(jobLabelValue("gpt2-large"), "gpt2-large"); }

TEST(TrialPod, ARelaunchHasANameOfItsOwnAndCountsItsAttempt) {
  const AutotuneJob job = gpt2Large();
  const Trial trial = z1Trial(job);
  const json first = trialPod(job, trial);
  const json second = trialPod(job, trial, {1, 0, std::nullopt});
  EXPECT_EQ(second["metadata"]["name"], "gpt2-large-z1-gas1-tmbspg3-r1");
  EXPECT_EQ(second["metadata"]["name"], trialPodName("gpt2-large", trial.name, 1));
  EXPECT_EQ(second["metadata"]["annotations"]["autotune.io/attempt"], "1");
  EXPECT_EQ(second["metadata"]["labels"], first["metadata"]["labels"]);
  EXPECT_EQ(second["spec"], first["spec"]);
}

TEST(TrialPod, SinceWhenTheTrialIsWantedIsKeptAndReadBack) {
  const AutotuneJob job = gpt2Large();
  const Trial trial = z1Trial(job);
  EXPECT_FALSE(
      trialPod(job, trial)["metadata"]["annotations"].contains("autotune.io/wanted-since"));
  const auto wanted = std::chrono::system_clock::time_point(std::chrono::seconds(1767225600));
  json pod = trialPod(job, trial, {1, 0, wanted});
  EXPECT_EQ(pod["metadata"]["annotations"]["autotune.io/wanted-since"], "2026-01-01T00:00:00Z");
  pod["metadata"]["uid"] = "u1";
  const auto decoded = decodePod(pod);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->wantedSince, wanted);
}

// The design example on two nodes, launching DeepSpeed without ssh on each.
AutotuneJob twoNodes() {
  json document = designDocument();
  document["spec"]["resources"]["nodesPerTrial"] = 2;
  document["spec"]["template"]["spec"]["containers"][0]["command"] =
      json{"deepspeed",
           "--no_ssh",
           "--num_nodes",
           "${AUTOTUNE_NUM_NODES}",
           "--node_rank",
           "${AUTOTUNE_NODE_RANK}",
           "--master_addr",
           "${AUTOTUNE_MASTER_ADDR}",
           "--master_port=${AUTOTUNE_MASTER_PORT}",
           "run_clm.py",
           "--deepspeed",
           "/etc/autotune/ds_config.json"};
  return decode(document);
}

TEST(TrialJob, IsAnIndexedJobOfOnePodPerNodeWithItsShareOfTheGpus) {
  const AutotuneJob job = twoNodes();
  const Trial trial = z1Trial(job);
  const json batchJob = trialBatchJob(job, trial);
  const std::string name = "gpt2-large-z1-gas1-tmbspg3";
  EXPECT_EQ(batchJob["apiVersion"], "batch/v1");
  EXPECT_EQ(batchJob["kind"], "Job");
  EXPECT_EQ(batchJob["metadata"]["name"], name);
  EXPECT_EQ(batchJob["metadata"]["ownerReferences"][0]["uid"], kUid);
  EXPECT_EQ(batchJob["metadata"]["annotations"]["autotune.io/trial-name"], trial.name);
  const json& spec = batchJob["spec"];
  EXPECT_EQ(spec["completionMode"], "Indexed");
  EXPECT_EQ(spec["completions"], 2);
  EXPECT_EQ(spec["parallelism"], 2);
  EXPECT_EQ(spec["backoffLimit"], 0);

  // Each Pod is the single-node trial Pod with 8 of the 16 GPUs. Whose trial it is, its controller
  // (the Job) says, not an annotation anyone could write.
  const json& pod = spec["template"];
  EXPECT_EQ(pod["metadata"]["labels"]["autotune.io/trial"], "z1-gas1-tmbspg3");
  EXPECT_FALSE(pod["metadata"]["annotations"].contains("autotune.io/owner-uid"));
  EXPECT_EQ(pod["metadata"]["annotations"]["autotune.io/trial-name"], trial.name);
  EXPECT_TRUE(pod["metadata"]["annotations"].contains("autotune.io/ds-config"));
  // The Job controller puts its template's finalizers on each Pod it makes; the Job has none.
  EXPECT_EQ(pod["metadata"]["finalizers"], json::array({"autotune.io/trial-result"}));
  EXPECT_FALSE(batchJob["metadata"].contains("finalizers"));
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["subdomain"], name);
  EXPECT_EQ(trainer(pod)["resources"]["limits"]["nvidia.com/gpu"], 8);
  EXPECT_EQ(trainer(pod)["resources"]["requests"]["nvidia.com/gpu"], 8);
  const json spread =
      pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(spread.size(), 1U);
  EXPECT_EQ(spread[0]["topologyKey"], "kubernetes.io/hostname");
  EXPECT_EQ(spread[0]["labelSelector"]["matchLabels"]["batch.kubernetes.io/job-name"], name);
}

TEST(TrialJob, EachPodHasTheRendezvousAndThePlaceholdersReadIt) {
  const AutotuneJob job = twoNodes();
  const json pod = trialBatchJob(job, z1Trial(job))["spec"]["template"];
  const json container = trainer(pod);
  EXPECT_EQ(env(container, "AUTOTUNE_NUM_NODES"), "2");
  EXPECT_EQ(env(container, "AUTOTUNE_MASTER_ADDR"),
            "gpt2-large-z1-gas1-tmbspg3-0.gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(env(container, "AUTOTUNE_MASTER_PORT"), "29500");
  json rank;
  for (const auto& variable : container["env"]) {
    if (variable["name"] == "AUTOTUNE_NODE_RANK") {
      rank = variable;
    }
  }
  EXPECT_EQ(rank["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  // Kubernetes expands $(NAME) in the command from the container's own environment.
  EXPECT_EQ(container["command"],
            (json{"deepspeed", "--no_ssh", "--num_nodes", "$(AUTOTUNE_NUM_NODES)", "--node_rank",
                  "$(AUTOTUNE_NODE_RANK)", "--master_addr", "$(AUTOTUNE_MASTER_ADDR)",
                  "--master_port=$(AUTOTUNE_MASTER_PORT)", "run_clm.py", "--deepspeed",
                  "/etc/autotune/ds_config.json", "--per_device_train_batch_size", "3"}));
}

TEST(TrialJob, TheServiceIsHeadlessAndSelectsTheJobsPods) {
  const AutotuneJob job = twoNodes();
  const json service = trialService(job, z1Trial(job));
  EXPECT_EQ(service["kind"], "Service");
  EXPECT_EQ(service["metadata"]["name"], "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(service["metadata"]["ownerReferences"][0]["uid"], kUid);
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  EXPECT_EQ(service["spec"]["selector"]["batch.kubernetes.io/job-name"],
            "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(service["spec"]["publishNotReadyAddresses"], true);
}

TEST(TrialJob, ARelaunchIsAJobAndServiceOfItsOwn) {
  const AutotuneJob job = twoNodes();
  const json again = trialBatchJob(job, z1Trial(job), {2, 0, std::nullopt});
  EXPECT_EQ(again["metadata"]["name"], "gpt2-large-z1-gas1-tmbspg3-r2");
  EXPECT_EQ(again["spec"]["template"]["metadata"]["annotations"]["autotune.io/attempt"], "2");
  EXPECT_EQ(trialService(job, z1Trial(job), 2)["metadata"]["name"],
            "gpt2-large-z1-gas1-tmbspg3-r2");
}

TEST(TrialJob, NamesLeaveRoomForTheIndexAndStartWithALetter) {
  const std::string longJob(80, 'j');
  for (const auto& name : {trialBatchJobName(longJob, "z3_gas16_tmbspg128"),
                           trialBatchJobName("9lives", "z0_gas1_tmbspg1", 1)}) {
    EXPECT_LE(name.size(), 56U) << name;
    EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(name.front()))) << name;
    EXPECT_TRUE(isLabelValue(name + "-63")) << name;
  }
  EXPECT_NE(trialBatchJobName(longJob, "z3_gas16_tmbspg128"),
            trialBatchJobName(longJob, "z3_gas16_tmbspg64"));
}

TEST(TrialJob, ASingleNodeJobKeepsAllItsGpusOnOnePod) {
  const AutotuneJob job = gpt2Large();
  EXPECT_EQ(trainer(trialPod(job, z1Trial(job)))["resources"]["limits"]["nvidia.com/gpu"], 16);
  EXPECT_EQ(env(trainer(trialPod(job, z1Trial(job))), "AUTOTUNE_NODE_RANK"), "<unset>");
}

TEST(TrialPod, TheProfilingTrialWritesModelInfoToTheTerminationMessage) {
  json document = designDocument();
  document["spec"].erase("model");
  const AutotuneJob job = decode(document);
  const Trial profile = makeProfileTrial(describeSpace(job.spec));
  const json pod = trialPod(job, profile);
  EXPECT_EQ(pod["metadata"]["annotations"]["autotune.io/trial-name"], "profile_model_info");
  EXPECT_EQ(pod["metadata"]["name"], "gpt2-large-profile-model-info");
  const json config =
      json::parse(pod["metadata"]["annotations"]["autotune.io/ds-config"].get<std::string>());
  EXPECT_EQ(config["autotuning"]["model_info"], (json{{"profile", true}}));
  EXPECT_EQ(config["autotuning"]["model_info_path"], "/dev/termination-log");
  EXPECT_EQ(config["zero_optimization"]["stage"], 3);
}

}  // namespace

namespace {

using autotune::controller::afterTuningJob;
using autotune::controller::afterTuningJobName;

TEST(AfterTuningJob, RunsTheUsersJobWithTheBestValuesAndTheOptimalConfigMounted) {
  json document = designDocument();
  document["spec"]["afterTuning"] = parseYaml(R"(
metadata: {labels: {team: ml}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: example.org/gpt2-train:1.0
        command: [deepspeed, run_clm.py, --deepspeed, old.json, --num_train_epochs, "3"]
)");
  const AutotuneJob job = decode(document);
  const TuningSpace space = describeSpace(job.spec);
  const json batch = afterTuningJob(job, makeFastTrial(space, 1, 3, 1));

  EXPECT_EQ(batch["kind"], "Job");
  EXPECT_EQ(batch["metadata"]["name"], "gpt2-large-after-tuning");
  EXPECT_EQ(batch["metadata"]["labels"]["team"], "ml");
  EXPECT_EQ(batch["metadata"]["ownerReferences"][0]["uid"], kUid);
  EXPECT_EQ(batch["spec"]["backoffLimit"], 0);
  const json& pod = batch["spec"]["template"]["spec"];
  EXPECT_EQ(pod["containers"][0]["command"],
            json({"deepspeed", "run_clm.py", "--deepspeed", "/etc/autotune/ds_config.json",
                  "--num_train_epochs", "3", "--per_device_train_batch_size", "3"}));
  EXPECT_EQ(pod["containers"][0]["volumeMounts"][0]["mountPath"], "/etc/autotune");
  EXPECT_EQ(pod["volumes"][0]["configMap"]["name"], "gpt2-large-optimal");
  EXPECT_EQ(pod["volumes"][0]["configMap"]["items"][0]["key"], "ds_config.json");
}

// The Job controller labels the Job's Pods with its name: a long job name must still give one
// of at most 63 characters, the same each time.
TEST(AfterTuningJob, ItsNameIsAValidLabelValueForALongJobName) {
  const std::string jobName(60, 'j');
  const std::string name = afterTuningJobName(jobName);
  EXPECT_LE(name.size(), 63U);
  EXPECT_TRUE(name.starts_with(jobName.substr(0, 40))) << name;
  EXPECT_EQ(name, afterTuningJobName(jobName));
  EXPECT_NE(name, afterTuningJobName(std::string(61, 'j')));
  EXPECT_EQ(afterTuningJobName("gpt2-large"), "gpt2-large-after-tuning");
}

}  // namespace
