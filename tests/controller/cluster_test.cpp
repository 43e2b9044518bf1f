// The cluster view's queue of jobs waiting for GPUs: first come, first served, held only while a
// job says it waits, and woken the moment a trial lets go of its GPUs.

#include "controller/cluster.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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

}  // namespace
}  // namespace autotune::controller
