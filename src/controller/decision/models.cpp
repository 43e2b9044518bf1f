#include "controller/decision/models.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <map>
#include <utility>

#include "api/codec.h"
#include "api/labels.h"
#include "api/text.h"
#include "controller/objects/conditions.h"
#include "controller/objects/output.h"
#include "controller/objects/trial_pod.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

// How often a job of every model (api::kAllGpuModels) looks again for nodes when none offers one:
// no event of a Node concerns a job without trials.
constexpr auto kOfferedRecheck = std::chrono::seconds(30);
constexpr std::size_t kMaxObjectName = 253;
constexpr std::size_t kModelHashDigits = 8;

// A GPU model in a name's alphabet: NVIDIA-A100-SXM4-40GB -> nvidia-a100-sxm4-40gb.
std::string dnsFormOf(std::string_view model) {
  std::string form;
  for (const char c : model) {
    const bool kept = std::isalnum(static_cast<unsigned char>(c)) != 0;
    if (kept) {
      form += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!form.empty() && form.back() != '-') {
      form += '-';
    }
  }
  while (!form.empty() && form.back() == '-') {
    form.pop_back();
  }
  return form;
}

// The models the job searches: as recorded once known, else spec.gpuModels, or for All those the
// nodes offer now (at most api::kMaxGpuModels, by name).
std::vector<std::string> modelsOf(const api::AutotuneJob& job,
                                  const std::set<std::string>& offered) {
  std::vector<std::string> models;
  if (!job.status.gpuModels.empty()) {
    for (const auto& search : job.status.gpuModels) {
      models.push_back(search.gpuModel);
    }
  } else if (job.spec.gpuModels.front() == api::kAllGpuModels) {
    models.assign(offered.begin(), offered.end());
    models.resize(std::min(models.size(), api::kMaxGpuModels));
  } else {
    models = job.spec.gpuModels;
  }
  return models;
}

// The products of the schedulable nodes watched that could hold one of the trial's ranks.
std::set<std::string> offeredModels(const GpuCapacity& capacity, const api::Resources& trial) {
  std::set<std::string> offered;
  for (const auto& node : capacity.nodes) {
    if (!node.product.empty() && holdsARank(node, trial)) {
      offered.insert(node.product);
    }
  }
  return offered;
}

// What decides what a search measures and writes: its spec less the limits the job's owner may
// change later (the CRD leaves them mutable), which reach no search once it is made.
nlohmann::json decisiveSpec(const api::Spec& spec) {
  nlohmann::json decisive = api::encode(spec);
  for (const auto* limit : {"parallelism", "maxFailedTrials", "trialTimeout", "schedulingTimeout",
                            "queueTimeout", "reuse"}) {
    decisive.erase(limit);
  }
  decisive["search"].erase("maxTrials");
  return decisive;
}

// Whether `found` is the job's search of its model: the job controls it, and it has the spec the
// job gives that search. An owner reference is its writer's to set, so anyone who may create
// AutotuneJobs here could name the job as controller of a search of their own making.
bool isSearchOf(const api::AutotuneJob& job, const ModelSearchJob& search,
                const CachedAutotuneJob& found) {
  if (job.uid().empty() || found.ownerJobUid != job.uid() || !found.decoded) {
    return false;
  }
  const auto expected = api::decode(modelSearchJob(job, search.gpuModel, search.name));
  return expected && decisiveSpec(found.decoded->job.spec) == decisiveSpec(expected->job.spec);
}

// Whether each search's AutotuneJob is the job's (isSearchOf), in the snapshot's order: asked once
// per reconcile, since each answer decodes a spec.
std::vector<bool> oursOf(const ModelsSnapshot& snapshot) {
  std::vector<bool> ours;
  ours.reserve(snapshot.searches.size());
  for (const auto& search : snapshot.searches) {
    ours.push_back(search.job && isSearchOf(snapshot.job, search, *search.job));
  }
  return ours;
}

const RefusedCreate* refusedCreateOf(const Learned& learned, const std::string& name) {
  const auto found = std::ranges::find(learned.refusedCreates, name, &RefusedCreate::trial);
  return found == learned.refusedCreates.end() ? nullptr : &*found;
}

// A model's search that has no AutotuneJob: what it found stays once it ended (its AutotuneJob
// deleted since); else it is created, unless the API server refused it.
void createOrKeep(const ModelsSnapshot& snapshot, const Learned& learned,
                  const ModelSearchJob& search, api::ModelSearch& entry, Plan& plan) {
  if (api::hasEnded(entry.phase)) {
    return;
  }
  const std::string subject = "AutotuneJob " + search.name + " of GPU model " + search.gpuModel;
  if (const RefusedCreate* refused = refusedCreateOf(learned, search.name)) {
    const bool forGood = refused->refusal == Refusal::kForGood;
    entry.phase = forGood ? api::Phase::kFailed : api::Phase::kPending;
    entry.message = subject + (forGood ? " was refused: " : " is not created yet: ") +
                    api::headOf(refused->message, kEventMessageBytes);
    plan.retry = plan.retry || !forGood;
    return;
  }
  plan.searches.push_back(modelSearchJob(snapshot.job, search.gpuModel, search.name));
  entry.phase = api::Phase::kPending;
  entry.message.clear();
}

// The entry of status.gpuModels for one model's search, from its AutotuneJob as the cache holds
// it. Only its controller reference and its spec make it the job's (isSearchOf): a job of that
// name that anyone else made is neither read nor adopted.
api::ModelSearch entryOf(const ModelsSnapshot& snapshot, const Learned& learned,
                         const ModelSearchJob& search, bool ours, Plan& plan) {
  const auto& recorded = snapshot.job.status.gpuModels;
  const auto found = std::ranges::find(recorded, search.gpuModel, &api::ModelSearch::gpuModel);
  api::ModelSearch entry = found != recorded.end() ? *found : api::ModelSearch{};
  entry.gpuModel = search.gpuModel;
  entry.job = search.name;
  if (!search.job) {
    createOrKeep(snapshot, learned, search, entry, plan);
  } else if (!ours) {
    if (!api::hasEnded(entry.phase)) {
      entry.phase = api::Phase::kFailed;
      entry.message = "AutotuneJob " + search.name +
                      " exists and is not this job's (another controller, or a spec this job "
                      "does not give it): it is neither read nor adopted; delete it and create "
                      "this job again to search GPU model " +
                      search.gpuModel;
      entry.best.reset();
    }
  } else {
    entry.phase = search.job->status.phase;
    entry.message = api::headOf(search.job->status.message, kEventMessageBytes);
    entry.best = search.job->status.best;
  }
  return entry;
}

bool succeeded(const api::ModelSearch& search) {
  return search.phase == api::Phase::kSucceeded && search.best && search.best->config;
}

// "NVIDIA-A100-SXM4-40GB Running; NVIDIA-H100-80GB-HBM3 Succeeded", with each message when
// `withMessages`.
std::string progressOf(const std::vector<api::ModelSearch>& searches, bool withMessages) {
  std::string text;
  for (const auto& search : searches) {
    text += (text.empty() ? "" : "; ") + search.gpuModel + " " +
            std::string(api::toString(search.phase));
    if (withMessages && !search.message.empty()) {
      text += ": " + search.message;
    }
  }
  return api::headOf(text, kConditionMessageBytes);
}

constexpr std::array kCounts{&api::TrialCounts::launched,
                             &api::TrialCounts::pending,
                             &api::TrialCounts::running,
                             &api::TrialCounts::queued,
                             &api::TrialCounts::awaitingAdmission,
                             &api::TrialCounts::succeeded,
                             &api::TrialCounts::failed,
                             &api::TrialCounts::oom,
                             &api::TrialCounts::timedOut,
                             &api::TrialCounts::pruned,
                             &api::TrialCounts::reused};

// The trials and GPU-hours of the job's searches (`ours`), as their AutotuneJobs hold them.
void addUp(const ModelsSnapshot& snapshot, const std::vector<bool>& ours, api::Status& status) {
  api::TrialCounts trials;
  api::GpuHours hours;
  for (std::size_t index = 0; index < snapshot.searches.size(); ++index) {
    if (!ours[index]) {
      continue;
    }
    const api::Status& theirs = snapshot.searches[index].job->status;
    for (const auto count : kCounts) {
      trials.*count += theirs.trials.*count;
    }
    hours.used += theirs.gpuHours.used;
    hours.saved += theirs.gpuHours.saved;
    for (const auto& [outcome, used] : theirs.gpuHours.usedByOutcome) {
      hours.usedByOutcome[outcome] += used;
    }
  }
  status.trials = trials;
  status.gpuHours = hours;
}

void setConditionNow(const ModelsSnapshot& snapshot, api::Status& status, std::string_view type,
                     bool value, std::string_view reason, const std::string& message) {
  setCondition(status, type, value, reason, message, snapshot.now, snapshot.generation);
}

void end(const ModelsSnapshot& snapshot, Plan& plan, bool success, const std::string& message) {
  api::Status& status = plan.status;
  status.phase = success ? api::Phase::kSucceeded : api::Phase::kFailed;
  status.completionTime = formatTime(snapshot.now);
  status.message = message;
  setConditionNow(snapshot, status, condition::kRunning, false, success ? "Completed" : "Failed",
                  message);
  setConditionNow(snapshot, status, success ? condition::kComplete : condition::kFailed, true,
                  success ? "SearchCompleted" : "SearchFailed", message);
}

// Every search has ended: the output, once at least one succeeded, and the final phase.
void endModels(const ModelsSnapshot& snapshot, const Learned& learned,
               const api::AutotuneJob& recorded, const api::ModelSearch* primary, Plan& plan) {
  api::Status& status = plan.status;
  if (primary == nullptr) {
    const std::string message =
        "no GPU model's search succeeded: " + progressOf(status.gpuModels, true);
    end(snapshot, plan, false, message);
    plan.events.push_back(searchFailed(message));
    return;
  }
  const std::string& configMap = snapshot.job.spec.output.configMapName;
  if (learned.outputRefused) {
    awaitOutput(plan, *learned.outputRefused, configMap, snapshot.now, snapshot.generation);
    return;
  }
  plan.output = modelsOutputConfigMap(recorded, primary->gpuModel);
  setConditionNow(snapshot, status, condition::kOutputWritten, true, "Written",
                  "ConfigMap " + configMap);
  const auto tuned = std::ranges::count_if(status.gpuModels, succeeded);
  std::string message = "tuned for " + std::to_string(tuned) + " of " +
                        std::to_string(status.gpuModels.size()) +
                        " GPU models; ds_config.json is " + primary->gpuModel + "'s";
  if (static_cast<std::size_t>(tuned) < status.gpuModels.size()) {
    message += " (" + progressOf(status.gpuModels, true) + ")";
  }
  end(snapshot, plan, true, api::headOf(message, kConditionMessageBytes));
  plan.events.push_back(searchCompleted(*status.best, status.message, configMap));
}

// The best so far is the primary model's; the job runs until every model's search has ended.
void endOrGoOn(const ModelsSnapshot& snapshot, const Learned& learned, Plan& plan) {
  api::Status& status = plan.status;
  api::AutotuneJob recorded = snapshot.job;
  recorded.status = status;
  const api::ModelSearch* primary = api::primarySearch(recorded.spec, recorded.status);
  status.best = primary != nullptr ? primary->best : std::nullopt;
  if (std::ranges::all_of(status.gpuModels,
                          [](const auto& search) { return api::hasEnded(search.phase); })) {
    endModels(snapshot, learned, recorded, primary, plan);
    return;
  }
  status.phase = api::Phase::kRunning;
  status.message = "searching " + std::to_string(status.gpuModels.size()) +
                   " GPU models: " + progressOf(status.gpuModels, false);
  setConditionNow(snapshot, status, condition::kRunning, true, "SearchingPerModel", status.message);
}

}  // namespace

std::vector<std::string> modelSearchNames(std::string_view jobName,
                                          const std::vector<std::string>& models) {
  std::map<std::string, int> forms;
  for (const auto& model : models) {
    ++forms[dnsFormOf(model)];
  }
  std::vector<std::string> names;
  for (const auto& model : models) {
    std::string form = dnsFormOf(model);
    if (form.empty() || forms[form] > 1) {
      form += (form.empty() ? "" : "-") + tuning::fnv1aHex(model).substr(0, kModelHashDigits);
    }
    names.push_back(tuning::boundedName(std::string(jobName) + "-" + form, kMaxObjectName));
  }
  return names;
}

ModelsSnapshot observeModels(const ClusterView& cluster, const CachedAutotuneJob& job,
                             Timestamp now) {
  ModelsSnapshot snapshot;
  snapshot.now = now;
  snapshot.generation = job.generation;
  snapshot.job = job.decoded->job;
  snapshot.job.status = job.status;
  if (snapshot.job.status.gpuModels.empty() &&
      snapshot.job.spec.gpuModels.front() == api::kAllGpuModels) {
    snapshot.offered = offeredModels(cluster.capacity(), snapshot.job.spec.resources);
  }
  const auto models = modelsOf(snapshot.job, snapshot.offered);
  const auto names = modelSearchNames(snapshot.job.name(), models);
  const std::string ns = snapshot.job.namespaceName();
  for (std::size_t index = 0; index < models.size(); ++index) {
    snapshot.searches.push_back(
        {models[index], names[index], cluster.job(ns + "/" + names[index])});
  }
  return snapshot;
}

nlohmann::json modelSearchJob(const api::AutotuneJob& job, const std::string& gpuModel,
                              const std::string& name) {
  api::Spec spec = job.spec;
  spec.gpuModels = {gpuModel};
  spec.output = api::Output{name + "-optimal", false};
  spec.afterTuning.reset();
  return {{"apiVersion", std::string(api::kApiVersion)},
          {"kind", std::string(api::kKind)},
          {"metadata",
           {{"name", name},
            {"namespace", job.namespaceName()},
            {"labels", {{std::string(api::kModelSearchOfLabel), jobLabelValue(job.name())}}},
            {"ownerReferences", nlohmann::json::array({ownerReference(job)})}}},
          {"spec", api::encode(spec)}};
}

Plan planModels(const ModelsSnapshot& snapshot, const Learned& learned) {
  Plan plan;
  plan.status = snapshot.job.status;
  api::Status& status = plan.status;
  if (api::hasEnded(status.phase)) {
    return plan;
  }
  status.observedGeneration = snapshot.generation;
  if (status.startTime.empty()) {
    status.startTime = formatTime(snapshot.now);
  }
  setConditionNow(snapshot, status, condition::kSpecValid, true, "Valid", "the spec is valid");
  if (snapshot.searches.empty()) {
    status.phase = api::Phase::kPending;
    status.message = "no schedulable node watched that could hold a trial is labelled " +
                     std::string(api::kGpuProductLabel) + " with its GPU model (spec.gpuModels " +
                     std::string(api::kAllGpuModels) + ")";
    setConditionNow(snapshot, status, condition::kRunning, false, "GpuModelUnavailable",
                    status.message);
    plan.waitsForNode = true;
    plan.requeueAfter = std::chrono::duration_cast<std::chrono::milliseconds>(kOfferedRecheck);
    return plan;
  }
  const std::vector<bool> ours = oursOf(snapshot);
  status.gpuModels.clear();
  for (std::size_t index = 0; index < snapshot.searches.size(); ++index) {
    status.gpuModels.push_back(
        entryOf(snapshot, learned, snapshot.searches[index], ours[index], plan));
  }
  addUp(snapshot, ours, status);
  endOrGoOn(snapshot, learned, plan);
  return plan;
}

}  // namespace autotune::controller
