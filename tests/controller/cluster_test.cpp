// The cluster view's queue of jobs waiting for GPUs: first come, first served, held only while a
// job says it waits, and woken the moment a trial lets go of its GPUs.

#include "controller/cluster.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(waiting.keys(), (std::vector<std::string>{"ml/old", "ml/young"}));

  waiting.set("ml/old", "2026-11-22T10:00:00Z", 0);  // it waits no more
  EXPECT_EQ(waiting.slotsHeldBefore("ml/new", "2026-11-22T12:00:00Z", 8), 1);
  EXPECT_EQ(waiting.keys(), std::vector<std::string>{"ml/young"});
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

// A trial that ends frees its GPUs: every waiting job is woken with its own, oldest first.
TEST(Cluster, ATrialThatLetsGoOfItsGpusWakesTheWaitingJobs) {
  Cluster cluster;
  cluster.addPods("");
  const auto running = decodePod(trialPodOf("busy", "Running")).value();
  const auto ended = decodePod(trialPodOf("busy", "Succeeded")).value();
  CachedAutotuneJob old;
  old.key = "ml/old";
  old.creationTimestamp = "2026-11-22T10:00:00Z";
  cluster.jobWaits(old, 8);

  EXPECT_EQ(cluster.jobsConcernedByPod(nullptr, &running), std::vector<std::string>{"ml/busy"});
  EXPECT_EQ(cluster.jobsConcernedByPod(&running, &running), std::vector<std::string>{"ml/busy"});
  EXPECT_EQ(cluster.jobsConcernedByPod(&running, &ended),
            (std::vector<std::string>{"ml/busy", "ml/old"}));
  EXPECT_EQ(cluster.jobsConcernedByPod(&running, nullptr),
            (std::vector<std::string>{"ml/busy", "ml/old"}));
  // An ended Pod going frees nothing more.
  EXPECT_EQ(cluster.jobsConcernedByPod(&ended, nullptr), std::vector<std::string>{"ml/busy"});
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

  const auto job = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: busy, namespace: ml, uid: uid-busy}
spec:
  deepspeedConfig: {train_micro_batch_size_per_gpu: [1, 2]}
  model: {numParameters: 774000000}
  resources: {gpusPerTrial: 8, gpuMemory: 32Gi}
  queueName: team-a
  template: {spec: {containers: [{name: trainer, image: trial-sim}]}}
)");
  ASSERT_TRUE(job.has_value());
  jobs.upsert(*job);
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

}  // namespace
}  // namespace autotune::controller
