#pragma once
// A job that tunes for several GPU models (api::searchesPerModel) runs each model's search as an
// AutotuneJob of its own: the job's spec for that model alone, named after the job and the model,
// and controlled by the job, so that it goes when the job goes. Each search is then an ordinary
// job of one model: its trials on that model's nodes, its memory model fed that model's GPU
// memory, its own results, reuse and best. The job gathers their phases and bests into
// status.gpuModels and, once every search has ended, writes one output ConfigMap with each
// model's tuned config. Pure, as observe.h and plan.h are.

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "controller/decision/observe.h"
#include "controller/decision/plan.h"
#include "controller/objects/cluster_view.h"
#include "controller/objects/objects.h"

namespace autotune::controller {

// One model's search as the cache holds it under its name.
struct ModelSearchJob {
  std::string gpuModel;
  std::string name;
  Shared<CachedAutotuneJob> job;  // the AutotuneJob of that name, whoever's; null: none
};

struct ModelsSnapshot {
  Timestamp now;
  std::int64_t generation = 0;
  api::AutotuneJob job;
  // For spec.gpuModels [All] before the models are recorded: those of the schedulable nodes
  // watched that could hold a trial.
  std::set<std::string> offered;
  std::vector<ModelSearchJob> searches;  // empty until the models are known
};

// The names of the AutotuneJobs that search `models` for the job `jobName`: the job's name and
// the model's in DNS form (train-nvidia-h100-80gb-hbm3), with a hash of the model where two would
// meet, at most 253 characters.
std::vector<std::string> modelSearchNames(std::string_view jobName,
                                          const std::vector<std::string>& models);

ModelsSnapshot observeModels(const ClusterView& cluster, const CachedAutotuneJob& job,
                             Timestamp now);

// The AutotuneJob of one model's search: the job's spec with spec.gpuModels that model alone, its
// own output ConfigMap (always deleted with it) and no afterTuning.
nlohmann::json modelSearchJob(const api::AutotuneJob& job, const std::string& gpuModel,
                              const std::string& name);

// The plan of a job that tunes for several GPU models: its status, the searches to create
// (Plan::searches) and, once all have ended, its output, knowing what applying an earlier plan of
// this reconcile taught.
Plan planModels(const ModelsSnapshot& snapshot, const Learned& learned = {});

}  // namespace autotune::controller
