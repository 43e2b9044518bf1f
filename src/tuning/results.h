#pragma once
// What a search produced, in the forms users read: DeepSpeed's summary table, the best trial,
// the optimal config and the command that runs it.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::tuning {

// A metric value as the summary and the logs print it (six significant digits).
std::string formatMetricValue(double value);

// One row per tuning space, in the order spaces first appear; trials that did not succeed count
// as trials with no value. The profiling trial is not a space.
std::vector<api::SpaceSummary> summarizeSpaces(const std::vector<api::TrialRecord>& finished,
                                               api::Metric metric);

// DeepSpeed's summary.txt: a pipe table of the spaces plus a global row, then the totals line.
std::string summaryTable(const std::vector<api::SpaceSummary>& spaces, api::Metric metric,
                         double elapsedSeconds);

// The first trial that succeeded, in launch order: the baseline at the user's own settings.
std::optional<double> baselineValue(const std::vector<api::TrialRecord>& finished);

// GPU-hours of the records: each one's running time times `gpusPerTrial`, as used by outcome when
// the trial ran, as saved when its result was reused (TrialRecord::reusedFrom).
api::GpuHours gpuHoursOf(const std::vector<api::TrialRecord>& finished, int gpusPerTrial);

// The GPU-hours as one line for people: "GPU-hours: 0.425 used (Succeeded 0.3, OOM 0.125), 1.2
// saved by reused results", outcomes in the order of api::Outcome. Figures have three significant
// digits, whole numbers from 100, and "<0.001" below that.
std::string gpuHoursLine(const api::GpuHours& hours);

// The best trial, for the resources it ran on (its config is for that many GPUs and nodes).
api::BestTrial bestTrial(const Trial& trial, double value, api::Metric metric,
                         std::optional<double> baseline, const api::Resources& resources);

// The best trial's DeepSpeed config as the real training job should use it: without the
// autotuning section, and without train_batch_size unless `spec` gives one (a number or "auto"),
// so that DeepSpeed derives it from the micro-batch, the accumulation and the GPUs the training
// job runs on.
nlohmann::json optimalConfig(const Trial& best, const api::Spec& spec);

// A config as its file holds it: indented, unless that would pass 128 KiB.
std::string configFile(const nlohmann::json& config);

// An RFC 7386 JSON merge patch that turns `from` into `to`: only the keys that differ, objects
// patched key by key, a key `to` lacks as null. (A null value in `to` reads as a deletion too, as
// merge patches cannot tell the two apart.)
nlohmann::json mergePatch(const nlohmann::json& from, const nlohmann::json& to);

// What a search that found its best reports, as files: the output ConfigMap and a local run's
// results directory both hold them.
struct Report {
  std::string config;  // the best trial's config, indented unless that would pass 128 KiB
  // The command that runs it, reading the config at the given path; for a multi-node trial, a
  // comment line on how to run it on each node, then the command that reads the rendezvous from
  // the node's environment.
  std::string command;
  std::string summary;  // DeepSpeed's summary table
  // Every finished trial, one compact record per line: its status.results entry plus
  // configPatch, the merge patch that turns `config` into the config it ran ({} for the best).
  std::string results;
};

// `finished` in launch order; `trials` are the configs the search considered (looked up by name),
// `best` among them.
Report report(const api::Spec& spec, std::string_view jobName,
              const std::vector<api::TrialRecord>& finished, const Trial& best,
              const std::vector<Trial>& trials, double elapsedSeconds,
              const std::string& configPath);

}  // namespace autotune::tuning
