#pragma once
// The output ConfigMap of a search that found its best: what the user's training job mounts, in
// the shape of DeepSpeed's autotuning results directory, from tuning::Report:
//   ds_config.json  the best config
//   cmd.txt         the command that runs it
//   summary.txt     DeepSpeed's summary table
//   results.json    every finished trial, one record per line, with its metrics and configPatch
// At 1,000 trials with the longest reasons it stays well within a ConfigMap's 1 MiB.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::controller {

// Names the job an output ConfigMap was written for, also when spec.output.retain leaves it
// without an owner reference.
inline constexpr std::string_view kJobUidAnnotation = "autotune.io/job-uid";

// The ConfigMap to apply for `job`, whose status holds the finished trials; `trials` are the
// configs the search considered (looked up by name), `best` among them.
nlohmann::json outputConfigMap(const api::AutotuneJob& job, const tuning::Trial& best,
                               const std::vector<tuning::Trial>& trials, double elapsedSeconds);

// The output of a job that tunes for several GPU models, from its status.gpuModels: each model's
// tuned config whose search succeeded (api::modelConfigFile), and as ds_config.json the one of
// `primaryModel`.
nlohmann::json modelsOutputConfigMap(const api::AutotuneJob& job, const std::string& primaryModel);

// Whether an existing ConfigMap is the output of the job with `jobUid`: written for it, or
// controlled by it. Only then may the job write over it.
bool isOutputOf(const nlohmann::json& configMap, const std::string& jobUid);

// Whose a ConfigMap is, for a user told it is not the job's: "written for the AutotuneJob with
// UID …", "controlled by Deployment web", or "made by none of the operator's jobs".
std::string holderOf(const nlohmann::json& configMap);

}  // namespace autotune::controller
