#pragma once
// A search's results as the report reads them, from whichever file holds them:
//   - a results directory of `autotune run`: results.json, and beside it summary.txt,
//     ds_config_optimal.json, cmd_optimal.txt and exps/<trial>.json (the GPUs each trial held);
//   - a results.json alone: a local run's ({"job": ..., "trials": [...]}) or the output
//     ConfigMap's (a list of records, each with its configPatch);
//   - the output ConfigMap itself, as `kubectl get configmap NAME -o json` (or -o yaml) prints it.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "api/job.h"

namespace autotune::report {

struct FinishedTrial {
  api::TrialRecord record;
  std::string gpus;  // the devices it held ("0-15"), where the source says
};

struct SearchResults {
  std::string jobName;                      // empty where the source does not name it
  std::vector<FinishedTrial> trials;        // in launch order
  std::optional<api::MeasuredModel> model;  // what a profiling trial measured
  std::optional<std::string> summary;       // DeepSpeed's summary.txt
  std::optional<std::string> bestConfig;    // ds_config.json of the best trial
  std::optional<std::string> command;       // cmd.txt: the command that runs it
};

// The records of a results.json (either shape) or of a ConfigMap. Errors name `source` and the
// field: "autotune_results/results.json: trials[2].outcome: must be one of ...".
tl::expected<SearchResults, std::string> parseResults(std::string_view text,
                                                      const std::string& source);

// A results directory, or one of the files above; a results.json of a local run also brings the
// files beside it.
tl::expected<SearchResults, std::string> loadResults(const std::filesystem::path& path);

// How many devices a list such as "0-15" or "0,1,8-11" names; 0 when it names none.
int countGpus(std::string_view devices);

}  // namespace autotune::report
