// The cluster view's queue of jobs waiting for GPUs: first come, first served, held only while a
// job says it waits, and woken the moment a trial lets go of its GPUs.

#include "controller/cache/cluster.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "api/codec.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

TEST(WaitingJobs, OnlyOlderJobsHoldSlotsAndOnlyWhileTheyWait) {
  WaitingJobs waiting;
  waiting.set("ml/old", "2026-11-22T10:00:00Z", 16);
  waiting.set("ml/young", "2026-11-22T11:00:00Z", 8);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/new", "2026-11-22T12:00:00Z", 8), 3);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/young", "2026-11-22T11:00:00Z", 8), 2);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/old", "2026-11-22T10:00:00Z", 8), 0);
  EXPECT_EQ(waiting.takers(16), std::vector<std::string>{"ml/old"});
  EXPECT_EQ(waiting.takers(17), (std::vector<std::string>{"ml/old", "ml/young"}));

  waiting.set("ml/old", "2026-11-22T10:00:00Z", 0);  // it waits no more
  EXPECT_EQ(waiting.slotsHeldBefore("ml/new", "2026-11-22T12:00:00Z", 8), 1);
  EXPECT_EQ(waiting.takers(1), std::vector<std::string>{"ml/young"});
}

// A job of one GPU model holds back GPUs only from jobs that could take that model's GPUs, and
// freed GPUs of a model wake only the jobs that can use them.
TEST(WaitingJobs, AJobOfOneGpuModelHoldsBackOnlyThatModelsGpus) {
  WaitingJobs waiting;
  waiting.set("ml/h100", "2026-11-22T10:00:00Z", 16, "H100");
  waiting.set("ml/any", "2026-11-22T11:00:00Z", 8);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/a100", "2026-11-22T12:00:00Z", 8, "A100"), 1);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/h100-too", "2026-11-22T12:00:00Z", 8, "H100"), 3);
  EXPECT_EQ(waiting.slotsHeldBefore("ml/unpinned", "2026-11-22T12:00:00Z", 8), 3);
  EXPECT_EQ(waiting.takers(8, "A100"), std::vector<std::string>{"ml/any"});
  EXPECT_EQ(waiting.takers(8, "H100"), std::vector<std::string>{"ml/h100"});
  EXPECT_EQ(waiting.takers(8, ""), std::vector<std::string>{"ml/any"});  // a node unlabelled
}

// Freed GPUs go to the oldest waiting jobs first: of a thousand waiting, only those that the GPUs
// can reach are woken, not all of them (each would walk the waiting list: O(W^2)).
TEST(WaitingJobs, FreedGpusWakeOnlyTheOldestJobsTheyCanServe) {
  WaitingJobs waiting;
  for (int job = 0; job < 1000; ++job) {
    waiting.set("ml/job-" + std::to_string(1000 + job), "2026-11-22T10:00:00Z", 8);
  }
  EXPECT_EQ(waiting.takers(8), std::vector<std::string>{"ml/job-1000"});
  EXPECT_EQ(waiting.takers(12), (std::vector<std::string>{"ml/job-1000", "ml/job-1001"}));
  EXPECT_TRUE(waiting.takers(0).empty());
  EXPECT_EQ(waiting.takers(8000).size(), 1000U);
}

json trialPodOf(const std::string& job, const std::string& phase) {
  return {
      {"metadata",
       {{"name", job + "-z1"},
        {"namespace", "ml"},
        {"labels", {{"autotune.io/job", job}}},
        {"ownerReferences",
         {{{"kind", "AutotuneJob"}, {"name", job}, {"uid", "uid-" + job}, {"controller", true}}}}}},
      {"spec",
       {{"nodeName", "gpu-0"},
        {"containers",
         {{{"name", "trainer"}, {"resources", {{"limits", {{"nvidia.com/gpu", 8}}}}}}}}}},
      {"status", {{"phase", phase}}}};
}

// A trial that ends frees its GPUs: its job is told (after the Pod batch), and the oldest waiting
// job that can take them is woken at once.
TEST(Cluster, ATrialThatLetsGoOfItsGpusWakesTheWaitingJobs) {
  Cluster cluster;
  cluster.addPods("");
  const auto running = decodePod(trialPodOf("busy", "Running")).value();
  const auto ended = decodePod(trialPodOf("busy", "Succeeded")).value();
  CachedAutotuneJob old;
  old.key = "ml/old";
  old.creationTimestamp = "2026-11-22T10:00:00Z";
  cluster.jobWaits(old, 8);
  CachedAutotuneJob young;
  young.key = "ml/young";
  young.creationTimestamp = "2026-11-22T11:00:00Z";
  cluster.jobWaits(young, 8);

  const std::vector<std::string> busy{"ml/busy"};
  EXPECT_EQ(cluster.jobsConcernedByPod(nullptr, &running), busy);
  EXPECT_TRUE(cluster.jobsWokenByPod(nullptr, &running).empty());
  EXPECT_EQ(cluster.jobsConcernedByPod(&running, &running), busy);
  EXPECT_TRUE(cluster.jobsWokenByPod(&running, &running).empty());
  EXPECT_EQ(cluster.jobsConcernedByPod(&running, &ended), busy);
  EXPECT_EQ(cluster.jobsWokenByPod(&running, &ended), std::vector<std::string>{"ml/old"});
  EXPECT_EQ(cluster.jobsWokenByPod(&running, nullptr), std::vector<std::string>{"ml/old"});
  // An ended Pod going frees nothing more.
  EXPECT_EQ(cluster.jobsConcernedByPod(&ended, nullptr), busy);
  EXPECT_TRUE(cluster.jobsWokenByPod(&ended, nullptr).empty());
}

// An AutotuneJob `name` in namespace ml, of UID uid-<name>, whose trials take `gpus` GPUs.
json autotuneJob(const std::string& name, int gpus) {
  json job = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {namespace: ml}
spec:
  deepspeedConfig: {train_micro_batch_size_per_gpu: [1, 2]}
  model: {numParameters: 774000000}
  resources: {gpuMemory: 32Gi}
  template: {spec: {containers: [{name: trainer, image: trial-sim}]}}
)")
                 .value();
  job["metadata"]["name"] = name;
  job["metadata"]["uid"] = "uid-" + name;
  job["spec"]["resources"]["gpusPerTrial"] = gpus;
  return job;
}

// When the operator last wrote a job's status is what the API server recorded of it: the time of
// the status entry of the operator's field manager, which no other manager's entry stands for.
TEST(DecodeAutotuneJob, TheOperatorsLastStatusWriteIsItsManagedFieldsEntry) {
  json job = autotuneJob("gpt2", 16);
  job["metadata"]["managedFields"] = json::parse(R"([
    {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-29T13:00:00Z"},
    {"manager": "kubectl-edit", "operation": "Update", "subresource": "status",
     "time": "2026-11-29T13:20:00Z"},
    {"manager": "autotune-operator", "operation": "Update", "subresource": "status",
     "time": "2026-11-29T13:10:00Z"}])");
  EXPECT_EQ(decodeAutotuneJob(job)->statusWrittenAt, parseTime("2026-11-29T13:10:00Z"));
  EXPECT_FALSE(decodeAutotuneJob(job)->metadata.contains("managedFields")) << "not held";
  job["metadata"]["managedFields"].erase(2);
  EXPECT_FALSE(decodeAutotuneJob(job)->statusWrittenAt);
  job["metadata"]["managedFields"] = "autotune-operator";
  EXPECT_FALSE(decodeAutotuneJob(job)->statusWrittenAt);
}

// A Workload as Kueue 0.17 makes it for a trial Pod that waits for quota.
json pendingWorkload(const std::string& pod) {
  return {{"metadata",
           {{"name", "pod-" + pod + "-63e32"},
            {"namespace", "ml"},
            {"resourceVersion", "7"},
            {"labels", {{"kueue.x-k8s.io/job-uid", "uid-" + pod}}},
            {"ownerReferences",
             {{{"apiVersion", "v1"},
               {"kind", "Pod"},
               {"name", pod},
               {"uid", "uid-" + pod},
               {"controller", true},
               {"blockOwnerDeletion", true}}}}}},
          {"spec", {{"queueName", "team-a"}}},
          {"status",
           {{"conditions",
             {{{"type", "QuotaReserved"},
               {"status", "False"},
               {"reason", "Pending"},
               {"message",
                "couldn't assign flavors to pod set main: insufficient unused quota for "
                "nvidia.com/gpu in flavor default-flavor, 8 more needed"}}}}}}};
}

json admitted(json workload) {
  workload["metadata"]["resourceVersion"] = "8";
  workload["status"]["conditions"] = {
      {{"type", "QuotaReserved"}, {"status", "True"}, {"reason", "QuotaReserved"}},
      {{"type", "Admitted"}, {"status", "True"}, {"reason", "Admitted"}}};
  return workload;
}

// Kueue's Workloads are found by the trial run that owns them, and wake its job when what a
// trial reads of them changes; LocalQueues wake the jobs that name them.
TEST(Cluster, KueueWorkloadsAndLocalQueuesConcernTheJobsTheyHold) {
  Cluster cluster;
  EXPECT_EQ(cluster.localQueue("ml", "team-a"), QueueState::kNotWatched);
  auto& pods = cluster.addPods("");
  auto& workloads = cluster.addWorkloads("");
  auto& queues = cluster.addLocalQueues("");
  auto& jobs = cluster.addAutotuneJobs("");
  json pod = trialPodOf("busy", "Pending");
  pod["metadata"]["uid"] = "uid-busy-z1";
  pods.upsert(pod);

  const auto waiting = decodeWorkload(pendingWorkload("busy-z1")).value();
  EXPECT_FALSE(waiting.admitted);
  EXPECT_EQ(waiting.ownerKind, "Pod");
  EXPECT_NE(waiting.pendingMessage.find("insufficient unused quota"), std::string::npos);
  const auto ready = decodeWorkload(admitted(pendingWorkload("busy-z1"))).value();
  EXPECT_TRUE(ready.admitted);
  EXPECT_TRUE(ready.pendingMessage.empty());

  EXPECT_EQ(cluster.jobsConcernedByWorkload(nullptr, &waiting),
            std::vector<std::string>{"ml/busy"});
  EXPECT_EQ(cluster.jobsConcernedByWorkload(&waiting, &ready), std::vector<std::string>{"ml/busy"});
  auto resynced = ready;
  resynced.resourceVersion = "9";
  EXPECT_TRUE(cluster.jobsConcernedByWorkload(&ready, &resynced).empty());

  workloads.upsert(pendingWorkload("busy-z1"));
  EXPECT_NE(cluster.workloadOf("ml", "Pod", "busy-z1", "uid-busy-z1"), nullptr);
  EXPECT_EQ(cluster.workloadOf("ml", "Pod", "busy-z1", "uid-of-an-older-pod"), nullptr);
  EXPECT_EQ(cluster.workloadOf("ml", "Job", "busy-z1", ""), nullptr);

  json job = autotuneJob("busy", 8);
  job["spec"]["queueName"] = "team-a";
  jobs.upsert(job);
  const json queue = {{"metadata", {{"name", "team-a"}, {"namespace", "ml"}}}};
  EXPECT_EQ(cluster.localQueue("ml", "team-a"), QueueState::kMissing);
  queues.upsert(queue);
  EXPECT_EQ(cluster.localQueue("ml", "team-a"), QueueState::kFound);
  const auto created = decodeLocalQueue(queue).value();
  EXPECT_EQ(cluster.jobsConcernedByLocalQueue(nullptr, &created),
            std::vector<std::string>{"ml/busy"});
  EXPECT_EQ(cluster.jobsConcernedByLocalQueue(&created, nullptr),
            std::vector<std::string>{"ml/busy"});
  const auto other = decodeLocalQueue({{"metadata", {{"name", "team-b"}, {"namespace", "ml"}}}});
  EXPECT_TRUE(cluster.jobsConcernedByLocalQueue(nullptr, &*other).empty());
}

// Job `name` (8 GPUs per trial, parallelism `parallelism`), created at 10:00, as its status says
// it waits for GPUs with `queued` trials not created.
json waitingAsWritten(const std::string& name, int parallelism, int queued) {
  json job = autotuneJob(name, 8);
  job["metadata"]["creationTimestamp"] = "2026-11-22T10:00:00Z";
  job["spec"]["parallelism"] = parallelism;
  job["status"] = {{"phase", "Running"},
                   {"trials", {{"queued", queued}}},
                   {"conditions",
                    {{{"type", "Running"},
                      {"status", "True"},
                      {"reason", "WaitingForGPUs"},
                      {"message", "waiting for free nvidia.com/gpu slots"},
                      {"lastTransitionTime", "2026-11-22T10:00:05Z"}}}}};
  return job;
}

CachedAutotuneJob youngJob() {
  CachedAutotuneJob young;
  young.key = "ml/young";
  young.creationTimestamp = "2026-11-22T11:00:00Z";
  return young;
}

// After a restart, a job whose written status says it waits for GPU slots holds them back from
// younger jobs as soon as the watch lists it, before any reconcile; its reconcile then says what
// it really waits for, which a later watch event of the same job does not undo.
TEST(Cluster, AJobsWrittenWaitHoldsGpusFromTheStartUntilItsReconcileSaysOtherwise) {
  Cluster cluster;
  auto& jobs = cluster.addAutotuneJobs("");
  json old = waitingAsWritten("old", 2, 2);
  json busy = waitingAsWritten("busy", 2, 2);
  busy["metadata"]["creationTimestamp"] = "2026-11-22T10:30:00Z";
  busy["status"]["conditions"][0]["reason"] = "Queued";
  jobs.upsert(old);
  jobs.upsert(busy);
  const CachedAutotuneJob young = youngJob();
  EXPECT_EQ(cluster.slotsHeldForOlderJobs(young, 8), 2);
  EXPECT_EQ(cluster.slotsHeldForOlderJobs(young, 16), 1);

  cluster.jobWaits(*cluster.job("ml/old"), 0);
  old["metadata"]["resourceVersion"] = "2";
  jobs.upsert(old);
  EXPECT_EQ(cluster.slotsHeldForOlderJobs(young, 8), 0);
}

// A written count is anyone's who may write the job's status: a wait read from it holds at most
// the job's parallelism's GPUs, however large the count.
TEST(Cluster, AWrittenWaitHoldsNoMoreThanTheJobsParallelism) {
  Cluster cluster;
  cluster.addAutotuneJobs("").upsert(waitingAsWritten("forged", 3, 2147483647));
  EXPECT_EQ(cluster.slotsHeldForOlderJobs(youngJob(), 8), 3);
}

// --- whose trial a Pod is ------------------------------------------------------------------------

json gpuNode(const std::string& name) {
  return {{"metadata", {{"name", name}}},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", "16"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

// A Pod of 16 GPUs labelled for the job `gpt2`, with the given controller (or none), not bound.
json labelledPod(const std::string& name, const json& controller) {
  json pod = trialPodOf("gpt2", "Pending");
  pod["metadata"]["name"] = name;
  pod["metadata"]["uid"] = "uid-" + name;
  pod["metadata"]["ownerReferences"] =
      controller.is_null() ? json::array() : json::array({controller});
  pod["spec"].erase("nodeName");
  pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 16;
  return pod;
}

json controllerRef(const std::string& kind, const std::string& name, const std::string& uid) {
  return {{"apiVersion", kind == "Job" ? "batch/v1" : "autotune.io/v1alpha1"},
          {"kind", kind},
          {"name", name},
          {"uid", uid},
          {"controller", true}};
}

json batchJobOf(const std::string& name, const std::string& uid, const json& controller) {
  json job = {{"metadata",
               {{"name", name},
                {"namespace", "ml"},
                {"uid", uid},
                {"labels", {{"autotune.io/job", "gpt2"}}},
                {"ownerReferences", json::array()}}}};
  if (!controller.is_null()) {
    job["metadata"]["ownerReferences"].push_back(controller);
  }
  return job;
}

class Ownership : public ::testing::Test {
 protected:
  Ownership() {
    cluster_.nodes().upsert(gpuNode("gpu-0"));
    cluster_.nodes().upsert(gpuNode("gpu-1"));
    jobs_.upsert(autotuneJob("gpt2", 16));
    // A multi-node trial's Job, and a Job of someone else's that carries the label.
    batchJobs_.upsert(
        batchJobOf("gpt2-z1", "uid-batch", controllerRef("AutotuneJob", "gpt2", "uid-gpt2")));
    batchJobs_.upsert(batchJobOf("nightly-etl", "uid-etl", nullptr));
  }

  std::optional<TrialOwner> ownerOf(const json& pod) const {
    return cluster_.ownerOf(decodePod(pod).value());
  }

  Cluster cluster_;
  AutotuneJobStore& jobs_ = cluster_.addAutotuneJobs("");
  PodStore& pods_ = cluster_.addPods("");
  BatchJobStore& batchJobs_ = cluster_.addBatchJobs("");
};

// A Pod is a job's trial through its controller alone: the AutotuneJob itself, or a batch Job the
// cache holds (by name and UID) whose controller is the AutotuneJob. Labels and annotations that
// name the job prove nothing.
TEST_F(Ownership, APodIsATrialOnlyThroughItsControllerChain) {
  const auto direct = ownerOf(labelledPod("a", controllerRef("AutotuneJob", "gpt2", "uid-gpt2")));
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(direct->name, "gpt2");
  EXPECT_EQ(direct->uid, "uid-gpt2");
  const auto rank = ownerOf(labelledPod("b", controllerRef("Job", "gpt2-z1", "uid-batch")));
  ASSERT_TRUE(rank.has_value());
  EXPECT_EQ(rank->uid, "uid-gpt2");

  json forged = labelledPod("c", controllerRef("Job", "nightly-etl", "uid-etl"));
  forged["metadata"]["annotations"]["autotune.io/owner-name"] = "gpt2";
  forged["metadata"]["annotations"]["autotune.io/owner-uid"] = "uid-gpt2";
  EXPECT_FALSE(ownerOf(forged).has_value()) << "a Job no AutotuneJob controls";
  EXPECT_FALSE(ownerOf(labelledPod("d", controllerRef("Job", "gpt2-z1", "uid-older"))))
      << "a Job of the trial's name, but not the one the cache holds";
  EXPECT_FALSE(ownerOf(labelledPod("e", controllerRef("Job", "unknown", "uid-unknown"))))
      << "a Job the cache lacks";
  EXPECT_FALSE(ownerOf(labelledPod("f", nullptr))) << "no controller";
}

// Unbound Pods that only carry the label, or are held by a scheduling gate, reserve no GPU: two
// of them asking for every GPU of the cluster leave it free. A trial Pod of the job reserves its
// GPUs while it waits for the scheduler, and no longer once the job has ended; a bound Pod holds
// its GPUs whoever made it, since the scheduler placed it.
TEST_F(Ownership, OnlyTrialsOfHeldJobsReserveGpusAndGatedPodsReserveNone) {
  pods_.upsert(labelledPod("ghost-0", nullptr));
  json gated = labelledPod("ghost-1", controllerRef("AutotuneJob", "gpt2", "uid-gpt2"));
  gated["spec"]["schedulingGates"] = {{{"name", "example.com/hold"}}};
  pods_.upsert(gated);
  pods_.upsert(labelledPod("ghost-2", controllerRef("Job", "nightly-etl", "uid-etl")));
  pods_.upsert(labelledPod("ghost-3", controllerRef("AutotuneJob", "gpt2", "uid-older-gpt2")));
  EXPECT_EQ(cluster_.capacity().reserved(), 0);
  EXPECT_EQ(cluster_.capacity().waiting, 0);
  EXPECT_EQ(cluster_.capacity().free(), 32);

  pods_.upsert(labelledPod("trial", controllerRef("AutotuneJob", "gpt2", "uid-gpt2")));
  EXPECT_EQ(cluster_.capacity().reserved(), 16);
  json bound = labelledPod("bound", nullptr);
  bound["spec"]["nodeName"] = "gpu-1";
  pods_.upsert(bound);
  EXPECT_EQ(cluster_.capacity().used(), 16);
  EXPECT_EQ(cluster_.capacity().free(), 0);

  json ended = autotuneJob("gpt2", 16);
  ended["metadata"]["resourceVersion"] = "2";
  ended["status"]["phase"] = "Succeeded";
  jobs_.upsert(ended);
  EXPECT_EQ(cluster_.capacity().reserved(), 0);
}

// A Pod no job of ours controls wakes the job its label names, which tells of it; a trial's wakes
// its own job, whatever its label says.
TEST_F(Ownership, AForeignPodConcernsTheJobItsLabelNames) {
  const auto forged = decodePod(labelledPod("ghost", nullptr)).value();
  EXPECT_EQ(cluster_.jobsConcernedByPod(nullptr, &forged), std::vector<std::string>{"ml/gpt2"});
  json rankPod = labelledPod("rank", controllerRef("Job", "gpt2-z1", "uid-batch"));
  rankPod["metadata"]["labels"]["autotune.io/job"] = "mislabelled";
  const auto rank = decodePod(rankPod).value();
  EXPECT_EQ(cluster_.jobsConcernedByPod(nullptr, &rank), std::vector<std::string>{"ml/gpt2"});
  EXPECT_TRUE(cluster_.noticeForeignPod("uid-ghost"));
  EXPECT_FALSE(cluster_.noticeForeignPod("uid-ghost")) << "told of once";
}

}  // namespace
}  // namespace autotune::controller
