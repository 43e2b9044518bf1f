// The output ConfigMap and the status at the largest search the API allows: 1,000 trials that
// the engine launches for a real knob grid, every one ending with the longest reason a trial can
// leave. The status stays under 512 KiB and the ConfigMap's data under its 1 MiB limit.

#include "controller/objects/output.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/codec.h"
#include "tuning/engine.h"
#include "tuning/naming.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

constexpr std::size_t kConfigMapLimit = 1024 * 1024;
constexpr std::size_t kStatusBudget = 512 * 1024;
constexpr int kTrials = 1000;

// A Hugging Face ZeRO-2 template with four ZeRO knobs to grid-search: 1,920 combinations.
api::AutotuneJob gridJob() {
  const json document = json::parse(R"({
    "apiVersion": "autotune.io/v1alpha1", "kind": "AutotuneJob",
    "metadata": {"name": "llama-7b-zero2-grid-search", "namespace": "ml-platform", "uid": "u-1"},
    "spec": {
      "deepspeedConfig": {
        "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
                 "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": "auto",
                      "warmup_max_lr": "auto", "warmup_num_steps": "auto"}},
        "zero_optimization": {
          "stage": [1, 2],
          "offload_optimizer": {"device": "none", "pin_memory": true},
          "allgather_partitions": true,
          "allgather_bucket_size": [50000000, 100000000, 200000000, 500000000],
          "overlap_comm": [true, false],
          "reduce_scatter": true,
          "reduce_bucket_size": [50000000, 100000000, 200000000, 500000000, 1000000000],
          "contiguous_gradients": [true, false]
        },
        "gradient_accumulation_steps": [1, 2, 4],
        "gradient_clipping": "auto",
        "steps_per_print": 2000,
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": [1, 2, 4, 8],
        "wall_clock_breakdown": false
      },
      "model": {"numParameters": 100000000},
      "resources": {"gpusPerTrial": 8, "gpuMemory": "80Gi"},
      "search": {"strategy": "grid", "maxTrials": 1000, "earlyStopping": 0},
      "maxFailedTrials": 1000,
      "template": {"spec": {"containers": [{"name": "trainer", "image": "train:1",
                   "command": ["deepspeed", "train.py", "--deepspeed", "/etc/autotune/ds_config.json"]}]}}
    }})");
  return api::decodeJob(document).value();
}

// The longest reason a trial can leave: 256 bytes as JSON, a log tail of Python's quoted paths.
std::string longestReason() {
  std::string log;
  for (int line = 0; line < 100; ++line) {
    log += "  File \"/usr/lib/python3/dist-packages/torch/distributed.py\", line 42\n";
  }
  return tuning::boundedReason(log);
}

struct LaunchedTrials {
  api::AutotuneJob job;
  std::vector<tuning::Trial> trials;
  tuning::Trial best;
};

// The first 1,000 trials of the grid as the engine launches them, each recorded as long as a
// record can be: the longest outcome, a reason of the longest kind, times with milliseconds.
LaunchedTrials thousandTrials() {
  LaunchedTrials search{gridJob(), {}, {}};
  tuning::EngineInput input;
  input.spec = search.job.spec;
  input.jobUid = "u-1";
  input.freeSlots = kTrials;
  search.trials = tuning::decide(input).launch;
  search.best = search.trials.front();
  for (const tuning::Trial& trial : search.trials) {
    api::TrialRecord record;
    record.name = trial.name;
    record.space = trial.space;
    record.outcome = api::Outcome::kMetricsUnavailable;
    record.reason = longestReason();
    record.startTime = "2026-11-24T10:11:12.345Z";
    record.durationSeconds = 1234.5678901234;
    record.gpuModel = tuning::boundedName(std::string(63, 'G'), api::kMaxRecordedGpuModel);
    search.job.status.results.push_back(std::move(record));
  }
  search.job.status.spaces =
      tuning::summarizeSpaces(search.job.status.results, api::Metric::kThroughput);
  // The best, with the tuned config it records once the search has succeeded.
  api::BestTrial best;
  best.trial = search.best.name;
  best.config = tuning::optimalConfig(search.best, search.job.spec);
  search.job.status.best = std::move(best);
  return search;
}

std::size_t dataBytes(const json& configMap) {
  std::size_t bytes = 0;
  for (const auto& [key, value] : configMap["data"].items()) {
    bytes += key.size() + value.get_ref<const std::string&>().size();
  }
  return bytes;
}

TEST(OutputAtTheTrialLimit, StatusStaysUnder512KiBAndTheConfigMapUnder1MiB) {
  const LaunchedTrials search = thousandTrials();
  ASSERT_EQ(search.job.status.results.size(), static_cast<std::size_t>(kTrials));
  EXPECT_EQ(json(longestReason()).dump().size(), 256U + 2);  // with its quotes

  const std::size_t statusBytes = api::encode(search.job.status).dump().size();
  EXPECT_LT(statusBytes, kStatusBudget) << statusBytes << " bytes";

  const json configMap = outputConfigMap(search.job, search.best, search.trials, 3600);
  const std::size_t bytes = dataBytes(configMap);
  EXPECT_LT(bytes, kConfigMapLimit) << bytes << " bytes";
  RecordProperty("status_bytes", std::to_string(statusBytes));
  RecordProperty("configmap_bytes", std::to_string(bytes));
}

TEST(OutputResults, EachTrialsConfigIsDsConfigWithItsPatch) {
  const LaunchedTrials search = thousandTrials();
  const json configMap = outputConfigMap(search.job, search.best, search.trials, 3600);
  const json optimal = json::parse(configMap["data"]["ds_config.json"].get<std::string>());
  const json results = json::parse(configMap["data"]["results.json"].get<std::string>());
  ASSERT_EQ(results.size(), static_cast<std::size_t>(kTrials));
  for (std::size_t i = 0; i < results.size(); ++i) {
    const tuning::Trial& trial = search.trials[i];
    ASSERT_EQ(results[i]["name"], trial.name);
    json config = optimal;
    config.merge_patch(results[i]["configPatch"]);
    EXPECT_EQ(config, tuning::optimalConfig(trial, search.job.spec)) << trial.name;
  }
  EXPECT_EQ(optimal, tuning::optimalConfig(search.best, search.job.spec));
}

TEST(OutputResults, EachRecordCarriesAllItsTrialsMetrics) {
  LaunchedTrials search = thousandTrials();
  api::TrialRecord& measured = search.job.status.results.front();
  measured.outcome = api::Outcome::kSucceeded;
  measured.reason.clear();
  measured.value = 87.3;
  measured.metrics = {{"throughput", 87.3}, {"latency", 5865000.0}, {"flops", 1.2e13}};
  const json results = json::parse(
      outputConfigMap(search.job, search.best, search.trials, 3600)["data"]["results.json"]
          .get<std::string>());
  EXPECT_EQ(results[0]["metrics"],
            json({{"throughput", 87.3}, {"latency", 5865000.0}, {"flops", 1.2e13}}));
  EXPECT_FALSE(results[1].contains("metrics"));
}

TEST(OutputResults, OneCompactRecordALine) {
  const LaunchedTrials search = thousandTrials();
  const std::string text =
      outputConfigMap(search.job, search.best, search.trials, 3600)["data"]["results.json"];
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), kTrials + 2);
}

}  // namespace
}  // namespace autotune::controller
