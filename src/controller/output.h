#pragma once
// The output ConfigMap of a search that found its best: what the user's training job mounts, in
// the shape of DeepSpeed's autotuning results directory, from tuning::Report:
//   ds_config.json  the best config
//   cmd.txt         the command that runs it
//   summary.txt     DeepSpeed's summary table
//   results.json    every finished trial, one record per line, with its metrics and configPatch
// At 1,000 trials with the longest reasons it stays well within a ConfigMap's 1 MiB.

#include <nlohmann/json.hpp>
#include <vector>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::controller {

// The ConfigMap to apply for `job`, whose status holds the finished trials; `trials` are the
// configs the search considered (looked up by name), `best` among them.
nlohmann::json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                               const std::vector<tuning::Trial>& trials, double elapsedSeconds);

}  // namespace autotune::controller
