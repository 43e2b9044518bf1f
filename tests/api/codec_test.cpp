#include "api/codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "support/field_errors.h"

namespace autotune::api {

namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

// A small valid job; each bad-input test patches it (RFC 7386 merge patch) with one mistake.
constexpr std::string_view kBaseJob = R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: bert, namespace: ml}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    gradient_accumulation_steps: 1
    fp16: {enabled: true}
    optimizer: {type: AdamW, params: {lr: 0.0001, betas: [0.9, 0.999]}}
    zero_optimization: {stage: [0, 1, 2, 3], reduce_bucket_size: [5.0e+07, 5.0e+08]}
  resources: {gpusPerTrial: 8}
  template:
    spec:
      containers:
      - name: trainer
        image: example.org/bert:1
        command: [deepspeed, train.py, --deepspeed, /etc/autotune/ds_config.json]
        args: [--stage, "${zero_optimization.stage}", --run, "${job}-${trial}"]
        env:
        - {name: MBS, value: "${train_micro_batch_size_per_gpu}"}
        - {name: DATA, value: "$(HOME)/data"}
)";

json parseYaml(std::string_view text) {
  const tl::expected<json, FieldError> document = yamlToJson(text);
  EXPECT_TRUE(document.has_value()) << (document ? "" : format(document.error()));
  return document ? *document : json();
}

FieldErrors errorsAfterPatch(std::string_view patchYaml) {
  json document = parseYaml(kBaseJob);
  document.merge_patch(parseYaml(patchYaml));
  const tl::expected<AutotuneJob, FieldErrors> job = decodeJob(document);
  return job ? FieldErrors{} : job.error();
}

std::vector<std::string> pathsAfterPatch(std::string_view patchYaml) {
  std::vector<std::string> paths;
  for (const FieldError& error : errorsAfterPatch(patchYaml)) {
    paths.push_back(error.path);
  }
  return paths;
}

AutotuneJob decodeOrFail(std::string_view yaml) {
  const tl::expected<AutotuneJob, FieldErrors> job = decodeJobYaml(yaml);
  if (!job) {
    std::string all;
    for (const FieldError& error : job.error()) {
      all += format(error) + "\n";
    }
    ADD_FAILURE() << all;
    return {};
  }
  return *job;
}

std::string readSourceFile(const std::string& relativePath) {
  const std::ifstream file(std::string(AUTOTUNE_SOURCE_DIR) + "/" + relativePath);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// --- YAML to JSON ---

TEST(YamlToJson, PlainScalarsBecomeNumbersBooleansAndNull) {
  const json document = parseYaml(R"(
int: 42
negative: -7
hex: 0x1F
float: 0.05
exponent: 1e9
signedExponent: 5.0e+07
yes1: true
yes2: True
no: FALSE
tilde: ~
word: null
empty:
text: hello
)");
  EXPECT_EQ(document["int"], json(42));
  EXPECT_TRUE(document["int"].is_number_integer());
  EXPECT_EQ(document["negative"], json(-7));
  EXPECT_EQ(document["hex"], json(31));
  EXPECT_TRUE(document["float"].is_number_float());
  EXPECT_DOUBLE_EQ(document["float"].get<double>(), 0.05);
  EXPECT_TRUE(document["exponent"].is_number_float());
  EXPECT_DOUBLE_EQ(document["exponent"].get<double>(), 1e9);
  EXPECT_DOUBLE_EQ(document["signedExponent"].get<double>(), 5e7);
  EXPECT_EQ(document["yes1"], json(true));
  EXPECT_EQ(document["yes2"], json(true));
  EXPECT_EQ(document["no"], json(false));
  EXPECT_TRUE(document["tilde"].is_null());
  EXPECT_TRUE(document["word"].is_null());
  EXPECT_TRUE(document["empty"].is_null());
  EXPECT_EQ(document["text"], json("hello"));
}

TEST(YamlToJson, QuotedAndBlockScalarsStayStrings) {
  const json document = parseYaml(R"(
quotedNumber: "42"
singleQuoted: 'true'
tagged: !!str 5
block: |
  line
quotedYes: "yes"
)");
  EXPECT_EQ(document["quotedNumber"], json("42"));
  EXPECT_EQ(document["singleQuoted"], json("true"));
  EXPECT_EQ(document["tagged"], json("5"));
  EXPECT_EQ(document["block"], json("line\n"));
  EXPECT_EQ(document["quotedYes"], json("yes"));
}

// kubectl reads YAML with YAML 1.1's booleans; the CLI must read a job file as the cluster will.
TEST(YamlToJson, BooleansAreReadAsKubernetesReadsThem) {
  const json document = parseYaml(R"(
words: [yes, Yes, YES, y, Y, on, On, ON, true, True, TRUE]
opposites: [no, No, NO, n, N, off, Off, OFF, false, False, FALSE]
)");
  for (const json& word : document["words"]) {
    EXPECT_EQ(word, json(true));
  }
  for (const json& word : document["opposites"]) {
    EXPECT_EQ(word, json(false));
  }
}

TEST(YamlToJson, ListsAndMappingsNest) {
  EXPECT_EQ(parseYaml("a: [1, {b: [x, 2.5]}]"), json::parse(R"({"a": [1, {"b": ["x", 2.5]}]})"));
}

// A Latin-1 file, or a stray byte: refused where it is, not carried into strings that could not
// be written back as JSON.
TEST(YamlToJson, BytesThatAreNotUtf8AreRefusedWithWhereTheyAre) {
  const auto converted = yamlToJson("kind: AutotuneJob\nmetadata:\n  name: caf\xE9\n");
  ASSERT_FALSE(converted.has_value());
  EXPECT_EQ(converted.error(), (FieldError{"line 3, column 12", "is not valid UTF-8"}));
  EXPECT_FALSE(yamlToJson("\xBF").has_value());
  EXPECT_TRUE(yamlToJson("name: caf\xC3\xA9").has_value());
}

TEST(YamlToJson, ControlCharactersYamlDoesNotAllowAreRefusedWithWhereTheyAre) {
  const auto converted = yamlToJson(std::string_view("spec:\n  initial\0_scale: 16\n", 27));
  ASSERT_FALSE(converted.has_value());
  EXPECT_EQ(converted.error(), (FieldError{"line 2, column 10",
                                           "holds the control character 0x00, which YAML does "
                                           "not allow"}));
  EXPECT_TRUE(yamlToJson("a: b\t\r\nc: d\n").has_value());
}

TEST(YamlToJson, JsonInputIsAccepted) {
  EXPECT_EQ(parseYaml(R"({"a": {"b": [1, "2", null]}})"),
            json::parse(R"({"a": {"b": [1, "2", null]}})"));
}

TEST(YamlToJson, SyntaxErrorNamesLineAndColumn) {
  const auto document = yamlToJson("spec:\n  parallelism: 2\n  search: {maxTrials: 5\n");
  ASSERT_FALSE(document.has_value());
  EXPECT_THAT(document.error().path, ::testing::MatchesRegex("line [0-9]+, column [0-9]+"));
  EXPECT_FALSE(document.error().reason.empty());

  const auto mapValue = yamlToJson("a: b: c\n");
  ASSERT_FALSE(mapValue.has_value());
  EXPECT_EQ(mapValue.error().path, "line 1, column 5");
  EXPECT_EQ(format(mapValue.error()), "line 1, column 5: illegal map value");
}

TEST(YamlToJson, DuplicateKeysAreAnErrorRatherThanSilentlyDropped) {
  const auto document = yamlToJson("a: 1\nb: 2\na: 3\n");
  ASSERT_FALSE(document.has_value());
  EXPECT_EQ(document.error().path, "line 3, column 1");
  EXPECT_EQ(document.error().reason, "duplicate key \"a\"");
}

TEST(YamlToJson, EmptyDocumentIsAnError) {
  for (const std::string_view text : {"", "\n", "# only a comment\n", "---\n"}) {
    const auto document = yamlToJson(text);
    ASSERT_FALSE(document.has_value()) << '"' << text << '"';
    EXPECT_EQ(document.error(), (FieldError{"", "the document is empty"}));
  }
}

TEST(YamlToJson, AliasesAreExpanded) {
  EXPECT_EQ(parseYaml("base: &b {stage: 1}\ncopy: *b\n")["copy"], json::parse(R"({"stage": 1})"));
}

TEST(YamlToJson, SelfReferencingAliasIsAnErrorNotACrash) {
  const auto document = yamlToJson("a: &x [1, *x]\n");
  ASSERT_FALSE(document.has_value());
  EXPECT_EQ(document.error().reason, "nesting is too deep");
}

TEST(YamlToJson, ExponentialAliasExpansionIsRefused) {
  std::string text = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 7; ++level) {
    const std::string previous = "*l" + std::to_string(level - 1);
    text += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) {
      text += (i == 0 ? "" : ", ") + previous;
    }
    text += "]\n";
  }
  const auto document = yamlToJson(text);
  ASSERT_FALSE(document.has_value());
  EXPECT_EQ(document.error().reason, "the document is too large");
}

TEST(YamlToJson, FirstOfSeveralDocumentsIsUsed) {
  EXPECT_EQ(parseYaml("a: 1\n---\nb: 2\n"), json::parse(R"({"a": 1})"));
}

// --- decoding good input ---

TEST(DecodeJob, ExampleDecodesWithoutErrors) {
  const std::string text = readSourceFile("examples/gpt2-large.yaml");
  ASSERT_FALSE(text.empty());
  const AutotuneJob job = decodeOrFail(text);
  EXPECT_EQ(job.name(), "gpt2-large");
  EXPECT_EQ(job.namespaceName(), "ml");
  EXPECT_EQ(job.spec.resources.gpusPerTrial, 16);
  ASSERT_TRUE(job.spec.resources.gpuMemory.has_value());
  EXPECT_EQ(job.spec.resources.gpuMemory->value(), 32LL * 1024 * 1024 * 1024);
  EXPECT_EQ(job.spec.model.numParameters, 774000000);
  EXPECT_EQ(job.spec.search.seed, 1);
  EXPECT_EQ(job.spec.parallelism, 2);
  EXPECT_EQ(job.spec.trialTimeout.value(), std::chrono::minutes(30));
  EXPECT_EQ(job.spec.argMappings.at("train_micro_batch_size_per_gpu"),
            "--per_device_train_batch_size");
  EXPECT_EQ(job.spec.deepspeedConfig["zero_optimization"]["stage"], json::parse("[0, 1, 2, 3]"));
  EXPECT_EQ(job.spec.primaryContainer, "trainer");
  EXPECT_EQ(job.spec.output.configMapName, "gpt2-large-optimal");
}

TEST(DecodeJob, DefaultsAreAppliedToWhatIsLeftOut) {
  const AutotuneJob job = decodeOrFail(kBaseJob);
  const Spec& spec = job.spec;
  EXPECT_EQ(spec.resources.nodesPerTrial, 1);
  EXPECT_EQ(spec.resources.modelParallelSize, 1);
  EXPECT_FALSE(spec.resources.gpuMemory.has_value());
  EXPECT_FALSE(spec.model.numParameters.has_value());
  EXPECT_EQ(spec.search.strategy, Strategy::kDeepSpeed);
  EXPECT_TRUE(spec.search.fast);
  EXPECT_EQ(spec.search.metric, Metric::kThroughput);
  EXPECT_EQ(spec.search.maxTrials, 50);
  EXPECT_EQ(spec.search.earlyStopping, 5);
  EXPECT_DOUBLE_EQ(spec.search.plateauThreshold, 0.05);
  EXPECT_EQ(spec.search.minMicroBatchSize, 1);
  EXPECT_EQ(spec.search.numTuningMicroBatchSizes, 3);
  EXPECT_FALSE(spec.search.maxTrainBatchSize.has_value());
  EXPECT_EQ(spec.parallelism, 1);
  EXPECT_EQ(spec.trialTimeout.value(), std::chrono::hours(1));
  EXPECT_EQ(spec.schedulingTimeout.value(), std::chrono::minutes(15));
  EXPECT_EQ(spec.maxFailedTrials, 10);
  EXPECT_EQ(spec.primaryContainer, "trainer");
  EXPECT_EQ(spec.output.configMapName, "bert-optimal");
  EXPECT_FALSE(spec.output.retain);
  EXPECT_EQ(spec.cleanup, Cleanup::kDeleteFinished);
  EXPECT_EQ(spec.reuse, Reuse::kEnabled);
  EXPECT_TRUE(spec.queueName.empty());
  EXPECT_FALSE(spec.afterTuning.has_value());
  EXPECT_EQ(job.status.phase, Phase::kPending);
  EXPECT_TRUE(job.status.results.empty());
}

TEST(DecodeJob, ExplicitValuesOverrideDefaults) {
  json document = parseYaml(kBaseJob);
  document.merge_patch(parseYaml(R"(
spec:
  resources: {gpuMemory: 34359738368, modelParallelSize: 2}
  model: {numParameters: 7.74e8, hiddenSize: 1280}
  search: {strategy: model-based, metric: latency, fast: false, maxTrainBatchSize: 512}
  schedulingTimeout: 1h30m
  primaryContainer: trainer
  output: {configMapName: bert-best, retain: true}
  cleanup: Keep
  reuse: Disabled
  queueName: team-a
  afterTuning:
    spec: {template: {spec: {restartPolicy: Never, containers: [{name: train, image: "bert:1"}]}}}
)"));
  const auto job = decodeJob(document);
  ASSERT_TRUE(job.has_value()) << format(job.error().front());
  const Spec& spec = job->spec;
  EXPECT_EQ(spec.resources.gpuMemory->value(), 34359738368);
  EXPECT_EQ(spec.resources.modelParallelSize, 2);
  EXPECT_EQ(spec.model.numParameters, 774000000);
  EXPECT_EQ(spec.model.hiddenSize, 1280);
  EXPECT_EQ(spec.search.strategy, Strategy::kModelBased);
  EXPECT_EQ(spec.search.metric, Metric::kLatency);
  EXPECT_FALSE(spec.search.fast);
  EXPECT_EQ(spec.search.maxTrainBatchSize, 512);
  EXPECT_EQ(spec.schedulingTimeout.value(), std::chrono::minutes(90));
  EXPECT_EQ(spec.output.configMapName, "bert-best");
  EXPECT_TRUE(spec.output.retain);
  EXPECT_EQ(spec.cleanup, Cleanup::kKeep);
  EXPECT_EQ(spec.reuse, Reuse::kDisabled);
  EXPECT_EQ(spec.queueName, "team-a");
  ASSERT_TRUE(spec.afterTuning.has_value());
  EXPECT_EQ((*spec.afterTuning)["spec"]["template"]["spec"]["restartPolicy"], "Never");
}

TEST(DecodeJob, FreeFormSectionsAreKeptWhole) {
  const AutotuneJob job = decodeOrFail(kBaseJob);
  EXPECT_EQ(job.spec.deepspeedConfig, parseYaml(kBaseJob)["spec"]["deepspeedConfig"]);
  EXPECT_EQ(job.spec.podTemplate, parseYaml(kBaseJob)["spec"]["template"]);
  EXPECT_EQ(job.metadata, json::parse(R"({"name": "bert", "namespace": "ml"})"));
}

TEST(DecodeJob, KubernetesVariablesAreLeftAlone) {
  EXPECT_THAT(pathsAfterPatch(R"yaml(
spec:
  template:
    spec:
      containers:
      - name: trainer
        args: ["$(HOME)", "$(POD_NAME)-${trial}", "${zero_optimization.reduce_bucket_size}"]
)yaml"),
              IsEmpty());
}

// --- round trips ---

constexpr std::string_view kStatus = R"(
status:
  phase: Succeeded
  observedGeneration: 3
  startTime: "2026-01-02T03:04:05Z"
  completionTime: "2026-01-02T05:00:00Z"
  message: best z1_gas1_tmbspg3
  conditions:
  - {type: SpecValid, status: "True", reason: Valid, message: "", lastTransitionTime: "2026-01-02T03:04:05Z", observedGeneration: 3}
  - {type: Complete, status: "True", reason: SearchFinished, message: done, lastTransitionTime: "2026-01-02T05:00:00Z", observedGeneration: 3}
  trials: {launched: 4, succeeded: 2, oom: 1, failed: 1, pruned: 7}
  best: {trial: z1_gas1_tmbspg3, metric: throughput, value: 123.5, zeroStage: 1, microBatchSize: 3, gradientAccumulationSteps: 1, speedup: 1.8}
  model: {numParameters: 774000000, activationMemoryPerSample: 9600000000}
  spaces:
  - {name: z0, trials: 2, bestValue: 100, bestTrial: z0_gas1_tmbspg2}
  - {name: z1, trials: 2, bestValue: 123.5, bestTrial: z1_gas1_tmbspg3}
  results:
  - {name: z0_gas1_tmbspg2, space: z0, outcome: Succeeded, value: 100, startTime: "2026-01-02T03:05:00Z", durationSeconds: 61.5, metrics: {throughput: 100, latency: 5865000.0, flops: 1.2e13}}
  - {name: z0_gas1_tmbspg4, space: z0, outcome: OOM, reason: CUDA out of memory, durationSeconds: 12}
  - {name: z1_gas1_tmbspg3, space: z1, outcome: Succeeded, value: 123.5, durationSeconds: 70}
  - {name: z1_gas1_tmbspg5, space: z1, outcome: Failed, reason: exit code 1, durationSeconds: 5}
  afterTuningJob: bert-train
)";

TEST(RoundTrip, YamlToJobToJsonToJobToJsonIsStable) {
  const AutotuneJob first = decodeOrFail(std::string(kBaseJob) + std::string(kStatus));
  const json firstJson = encode(first);
  const auto second = decodeJob(firstJson);
  ASSERT_TRUE(second.has_value()) << format(second.error().front());
  EXPECT_EQ(encode(*second), firstJson);
  EXPECT_EQ(second->status.results.size(), 4U);
  EXPECT_EQ(second->status.results[1].outcome, Outcome::kOOM);
  EXPECT_FALSE(second->status.results[1].value.has_value());
  EXPECT_EQ(second->status.results[0].metrics.at("latency"), 5865000.0);
  EXPECT_TRUE(second->status.results[1].metrics.empty());
  EXPECT_FALSE(firstJson["status"]["results"][1].contains("metrics"));
  EXPECT_EQ(second->status.best->speedup, 1.8);
  EXPECT_EQ(second->status.conditions[1].reason, "SearchFinished");
  EXPECT_EQ(second->status.spaces[1].bestTrial, "z1_gas1_tmbspg3");
  EXPECT_EQ(second->status.model->activationMemoryPerSample, 9600000000);
}

// Each field is declared once for decoding and encoding: a spec with every field set apart from
// its default is written back exactly as it was read.
TEST(RoundTrip, ASpecWithEveryFieldSetIsWrittenBackAsRead) {
  json document = parseYaml(kBaseJob);
  document.merge_patch(parseYaml(R"(
spec:
  model: {numParameters: 774000000, activationMemoryPerSample: 9600000, hiddenSize: 1280,
          numLayers: 36}
  resources: {gpusPerTrial: 4, nodesPerTrial: 1, gpuMemory: 80Gi, modelParallelSize: 2}
  search: {strategy: random, fast: false, metric: latency, maxTrials: 20, earlyStopping: 3,
           plateauThreshold: 0.1, minMicroBatchSize: 2, maxMicroBatchSize: 64,
           maxTrainBatchSize: 512, numTuningMicroBatchSizes: 4, seed: 7}
  parallelism: 3
  trialTimeout: 30m
  schedulingTimeout: 1h30m
  maxFailedTrials: 4
  argMappings: {train_micro_batch_size_per_gpu: --per_device_train_batch_size}
  primaryContainer: trainer
  output: {configMapName: bert-best, retain: true}
  cleanup: Keep
  reuse: Disabled
  queueName: team-a
  afterTuning:
    spec: {template: {spec: {restartPolicy: Never, containers: [{name: train, image: "bert:1"}]}}}
)"));
  const AutotuneJob job = decodeOrFail(document.dump());
  EXPECT_EQ(encode(job.spec), document["spec"]);
}

TEST(RoundTrip, JsonTextSurvivesSerialization) {
  const AutotuneJob job = decodeOrFail(readSourceFile("examples/gpt2-large.yaml"));
  const std::string text = encode(job).dump();
  const auto again = decodeJob(json::parse(text));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(encode(*again).dump(), text);
}

TEST(RoundTrip, UnitsPrintBackAsWritten) {
  json document = parseYaml(kBaseJob);
  document.merge_patch(parseYaml("spec: {resources: {gpuMemory: 1.5Gi}, trialTimeout: 1h30m}"));
  const json encoded = encode(*decodeJob(document));
  EXPECT_EQ(encoded["spec"]["resources"]["gpuMemory"], "1.5Gi");
  EXPECT_EQ(encoded["spec"]["trialTimeout"], "1h30m");
}

TEST(Encode, WritesDefaultsExplicitlyAndLeavesUnsetOptionalsOut) {
  const json spec = encode(decodeOrFail(kBaseJob).spec);
  EXPECT_EQ(spec["search"]["maxTrials"], 50);
  EXPECT_EQ(spec["search"]["strategy"], "deepspeed");
  EXPECT_EQ(spec["search"]["plateauThreshold"], 0.05);
  EXPECT_EQ(spec["resources"]["nodesPerTrial"], 1);
  EXPECT_EQ(spec["trialTimeout"], "1h");
  EXPECT_EQ(spec["schedulingTimeout"], "15m");
  EXPECT_EQ(spec["cleanup"], "DeleteFinished");
  EXPECT_EQ(spec["reuse"], "Enabled");
  EXPECT_EQ(spec["output"]["configMapName"], "bert-optimal");
  EXPECT_EQ(spec["primaryContainer"], "trainer");
  EXPECT_FALSE(spec.contains("model"));
  EXPECT_FALSE(spec["resources"].contains("gpuMemory"));
  EXPECT_FALSE(spec["search"].contains("maxTrainBatchSize"));
  EXPECT_FALSE(spec.contains("queueName"));
  EXPECT_FALSE(spec.contains("afterTuning"));
}

TEST(Encode, EmptyStatusKeepsOnlyPhaseCountsAndResults) {
  const json status = encode(Status{});
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_TRUE(status["results"].is_array());
  EXPECT_TRUE(status["trials"].is_object());
  for (const char* absent : {"conditions", "startTime", "completionTime", "message", "best",
                             "model", "spaces", "afterTuningJob"}) {
    EXPECT_FALSE(status.contains(absent)) << absent;
  }
}

TEST(DecodeStatus, MissingStatusIsTheDefault) {
  const auto status = decodeStatus(json());
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(encode(*status), encode(Status{}));
}

TEST(DecodeStatus, EveryBadStatusFieldIsNamed) {
  const auto status = decodeStatus(parseYaml(R"(
phase: Done
trials: {launched: many, retried: 1}
results:
- {name: a, outcome: Crashed, value: fast}
- {name: b, outcome: OOM, durationSeconds: [1], metrics: {latency: slow}}
- {name: c, outcome: Succeeded, metrics: [1]}
conditions: {type: Complete}
)"));
  ASSERT_FALSE(status.has_value());
  std::vector<std::string> paths;
  for (const FieldError& error : status.error()) {
    paths.push_back(error.path);
  }
  EXPECT_THAT(paths, UnorderedElementsAre(
                         "status.phase", "status.trials.launched", "status.trials.retried",
                         "status.results[0].outcome", "status.results[0].value",
                         "status.results[1].durationSeconds", "status.results[1].metrics.latency",
                         "status.results[2].metrics", "status.conditions"));
}

// --- bad input: every mistake names its field ---

struct BadInput {
  std::string_view patch;
  std::string_view path;
  std::string_view reason;
};

TEST(DecodeJob, EachMistakeNamesItsExactField) {
  const std::vector<BadInput> cases{
      {"apiVersion: autotune.io/v1", "apiVersion", "must be autotune.io/v1alpha1"},
      {"kind: Job", "kind", "must be AutotuneJob"},
      {"metadata: {name: GPT2_Large}", "metadata.name",
       "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
       "with a letter or digit, at most 253 characters"},
      {"metadata: {name: null}", "metadata.name", "is required"},
      {"spec: {resources: {gpusPerTrial: 0}}", "spec.resources.gpusPerTrial",
       "must be between 1 and 1024"},
      {"spec: {resources: {gpusPerTrial: [1, 2]}}", "spec.resources.gpusPerTrial",
       "must be an integer, not a list"},
      {"spec: {resources: {gpusPerTrial: eight}}", "spec.resources.gpusPerTrial",
       "must be an integer"},
      {"spec: {resources: {nodesPerTrial: 3}}", "spec.resources.nodesPerTrial",
       "must divide spec.resources.gpusPerTrial (8): each node of a trial gets the same number of "
       "GPUs"},
      {"spec: {resources: {modelParallelSize: 3}}", "spec.resources.modelParallelSize",
       "must divide spec.resources.gpusPerTrial (8)"},
      {"spec: {resources: {gpuMemory: 32GB}}", "spec.resources.gpuMemory",
       "must be a quantity such as 32Gi or 34359738368"},
      {"spec: {resources: {gpuMemory: 0}}", "spec.resources.gpuMemory", "must be more than 0"},
      {"spec: {model: {numParameters: -5}}", "spec.model.numParameters", "must be more than 0"},
      {"spec: {model: {numLayers: 2.5}}", "spec.model.numLayers", "must be an integer"},
      {"spec: {search: {metric: speed}}", "spec.search.metric",
       "must be one of throughput, latency, flops"},
      {"spec: {search: {strategy: bayes}}", "spec.search.strategy",
       "must be one of deepspeed, grid, random, model-based"},
      {"spec: {search: {maxTrials: 5000}}", "spec.search.maxTrials", "must be between 1 and 1000"},
      {"spec: {search: {earlyStopping: -1}}", "spec.search.earlyStopping",
       "must be at least 0 (0 turns early stopping off)"},
      {"spec: {search: {plateauThreshold: 1.5}}", "spec.search.plateauThreshold",
       "must be at least 0 and less than 1"},
      {"spec: {search: {plateauThreshold: low}}", "spec.search.plateauThreshold",
       "must be a number"},
      {"spec: {search: {minMicroBatchSize: 8, maxMicroBatchSize: 4}}",
       "spec.search.maxMicroBatchSize", "must be at least spec.search.minMicroBatchSize (8)"},
      {"spec: {search: {maxTrainBatchSize: 0}}", "spec.search.maxTrainBatchSize",
       "must be at least 1"},
      {"spec: {search: {fast: \"yes\"}}", "spec.search.fast", "must be a boolean"},
      {"spec: {search: {seed: '1'}}", "spec.search.seed", "must be an integer"},
      {"spec: {search: {maxTrial: 5}}", "spec.search.maxTrial", "unknown field"},
      {"spec: {serach: {maxTrials: 5}}", "spec.serach", "unknown field"},
      {"spec: {search: [deepspeed]}", "spec.search", "must be an object, not a list"},
      {"spec: {parallelism: 0}", "spec.parallelism", "must be between 1 and 1000"},
      {"spec: {maxFailedTrials: 0}", "spec.maxFailedTrials", "must be at least 1"},
      {"spec: {trialTimeout: 30}", "spec.trialTimeout", "must be a duration such as 30m or 1h30m"},
      {"spec: {trialTimeout: 30 minutes}", "spec.trialTimeout",
       "must be a duration such as 30m or 1h30m"},
      {"spec: {schedulingTimeout: 0s}", "spec.schedulingTimeout", "must be longer than 0s"},
      {"spec: {trialTimeout: 3000000h}", "spec.trialTimeout", "must be at most 720h"},
      {"spec: {schedulingTimeout: 720h1ms}", "spec.schedulingTimeout", "must be at most 720h"},
      {"spec: {queueTimeout: 0s}", "spec.queueTimeout", "must be longer than 0s"},
      {"spec: {queueTimeout: 721h}", "spec.queueTimeout", "must be at most 720h"},
      {"spec: {queueTimeout: 1d}", "spec.queueTimeout", "must be a duration such as 30m or 1h30m"},
      {"spec: {cleanup: Delete}", "spec.cleanup", "must be one of DeleteFinished, Keep"},
      {"spec: {reuse: Never}", "spec.reuse", "must be one of Enabled, Disabled"},
      {"spec: {reuse: Off}", "spec.reuse", "must be a string"},
      {"spec: {queueName: 'team a'}", "spec.queueName",
       "must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending "
       "with a letter or digit"},
      {"spec: {output: {configMapName: Best_Config}}", "spec.output.configMapName",
       "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', starting and ending "
       "with a letter or digit, at most 253 characters"},
      {"spec: {output: {retain: 1}}", "spec.output.retain", "must be a boolean"},
      {"spec: {afterTuning: 5}", "spec.afterTuning", "must be an object"},
      {"spec: {gpuModels: NVIDIA-H100-80GB-HBM3}", "spec.gpuModels", "must be a list"},
      {"spec: {gpuModels: [H100, 7]}", "spec.gpuModels[1]", "must be a string"},
      {"spec: {deepspeedConfig: null}", "spec.deepspeedConfig", "is required"},
      {"spec: {deepspeedConfig: [1, 2]}", "spec.deepspeedConfig", "must be an object"},
      {"spec: {deepspeedConfig: {zero_optimization: {stage: [0, 1, 4]}}}",
       "spec.deepspeedConfig.zero_optimization.stage[2]", "ZeRO stages are 0 to 3"},
      {"spec: {deepspeedConfig: {zero_optimization: {stage: 5}}}",
       "spec.deepspeedConfig.zero_optimization.stage", "ZeRO stages are 0 to 3"},
      {"spec: {deepspeedConfig: {zero_optimization: {stage: two}}}",
       "spec.deepspeedConfig.zero_optimization.stage",
       R"(must be an integer 0-3, a list of them, or "all")"},
      {"spec: {deepspeedConfig: {zero_optimization: {stage: [1, 2, 1]}}}",
       "spec.deepspeedConfig.zero_optimization.stage[2]", "lists stage 1 twice"},
      {"spec: {deepspeedConfig: {train_micro_batch_size_per_gpu: [4, 0]}}",
       "spec.deepspeedConfig.train_micro_batch_size_per_gpu[1]", "must be a positive integer"},
      {"spec: {deepspeedConfig: {train_micro_batch_size_per_gpu: max}}",
       "spec.deepspeedConfig.train_micro_batch_size_per_gpu",
       R"(must be "auto", a positive integer or a non-empty list of positive integers)"},
      {"spec: {deepspeedConfig: {gradient_accumulation_steps: []}}",
       "spec.deepspeedConfig.gradient_accumulation_steps",
       "a list of candidate values must not be empty"},
      {"spec: {deepspeedConfig: {train_batch_size: [64, 128]}}",
       "spec.deepspeedConfig.train_batch_size",
       "is derived per trial from micro-batch × gradient accumulation × data-parallel size; "
       "bound it with spec.search.maxTrainBatchSize"},
      {"spec: {deepspeedConfig: {zero_optimization: {reduce_bucket_size: []}}}",
       "spec.deepspeedConfig.zero_optimization.reduce_bucket_size",
       "a list of candidate values must not be empty"},
      {"spec: {argMappings: {micro_batch: --mbs}}", "spec.argMappings.micro_batch",
       "names no key of spec.deepspeedConfig"},
      {"spec: {argMappings: {stage: ''}}", "spec.argMappings.stage",
       "must be a command-line flag such as --batch_size"},
      {"spec: {argMappings: {stage: 3}}", "spec.argMappings.stage", "must be a string"},
      {"spec: {primaryContainer: worker}", "spec.primaryContainer",
       R"(no container named "worker" in spec.template)"},
      {"spec: {template: null}", "spec.template", "is required"},
      {"spec: {template: {spec: {containers: []}}}", "spec.template.spec.containers",
       "must list at least one container"},
      {"spec: {template: {spec: {containers: [{image: x}]}}}",
       "spec.template.spec.containers[0].name", "is required"},
      {"spec: {template: {spec: {containers: [{name: t, args: [a, b, c, '${foo}']}]}}}",
       "spec.template.spec.containers[0].args[3]", "unknown placeholder ${foo}"},
      {"spec: {template: {spec: {containers: [{name: t, env: [{name: X, value: '${stage}'}]}]}}}",
       "spec.template.spec.containers[0].env[0].value", "unknown placeholder ${stage}"},
      {"status: {phase: Done}", "status.phase",
       "must be one of Pending, Profiling, Running, Succeeded, Failed"},
      {"status: {results: [{name: a, outcome: Crashed}]}", "status.results[0].outcome",
       "must be one of Succeeded, MetricsUnavailable, OOM, Failed, TimedOut, Unschedulable, "
       "ConfigNotApplied"},
      {"extra: 1", "extra", "unknown field"},
  };
  for (const BadInput& input : cases) {
    SCOPED_TRACE(input.patch);
    EXPECT_THAT(errorsAfterPatch(input.patch),
                ElementsAre(FieldError{std::string(input.path), std::string(input.reason)}));
  }
}

TEST(DecodeJob, EveryMistakeInOneFileIsReported) {
  const auto job = decodeJobYaml(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: bert}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: [0, 2]
    zero_optimization: {stage: [1, 4]}
  resources: {gpusPerTrial: [8, 16], nodesPerTrial: 0}
  search: {metric: speed, maxTrials: 0, fast: sometimes}
  trialTimeout: soon
  argMappings: {unknown_key: --x}
  template:
    spec:
      containers:
      - name: trainer
        args: ["${nope}"]
  colour: blue
)");
  ASSERT_FALSE(job.has_value());
  std::vector<std::string> paths;
  for (const FieldError& error : job.error()) {
    paths.push_back(error.path);
  }
  EXPECT_THAT(
      paths, UnorderedElementsAre("spec.deepspeedConfig.train_micro_batch_size_per_gpu[0]",
                                  "spec.deepspeedConfig.zero_optimization.stage[1]",
                                  "spec.resources.gpusPerTrial", "spec.resources.nodesPerTrial",
                                  "spec.search.metric", "spec.search.maxTrials", "spec.search.fast",
                                  "spec.trialTimeout", "spec.argMappings.unknown_key",
                                  "spec.template.spec.containers[0].args[0]", "spec.colour"));
}

TEST(DecodeJob, AFieldThatFailsToDecodeIsReportedOnce) {
  // gpusPerTrial keeps its default when it fails to decode; modelParallelSize must not then be
  // blamed for not dividing that default.
  EXPECT_THAT(pathsAfterPatch("spec: {resources: {gpusPerTrial: lots, modelParallelSize: 3}}"),
              ElementsAre("spec.resources.gpusPerTrial"));
  EXPECT_THAT(pathsAfterPatch("spec: {search: {minMicroBatchSize: x, maxMicroBatchSize: 0}}"),
              ElementsAre("spec.search.minMicroBatchSize"));
}

TEST(DecodeJob, AnInvalidNameIsNotBlamedOnTheDefaultedConfigMapName) {
  EXPECT_THAT(pathsAfterPatch("metadata: {name: Bad_Name}"), ElementsAre("metadata.name"));
}

TEST(DecodeJob, MissingSpecIsOneError) {
  const auto job = decodeJobYaml(
      "apiVersion: autotune.io/v1alpha1\nkind: AutotuneJob\n"
      "metadata: {name: a}\n");
  ASSERT_FALSE(job.has_value());
  EXPECT_THAT(job.error(), ElementsAre(FieldError{"spec", "is required"}));
}

TEST(DecodeJob, ADocumentThatIsNoObjectIsOneError) {
  const auto job = decodeJobYaml("- just\n- a list\n");
  ASSERT_FALSE(job.has_value());
  EXPECT_THAT(job.error(), ElementsAre(FieldError{"", "must be an object, not a list"}));
}

TEST(DecodeJob, YamlSyntaxErrorIsReportedWithItsPosition) {
  const auto job = decodeJobYaml("apiVersion: autotune.io/v1alpha1\nkind: AutotuneJob: x\n");
  ASSERT_FALSE(job.has_value());
  ASSERT_EQ(job.error().size(), 1U);
  EXPECT_EQ(job.error().front().path, "line 2, column 18");
}

TEST(Format, JoinsPathAndReason) {
  EXPECT_EQ(format({"spec.search.metric", "must be one of throughput, latency, flops"}),
            "spec.search.metric: must be one of throughput, latency, flops");
  EXPECT_EQ(format({"", "the document is empty"}), "the document is empty");
}

}  // namespace
}  // namespace autotune::api
