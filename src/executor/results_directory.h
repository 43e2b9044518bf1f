#pragma once
// A local run's results directory, in DeepSpeed's layout plus results.json:
//   exps/<trial>.json                 what each trial is (name, config, command, GPUs)
//   results/<trial>/ds_config.json    the config it ran with
//   results/<trial>/cmd.txt           the command it ran
//   results/<trial>/metrics.json      what it measured
//   results/<trial>/stdout.log, stderr.log
//   results.json                      every finished trial and their GPU-hours (the shape of
//                                     status.gpuHours); the run's whole memory
//   summary.txt, ds_config_optimal.json, cmd_optimal.txt   once the search is over
//   report.html                       the search drawn (report/report.h), once it is over
// results.json is rewritten atomically after each trial, before anything else happens, so a run
// killed at any moment resumes without running a finished trial again.

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "api/job.h"
#include "tuning/protocol.h"
#include "tuning/results.h"
#include "tuning/space.h"

namespace autotune::executor {

// The files of one trial.
struct TrialPaths {
  tuning::TrialFiles protocol;  // config and metrics paths
  std::filesystem::path directory;
  std::filesystem::path stdoutLog;
  std::filesystem::path stderrLog;
};

class ResultsDirectory {
 public:
  // Opens (creating it if needed) and locks the directory for this job. Fails, changing nothing,
  // when it cannot be written, when another run holds it, or when it holds another job's results.
  static tl::expected<ResultsDirectory, std::string> open(const std::filesystem::path& root,
                                                          const api::AutotuneJob& job);

  ResultsDirectory(ResultsDirectory&& other) noexcept;
  ResultsDirectory& operator=(ResultsDirectory&&) = delete;
  ResultsDirectory(const ResultsDirectory&) = delete;
  ResultsDirectory& operator=(const ResultsDirectory&) = delete;
  ~ResultsDirectory();

  const std::vector<api::TrialRecord>& records() const { return records_; }
  const std::optional<api::MeasuredModel>& measured() const { return measured_; }
  const std::filesystem::path& root() const { return root_; }

  // Where the trial's files go (absolute paths, as the trial runs in another directory).
  TrialPaths pathsFor(const tuning::Trial& trial) const;

  // Clears what an interrupted attempt of the trial left and writes its config, command and
  // experiment description.
  tl::expected<void, std::string> prepareTrial(const tuning::Trial& trial,
                                               const nlohmann::json& launchConfig,
                                               const std::vector<std::string>& command,
                                               const std::string& gpus) const;

  // Adds a finished trial and makes it durable. `launchIndex` keeps results.json in launch order.
  tl::expected<void, std::string> record(const api::TrialRecord& record, int launchIndex,
                                         const std::optional<api::MeasuredModel>& measured);

  int nextLaunchIndex() const { return nextLaunchIndex_; }

  // What the finished trials took: running time times spec.resources.gpusPerTrial.
  api::GpuHours gpuHours() const { return tuning::gpuHoursOf(records_, gpusPerTrial_); }

  // summary.txt (the report's summary, then the GPU-hours line), ds_config_optimal.json and
  // cmd_optimal.txt.
  tl::expected<void, std::string> writeOutcome(const tuning::Report& report);
  // summary.txt of a search that failed (its table and why, then the GPU-hours line); no optimal
  // config.
  tl::expected<void, std::string> writeFailure(const std::string& summary);

  std::filesystem::path optimalConfigPath() const { return root_ / "ds_config_optimal.json"; }

 private:
  ResultsDirectory(std::filesystem::path root, int lockFd, std::string jobName,
                   std::string specHash, int gpusPerTrial)
      : root_(std::move(root)),
        lockFd_(lockFd),
        jobName_(std::move(jobName)),
        specHash_(std::move(specHash)),
        gpusPerTrial_(gpusPerTrial) {}

  tl::expected<void, std::string> load();
  tl::expected<void, std::string> save() const;

  std::filesystem::path root_;
  int lockFd_;
  std::string jobName_;
  std::string specHash_;
  int gpusPerTrial_;
  std::vector<api::TrialRecord> records_;
  std::vector<int> launchIndexes_;  // parallel to records_
  std::optional<api::MeasuredModel> measured_;
  int nextLaunchIndex_ = 0;
};

// The part of a job's spec that decides what its trials are: everything except the fields a
// user may change between runs (parallelism, trial and failure limits, timeouts).
std::string specIdentity(const api::Spec& spec);

// Writes a file through a temporary file and a rename, so readers see the old or the new whole.
tl::expected<void, std::string> writeFileAtomically(const std::filesystem::path& path,
                                                    const std::string& content);

}  // namespace autotune::executor
