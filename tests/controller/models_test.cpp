// A job that tunes for several GPU models: its searches, its status and its output, from what the
// cache holds of the searches' AutotuneJobs. Pure: what the plan says is what apply would do.

#include "controller/decision/models.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/labels.h"
#include "api/names.h"
#include "controller/objects/conditions.h"

namespace autotune::controller::models_test {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const Timestamp kNow = parseTime("2026-11-29T12:00:00Z").value();
const std::string kH100 = "NVIDIA-H100-80GB-HBM3";
const std::string kA100 = "NVIDIA-A100-SXM4-40GB";

api::AutotuneJob jobFor(const std::vector<std::string>& models) {
  auto document = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: train, namespace: ml, uid: uid-train, generation: 1}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    zero_optimization: {stage: [0, 1]}
  resources: {gpusPerTrial: 8}
  template:
    spec:
      containers:
      - {name: trainer, image: trial-sim, command: [trial-sim, --deepspeed, x]}
)");
  EXPECT_TRUE(document.has_value());
  (*document)["spec"]["gpuModels"] = models;
  auto decoded = api::decode(*document);
  EXPECT_TRUE(decoded.has_value()) << (decoded ? "" : api::format(decoded.error().front()));
  return decoded->job;
}

api::BestTrial bestOf(const std::string& trial, double value, int microBatch) {
  api::BestTrial best;
  best.trial = trial;
  best.value = value;
  best.zeroStage = 1;
  best.microBatchSize = microBatch;
  best.config =
      json{{"train_micro_batch_size_per_gpu", microBatch}, {"zero_optimization", {{"stage", 1}}}};
  return best;
}

// The AutotuneJob of `parent`'s search of `model` as the cache holds it, controlled by `ownerUid`.
std::shared_ptr<CachedAutotuneJob> searchJob(const api::AutotuneJob& parent,
                                             const std::string& model, const std::string& name,
                                             const std::string& ownerUid, api::Phase phase,
                                             std::optional<api::BestTrial> best = {}) {
  auto job = std::make_shared<CachedAutotuneJob>();
  auto decoded = api::decode(modelSearchJob(parent, model, name));
  EXPECT_TRUE(decoded.has_value());
  job->decoded = std::move(decoded);
  job->key = "ml/" + name;
  job->metadata = {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}};
  job->ownerJobName = "train";
  job->ownerJobUid = ownerUid;
  job->status.phase = phase;
  job->status.best = std::move(best);
  job->status.trials.launched = 3;
  job->status.gpuHours.used = 1.5;
  return job;
}

ModelsSnapshot snapshotOf(const api::AutotuneJob& job,
                          std::vector<Shared<CachedAutotuneJob>> jobs) {
  ModelsSnapshot snapshot;
  snapshot.now = kNow;
  snapshot.generation = 1;
  snapshot.job = job;
  std::vector<std::string> models = job.spec.gpuModels;
  const auto names = modelSearchNames(job.name(), models);
  for (std::size_t index = 0; index < models.size(); ++index) {
    snapshot.searches.push_back(
        {models[index], names[index], index < jobs.size() ? jobs[index] : nullptr});
  }
  return snapshot;
}

TEST(ModelSearchNames, AreTheJobsAndTheModelsInDnsForm) {
  EXPECT_THAT(modelSearchNames("train", {kH100, kA100}),
              ElementsAre("train-nvidia-h100-80gb-hbm3", "train-nvidia-a100-sxm4-40gb"));
  const auto meeting = modelSearchNames("train", {"A_B", "a.b", "C"});
  EXPECT_NE(meeting[0], meeting[1]) << "two models of one DNS form are told apart by a hash";
  EXPECT_TRUE(meeting[0].starts_with("train-a-b-"));
  EXPECT_EQ(meeting[2], "train-c");
  const std::string longName(250, 'j');
  const auto bounded = modelSearchNames(longName, {kH100, kA100});
  EXPECT_NE(bounded[0], bounded[1]);
  for (const auto& name : bounded) {
    EXPECT_LE(name.size(), 253U);
    EXPECT_TRUE(api::isDnsSubdomain(name)) << name;
  }
}

TEST(PlanModels, EachModelWithoutItsSearchGetsOneOfItsOwn) {
  const auto job = jobFor({kH100, kA100});
  const Plan plan = planModels(snapshotOf(job, {}));
  ASSERT_THAT(plan.searches, SizeIs(2));
  const json& first = plan.searches[0];
  EXPECT_EQ(first["metadata"]["name"], "train-nvidia-h100-80gb-hbm3");
  EXPECT_EQ(first["metadata"]["ownerReferences"][0]["uid"], "uid-train");
  EXPECT_EQ(first["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(first["metadata"]["labels"][std::string(api::kModelSearchOfLabel)], "train");
  auto decoded = api::decode(first);
  ASSERT_TRUE(decoded.has_value()) << "the search is a valid job of its own";
  EXPECT_THAT(decoded->job.spec.gpuModels, ElementsAre(kH100));
  EXPECT_EQ(decoded->job.spec.output.configMapName, "train-nvidia-h100-80gb-hbm3-optimal");
  EXPECT_EQ(decoded->job.spec.deepspeedConfig, job.spec.deepspeedConfig);
  EXPECT_EQ(plan.status.phase, api::Phase::kRunning);
  ASSERT_THAT(plan.status.gpuModels, SizeIs(2));
  EXPECT_EQ(plan.status.gpuModels[1].gpuModel, kA100);
  EXPECT_EQ(plan.status.gpuModels[1].job, "train-nvidia-a100-sxm4-40gb");
  EXPECT_EQ(plan.status.gpuModels[1].phase, api::Phase::kPending);
  EXPECT_FALSE(plan.output);
}

TEST(PlanModels, AJobOfASearchsNameThatIsNotTheJobsIsNeitherReadNorAdopted) {
  const auto job = jobFor({kH100, kA100});
  const auto tenants = searchJob(job, kH100, "train-nvidia-h100-80gb-hbm3", "uid-someone",
                                 api::Phase::kSucceeded, bestOf("z1_gas1_tmbspg64", 1e6, 64));
  const Plan plan = planModels(snapshotOf(job, {tenants}));
  ASSERT_THAT(plan.searches, SizeIs(1)) << "the other model is searched all the same";
  EXPECT_EQ(plan.searches[0]["metadata"]["name"], "train-nvidia-a100-sxm4-40gb");
  EXPECT_EQ(plan.status.gpuModels[0].phase, api::Phase::kFailed);
  EXPECT_THAT(plan.status.gpuModels[0].message, ::testing::HasSubstr("is not this job's"));
  EXPECT_FALSE(plan.status.gpuModels[0].best) << "its best is not this job's";
  EXPECT_FALSE(plan.status.best);
  EXPECT_EQ(plan.status.trials.launched, 0) << "its trials are not counted";
}

// Anyone who may create AutotuneJobs here may name the job as the controller of a search of their
// own making. A search is the job's only with the spec the job gives it; a limit the job's owner
// may change since (parallelism, maxTrials, timeouts) reaches no search and proves nothing.
TEST(PlanModels, ASearchWithAnotherSpecThanTheJobGivesItIsNeitherReadNorAdopted) {
  const auto job = jobFor({kH100, kA100});
  const auto names = modelSearchNames("train", {kH100, kA100});
  auto forged = searchJob(job, kH100, names[0], "uid-train", api::Phase::kSucceeded,
                          bestOf("z1_gas1_tmbspg64", 1e6, 64));
  forged->decoded->job.spec.podTemplate["spec"]["containers"][0]["image"] = "someone/else";
  auto edited =
      searchJob(job, kA100, names[1], "uid-train", api::Phase::kSucceeded, bestOf("a", 100, 2));
  edited->decoded->job.spec.parallelism = 4;
  edited->decoded->job.spec.search.maxTrials = 7;
  const Plan plan = planModels(snapshotOf(job, {forged, edited}));
  EXPECT_EQ(plan.status.gpuModels[0].phase, api::Phase::kFailed);
  EXPECT_THAT(plan.status.gpuModels[0].message, ::testing::HasSubstr("is not this job's"));
  EXPECT_FALSE(plan.status.gpuModels[0].best);
  EXPECT_EQ(plan.status.gpuModels[1].phase, api::Phase::kSucceeded) << "the job's own, edited";
  EXPECT_EQ(plan.status.trials.launched, 3) << "the forged search's trials are not counted";
  ASSERT_TRUE(plan.output);
  EXPECT_FALSE((*plan.output)["data"].contains(api::modelConfigFile(kH100)));
}

TEST(PlanModels, OnceEverySearchEndedTheOutputHoldsEachModelsConfig) {
  const auto job = jobFor({kA100, kH100});
  const auto names = modelSearchNames("train", {kA100, kH100});
  const Plan plan = planModels(snapshotOf(
      job,
      {searchJob(job, kA100, names[0], "uid-train", api::Phase::kSucceeded, bestOf("a", 100, 2)),
       searchJob(job, kH100, names[1], "uid-train", api::Phase::kSucceeded, bestOf("h", 300, 8))}));
  EXPECT_EQ(plan.status.phase, api::Phase::kSucceeded);
  ASSERT_TRUE(plan.output);
  const json& data = (*plan.output)["data"];
  EXPECT_EQ(json::parse(data[api::modelConfigFile(kA100)].get<std::string>()),
            *bestOf("a", 100, 2).config);
  EXPECT_EQ(json::parse(data[api::modelConfigFile(kH100)].get<std::string>()),
            *bestOf("h", 300, 8).config);
  EXPECT_EQ(data["ds_config.json"], data[api::modelConfigFile(kA100)])
      << "the first model listed is the primary, whatever the others measured";
  EXPECT_EQ(plan.status.best->trial, "a");
  EXPECT_EQ((*plan.output)["metadata"]["name"], "train-optimal");
  EXPECT_EQ(plan.status.trials.launched, 6);
  EXPECT_DOUBLE_EQ(plan.status.gpuHours.used, 3.0);
  EXPECT_THAT(plan.searches, IsEmpty());
}

TEST(PlanModels, WithAllTheFastestModelsConfigIsTheOutputsOwn) {
  auto job = jobFor({"All"});
  job.status.gpuModels = {{kA100, "train-a", api::Phase::kRunning, "", std::nullopt},
                          {kH100, "train-h", api::Phase::kRunning, "", std::nullopt}};
  ModelsSnapshot snapshot = snapshotOf(job, {});
  snapshot.searches = {
      {kA100, "train-a",
       searchJob(job, kA100, "train-a", "uid-train", api::Phase::kSucceeded, bestOf("a", 100, 2))},
      {kH100, "train-h",
       searchJob(job, kH100, "train-h", "uid-train", api::Phase::kSucceeded, bestOf("h", 300, 8))}};
  const Plan plan = planModels(snapshot);
  ASSERT_TRUE(plan.output);
  EXPECT_EQ((*plan.output)["data"]["ds_config.json"],
            (*plan.output)["data"][api::modelConfigFile(kH100)]);
  EXPECT_EQ(plan.status.best->trial, "h");
}

TEST(PlanModels, AModelWhoseSearchFailedLeavesTheOthersAnswers) {
  const auto job = jobFor({kH100, kA100});
  const auto names = modelSearchNames("train", {kH100, kA100});
  auto failed = searchJob(job, kH100, names[0], "uid-train", api::Phase::kFailed);
  failed->status.message = "no configuration fits in 80 GiB";
  const Plan plan =
      planModels(snapshotOf(job, {failed, searchJob(job, kA100, names[1], "uid-train",
                                                    api::Phase::kSucceeded, bestOf("a", 100, 2))}));
  EXPECT_EQ(plan.status.phase, api::Phase::kSucceeded);
  EXPECT_THAT(plan.status.message, ::testing::HasSubstr("no configuration fits in 80 GiB"));
  ASSERT_TRUE(plan.output);
  EXPECT_FALSE((*plan.output)["data"].contains(api::modelConfigFile(kH100)));
  EXPECT_EQ((*plan.output)["data"]["ds_config.json"],
            (*plan.output)["data"][api::modelConfigFile(kA100)]);

  const Plan none = planModels(snapshotOf(job, {failed, failed}));
  EXPECT_EQ(none.status.phase, api::Phase::kFailed);
  EXPECT_FALSE(none.output);
  EXPECT_THAT(none.status.message, ::testing::HasSubstr("no GPU model's search succeeded"));
}

TEST(PlanModels, AnEndedSearchWhoseJobIsGoneKeepsWhatItFound) {
  auto job = jobFor({kH100, kA100});
  const auto names = modelSearchNames("train", {kH100, kA100});
  job.status.gpuModels = {{kH100, names[0], api::Phase::kSucceeded, "", bestOf("h", 300, 8)},
                          {kA100, names[1], api::Phase::kRunning, "", std::nullopt}};
  const Plan plan = planModels(snapshotOf(job, {}));
  ASSERT_THAT(plan.searches, SizeIs(1)) << "a search deleted while it ran starts again";
  EXPECT_EQ(plan.searches[0]["metadata"]["name"], names[1]);
  EXPECT_EQ(plan.status.gpuModels[0].phase, api::Phase::kSucceeded);
  EXPECT_EQ(plan.status.best->trial, "h");
}

TEST(PlanModels, ASearchTheServerRefusedFailsThatModelAlone) {
  const auto job = jobFor({kH100, kA100});
  ModelsSnapshot snapshot = snapshotOf(job, {});
  Learned learned;
  learned.refusedCreates = {
      {snapshot.searches[0].name, Refusal::kForGood, "admission webhook denied the request"},
      {snapshot.searches[1].name, Refusal::kTransient, "etcdserver: request timed out"}};
  const Plan plan = planModels(snapshot, learned);
  EXPECT_THAT(plan.searches, IsEmpty());
  EXPECT_EQ(plan.status.gpuModels[0].phase, api::Phase::kFailed);
  EXPECT_THAT(plan.status.gpuModels[0].message, ::testing::HasSubstr("webhook denied"));
  EXPECT_EQ(plan.status.gpuModels[1].phase, api::Phase::kPending);
  EXPECT_TRUE(plan.retry);
  EXPECT_EQ(plan.status.phase, api::Phase::kRunning);
}

TEST(PlanModels, AllWithNoModelOfferedWaitsSayingSo) {
  const auto job = jobFor({"All"});
  ModelsSnapshot snapshot = snapshotOf(job, {});
  snapshot.searches.clear();
  const Plan plan = planModels(snapshot);
  EXPECT_EQ(plan.status.phase, api::Phase::kPending);
  const api::Condition* running = findCondition(plan.status, condition::kRunning);
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->reason, "GpuModelUnavailable");
  EXPECT_TRUE(plan.requeueAfter);
  EXPECT_THAT(plan.searches, IsEmpty());
}

TEST(JobKeysOfAutotuneJob, ASearchWakesItsJobOnANewPhaseOrBest) {
  const auto before =
      searchJob(jobFor({kH100}), kH100, "train-h", "uid-train", api::Phase::kRunning);
  auto after = std::make_shared<CachedAutotuneJob>(*before);
  after->status.trials.launched = 4;
  EXPECT_THAT(jobKeysOfAutotuneJob(before.get(), after.get()), IsEmpty())
      << "a trial more is told with the next phase or best";
  after->status.best = bestOf("h", 300, 8);
  EXPECT_THAT(jobKeysOfAutotuneJob(before.get(), after.get()), ElementsAre("ml/train"));
  EXPECT_THAT(jobKeysOfAutotuneJob(nullptr, before.get()), ElementsAre("ml/train-h", "ml/train"));
}

}  // namespace
}  // namespace autotune::controller::models_test
