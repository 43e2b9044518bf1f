#pragma once
// Test support for the report tests: searches as their results files hold them.

#include <cmath>
#include <string>
#include <vector>

#include "api/job.h"
#include "report/search_results.h"
#include "support/published_oracle.h"

namespace autotune::report::fixtures {

inline SearchResults resultsOf(const std::vector<api::TrialRecord>& records,
                               std::string jobName = "") {
  SearchResults results;
  results.jobName = std::move(jobName);
  for (const auto& record : records) {
    results.trials.push_back({record, ""});
  }
  return results;
}

inline api::AutotuneJob jobOf(api::Spec spec, const std::string& name) {
  api::AutotuneJob job;
  job.metadata = {{"name", name}};
  job.spec = std::move(spec);
  return job;
}

inline api::TrialRecord record(std::string name, api::Outcome outcome,
                               std::optional<double> value = std::nullopt) {
  api::TrialRecord record;
  // A trial's space is its name's stage (z1); the profiling trial is a space of its own.
  record.space = name == "profile_model_info" ? name : name.substr(0, name.find('_'));
  record.name = std::move(name);
  record.outcome = outcome;
  record.value = value;
  if (value) {
    record.metrics["throughput"] = *value;
  }
  record.startTime = "2026-01-01T00:00:00Z";
  record.durationSeconds = 60;
  return record;
}

// Ten stages of a hundred trials each, one a minute: a curve rising to an optimum below each
// stage's OOM boundary, every 37th trial failed and every 41st timed out.
inline std::vector<api::TrialRecord> thousandTrials() {
  std::vector<api::TrialRecord> records;
  for (int stage = 0; stage < 10; ++stage) {
    const int boundary = 20 + 3 * stage;
    for (int k = 0; k < 100; ++k) {
      const int microBatch = 1 + k % 50;
      const int accumulation = 1 + k / 50;
      const std::string name = "z" + std::to_string(stage) + "_gas" + std::to_string(accumulation) +
                               "_tmbspg" + std::to_string(microBatch);
      api::TrialRecord trial;
      if (microBatch > boundary) {
        trial = record(name, api::Outcome::kOOM);
      } else if (k % 37 == 5) {
        trial = record(name, api::Outcome::kFailed);
      } else if (k % 41 == 7) {
        trial = record(name, api::Outcome::kTimedOut);
      } else {
        const double share = static_cast<double>(microBatch) / boundary;
        trial = record(name, api::Outcome::kSucceeded,
                       (50 + 5 * stage) * std::sqrt(share) * (1 - 0.3 * std::pow(share, 4)));
      }
      const int minute = static_cast<int>(records.size());
      trial.startTime = "2026-01-01T" + std::string(minute / 60 < 10 ? "0" : "") +
                        std::to_string(minute / 60) + ":" + (minute % 60 < 10 ? "0" : "") +
                        std::to_string(minute % 60) + ":00Z";
      records.push_back(trial);
    }
  }
  return records;
}

// A search run to its end as the example runs it, two trials at a time.
inline oracle::SearchRun searchOf(const api::Spec& spec, const oracle::Oracle& outcomes) {
  oracle::DriveOptions options;
  options.slots = 2;
  return oracle::drive(spec, outcomes, options);
}

}  // namespace autotune::report::fixtures
