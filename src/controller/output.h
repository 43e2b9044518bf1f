#pragma once
// The output ConfigMap of a search that found its best: what the user's training job mounts, in
// the shape of DeepSpeed's autotuning results directory.
//   ds_config.json  the best config, indented unless that would pass 128 KiB
//   cmd.txt         the command that runs it
//   summary.txt     DeepSpeed's summary table
//   results.json    every finished trial as status.results records it, one per line, each with
//                   configPatch: the RFC 7386 merge patch that turns ds_config.json into the
//                   config the trial ran (so the best trial's is {})
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
