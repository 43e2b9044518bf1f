#pragma once
// The AutotuneJob resource (autotune.io/v1alpha1): spec and status as plain values, with the
// defaults of the API already applied. Parsing, printing and validation live in codec.h and
// validation.h; nothing here performs I/O.

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/units.h"

namespace autotune::api {

inline constexpr std::string_view kGroup = "autotune.io";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "autotune.io/v1alpha1";
inline constexpr std::string_view kKind = "AutotuneJob";

enum class Strategy { kDeepSpeed, kGrid, kRandom, kModelBased };
enum class Metric { kThroughput, kLatency, kFlops };
enum class Cleanup { kDeleteFinished, kKeep };
// Whether a job takes trial results measured before under the same identity (docs/api.md).
enum class Reuse { kEnabled, kDisabled };
enum class Phase { kPending, kProfiling, kRunning, kSucceeded, kFailed };

// Whether a job in this phase has ended: Succeeded or Failed.
constexpr bool hasEnded(Phase phase) {
  return phase == Phase::kSucceeded || phase == Phase::kFailed;
}

// How a finished trial ended (the trial protocol's classification).
// kConfigNotApplied: the trial ran, but not the config it was given (its script passed other
// batch sizes, or overrode them): no measurement of that config.
enum class Outcome {
  kSucceeded,
  kMetricsUnavailable,
  kOOM,
  kFailed,
  kTimedOut,
  kUnschedulable,
  kConfigNotApplied
};

// What the user knows of the model; anything missing is measured by a profiling trial.
struct ModelInfo {
  std::optional<std::int64_t> numParameters;
  std::optional<std::int64_t> activationMemoryPerSample;  // bytes at micro-batch 1
  std::optional<std::int64_t> hiddenSize;
  std::optional<std::int64_t> numLayers;
};

// A multi-node trial's rendezvous, in each of its Pods' environment. The placeholders ${NAME}
// of these names become Kubernetes' $(NAME), which each Pod expands with its own values.
inline constexpr std::array<std::string_view, 4> kRendezvousVariables = {
    "AUTOTUNE_NUM_NODES", "AUTOTUNE_NODE_RANK", "AUTOTUNE_MASTER_ADDR", "AUTOTUNE_MASTER_PORT"};
inline constexpr int kMaxNodesPerTrial = 64;
// Sixteen GPUs on each of the most nodes a trial may have. With the most trials a job may run
// (kMaxTrials, which also bounds spec.parallelism), every count of a job's GPUs fits an int.
inline constexpr int kMaxGpusPerTrial = 1024;
inline constexpr int kMaxTrials = 1000;
// Where rank 0 of a multi-node trial listens for the others: torch.distributed's usual port.
inline constexpr int kMasterPort = 29500;

struct Resources {
  int gpusPerTrial = 1;  // over all of a trial's nodes
  int nodesPerTrial = 1;
  std::optional<Quantity> gpuMemory;  // else the node label nvidia.com/gpu.memory
  int modelParallelSize = 1;

  // The GPUs of each of a trial's nodes (validation makes nodesPerTrial divide gpusPerTrial); all
  // of them when nodesPerTrial is not positive.
  int gpusPerNode() const {
    return nodesPerTrial <= 0 ? gpusPerTrial : gpusPerTrial / nodesPerTrial;
  }

  // The data-parallel ranks of a trial, gpusPerTrial ÷ modelParallelSize; nothing where model
  // parallelism does not fit in the trial's GPUs (validation refuses such a spec).
  std::optional<int> dataParallelRanks() const {
    if (modelParallelSize < 1 || gpusPerTrial < modelParallelSize) {
      return std::nullopt;
    }
    return gpusPerTrial / modelParallelSize;
  }
};

struct Search {
  Strategy strategy = Strategy::kDeepSpeed;
  bool fast = true;
  Metric metric = Metric::kThroughput;
  int maxTrials = 50;
  int earlyStopping = 5;
  double plateauThreshold = 0.05;
  int minMicroBatchSize = 1;
  int maxMicroBatchSize = 1024;
  std::optional<int> maxTrainBatchSize;
  int numTuningMicroBatchSizes = 3;
  std::int64_t seed = 0;
};

struct Output {
  std::string configMapName;  // defaults to "<name>-optimal"
  bool retain = false;
};

struct Spec {
  nlohmann::json deepspeedConfig = nlohmann::json::object();
  ModelInfo model;
  Resources resources;
  Search search;
  int parallelism = 1;
  Duration trialTimeout = Duration::parse("1h").value();
  // How long a trial may wait, once on a node, for its container to start: what waiting cannot
  // fix (an image that cannot be pulled, a container that cannot be created).
  Duration schedulingTimeout = Duration::parse("15m").value();
  // How long a trial may stay queued for room (busy GPUs, a quota, an admission gate); unset, as
  // long as it takes.
  std::optional<Duration> queueTimeout;
  int maxFailedTrials = 10;
  std::map<std::string, std::string> argMappings;  // DeepSpeed config key -> command-line flag
  nlohmann::json podTemplate = nlohmann::json::object();  // spec.template, a PodTemplateSpec
  std::string primaryContainer;                           // defaults to the first container
  Output output;
  Cleanup cleanup = Cleanup::kDeleteFinished;
  Reuse reuse = Reuse::kEnabled;
  std::string queueName;
  std::optional<nlohmann::json> afterTuning;  // a batch/v1 Job template
  // The GPU models to tune for, as GPU feature discovery labels nodes (kGpuProductLabel), or
  // kAllGpuModels alone; empty: whatever node the scheduler picks. With one model the job's trials
  // run on its nodes; with more (searchesPerModel), each model's search is an AutotuneJob of its
  // own that the job controls.
  std::vector<std::string> gpuModels;
};

// spec.gpuModels: every model the watched nodes offer, as the job first finds them.
inline constexpr std::string_view kAllGpuModels = "All";
inline constexpr std::size_t kMaxGpuModels = 8;

// Whether the job tunes for several GPU models (or kAllGpuModels): a search per model.
bool searchesPerModel(const Spec& spec);

// A standard metav1.Condition.
struct Condition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;
  std::string message;
  std::string lastTransitionTime;
  std::int64_t observedGeneration = 0;

  bool operator==(const Condition&) const = default;
};

struct TrialCounts {
  int launched = 0;
  int pending = 0;
  int running = 0;
  // Trials waiting for room: their Pods not placed by the scheduler yet or held by a scheduling
  // gate, or not created for lack of GPUs or quota. Of those with Pods, also counted pending.
  int queued = 0;
  // Of the queued, those in a Kueue LocalQueue whose Workloads Kueue has not admitted yet.
  int awaitingAdmission = 0;
  int succeeded = 0;
  int failed = 0;
  int oom = 0;
  int timedOut = 0;
  int pruned = 0;
  // Results taken from earlier measurements: not launched, counted by outcome all the same.
  int reused = 0;

  bool operator==(const TrialCounts&) const = default;
};

struct BestTrial {
  std::string trial;
  Metric metric = Metric::kThroughput;
  double value = 0;
  int zeroStage = 0;
  int microBatchSize = 0;
  int gradientAccumulationSteps = 0;
  std::optional<double> speedup;  // over the baseline trial at the user's own settings
  int nodes = 1;                  // spec.resources.nodesPerTrial: the config is for this many
  int gpus = 1;                   // spec.resources.gpusPerTrial, over all of them
  // The tuned DeepSpeed config (the output's ds_config.json), once the search has succeeded.
  std::optional<nlohmann::json> config;

  bool operator==(const BestTrial&) const = default;
};

// What a profiling trial measured, kept so that no restart profiles twice.
struct MeasuredModel {
  std::int64_t numParameters = 0;
  std::int64_t activationMemoryPerSample = 0;

  bool operator==(const MeasuredModel&) const = default;
};

// One row of DeepSpeed's summary table.
struct SpaceSummary {
  std::string name;
  int trials = 0;
  double bestValue = 0;
  std::string bestTrial;

  bool operator==(const SpaceSummary&) const = default;
};

// One finished trial. The list of these plus the spec is the engine's whole memory.
// A label value may have 63 characters; a result records at most this many of its GPU model (a
// longer one is cut and ends in a hash), so that a thousand results stay within the status budget.
inline constexpr std::size_t kMaxRecordedGpuModel = 40;

struct TrialRecord {
  std::string name;  // canonical name, e.g. z1_gas1_tmbspg3
  std::string space;
  Outcome outcome = Outcome::kSucceeded;
  std::optional<double> value;  // the search metric, when the trial succeeded
  std::string reason;
  std::string startTime;  // RFC 3339
  double durationSeconds = 0;
  // Every metric the trial's metrics file held, by spec.search.metric's names.
  std::map<std::string, double> metrics;
  // The measurement ConfigMap this result was taken from, when the trial did not run for this
  // job: an earlier one measured the same thing.
  std::string reusedFrom;
  // For a success: whether the trial reported the values its engine ran and each agreed with its
  // config (tuning/effective_values.h). False: measured, but what it ran was not checked.
  std::optional<bool> configVerified;
  // The GPU model it ran on, as its node is labelled (kGpuProductLabel), where the operator knows;
  // at most kMaxRecordedGpuModel characters.
  std::string gpuModel;

  bool operator==(const TrialRecord&) const = default;
};

// A trial whose Pod the operator created (or was about to) and whose result is not recorded yet:
// written before the Pod is created, so that a Pod deleted before anyone saw it is known gone.
struct LaunchedTrial {
  std::string name;
  int attempt = 0;
  // Of its earlier attempts, those preempted or drained: they spent none of its relaunches.
  int preemptions = 0;

  bool operator==(const LaunchedTrial&) const = default;
};

// What the job's trials cost, in GPU-hours: running time times the GPUs of a trial.
struct GpuHours {
  double used = 0;   // by the trials this job ran, whatever their outcome
  double saved = 0;  // what the reused results took when they were measured
  std::map<std::string, double> usedByOutcome;

  bool operator==(const GpuHours&) const = default;
};

// One GPU model's search of a job that tunes for several (searchesPerModel).
struct ModelSearch {
  std::string gpuModel;
  std::string job;  // the AutotuneJob that runs it, controlled by this one
  Phase phase = Phase::kPending;
  std::string message;
  std::optional<BestTrial> best;

  bool operator==(const ModelSearch&) const = default;
};

struct Status {
  Phase phase = Phase::kPending;
  std::int64_t observedGeneration = 0;
  std::vector<Condition> conditions;
  std::string startTime;
  std::string completionTime;
  std::string message;
  TrialCounts trials;
  std::vector<LaunchedTrial> inFlight;
  std::optional<BestTrial> best;
  std::optional<MeasuredModel> model;
  std::vector<SpaceSummary> spaces;
  std::vector<TrialRecord> results;
  GpuHours gpuHours;
  std::string afterTuningJob;
  std::vector<ModelSearch> gpuModels;  // of a job that tunes for several

  bool operator==(const Status&) const = default;
};

struct AutotuneJob {
  nlohmann::json metadata = nlohmann::json::object();  // ObjectMeta, kept whole
  Spec spec;
  Status status;

  std::string name() const { return metadata.value("name", ""); }
  std::string namespaceName() const { return metadata.value("namespace", ""); }
  std::string uid() const { return metadata.value("uid", ""); }
};

// Of a job that tunes for several GPU models, the search whose config is its ds_config.json and
// whose best is its best: the first of status.gpuModels that succeeded with a config, or with
// kAllGpuModels the one whose best is best by spec.search.metric; nullptr while none has.
const ModelSearch* primarySearch(const Spec& spec, const Status& status);

// Enum spellings as they appear in the API.
std::string_view toString(Strategy strategy);
std::string_view toString(Metric metric);
std::string_view toString(Cleanup cleanup);
std::string_view toString(Reuse reuse);
std::string_view toString(Phase phase);
std::string_view toString(Outcome outcome);
std::optional<Strategy> parseStrategy(std::string_view text);
std::optional<Metric> parseMetric(std::string_view text);
std::optional<Cleanup> parseCleanup(std::string_view text);
std::optional<Reuse> parseReuse(std::string_view text);
std::optional<Phase> parsePhase(std::string_view text);
std::optional<Outcome> parseOutcome(std::string_view text);

// Whether larger values of the metric are better (throughput, flops) or smaller (latency).
inline bool higherIsBetter(Metric metric) { return metric != Metric::kLatency; }

}  // namespace autotune::api
