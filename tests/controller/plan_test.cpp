// The pure middle of a reconcile: snapshot -> plan, case by case, with the engine's own decision
// on each snapshot. No API server: what the plan says is what apply would do.

#include "controller/decision/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "api/codec.h"
#include "controller/apply/apply.h"
#include "controller/objects/trial_pod.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using std::chrono::seconds;

const Timestamp kNow = parseTime("2026-11-22T12:00:00Z").value();

api::AutotuneJob gridJob(int parallelism) {
  auto document = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: gpt2, namespace: ml, uid: uid-gpt2, generation: 1}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: [1, 2, 3, 4]
    fp16: {enabled: true}
    zero_optimization: {stage: 1}
  model: {numParameters: 774000000, activationMemoryPerSample: 1000000000}
  resources: {gpusPerTrial: 8, gpuMemory: 32Gi}
  search: {strategy: grid, earlyStopping: 0}
  trialTimeout: 30m
  template:
    spec:
      containers:
      - {name: trainer, image: trial-sim, command: [trial-sim, --deepspeed, x]}
)");
  EXPECT_TRUE(document.has_value());
  (*document)["spec"]["parallelism"] = parallelism;
  auto decoded = api::decode(*document);
  EXPECT_TRUE(decoded.has_value());
  return decoded->job;
}

GpuCapacity nodesOf(std::vector<int> gpus) {
  GpuCapacity capacity;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    capacity.nodes.push_back({"gpu-" + std::to_string(i), gpus[i], 0, 0, std::nullopt, ""});
  }
  return capacity;
}

Snapshot snapshotOf(const api::AutotuneJob& job, GpuCapacity capacity) {
  Snapshot snapshot;
  snapshot.now = kNow;
  snapshot.key = "ml/gpt2";
  snapshot.generation = 1;
  snapshot.job = job;
  snapshot.capacity = std::move(capacity);
  return snapshot;
}

TrialRunState running(const std::string& trial) {
  TrialRunState state;
  state.phase = TrialRunState::Phase::kRunning;
  state.trialName = trial;
  state.run = {TrialRun::Carrier::kPod, trialPodName("gpt2", trial), "", ""};
  state.created = kNow - seconds(60);
  state.started = kNow - seconds(50);
  return state;
}

Concluded succeeded(const std::string& trial, double throughput, int startedSecondsAgo) {
  Concluded done;
  done.state = running(trial);
  done.state.phase = TrialRunState::Phase::kFinished;
  done.state.containerStarted = kNow - seconds(startedSecondsAgo);
  done.result.record.name = trial;
  done.result.record.space = "z1";
  done.result.record.outcome = api::Outcome::kSucceeded;
  done.result.record.value = throughput;
  done.result.record.startTime = formatTime(kNow - seconds(startedSecondsAgo));
  return done;
}

// Trials that ended since the status was written, as observe puts them in the snapshot.
void conclude(Snapshot& snapshot, std::vector<Concluded> concluded) {
  snapshot.concluded = std::move(concluded);
  snapshot.results = snapshot.job.status.results;
  for (const auto& ended : snapshot.concluded) {
    snapshot.results.push_back(ended.result.record);
  }
}

Plan planned(const Snapshot& snapshot, const Learned& learned = {}) {
  return plan(snapshot, tuning::decide(question(snapshot)), learned);
}

std::vector<std::string> reasons(const Plan& plan) {
  std::vector<std::string> found;
  for (const auto& event : plan.events) {
    found.push_back(event.reason);
  }
  return found;
}

const api::Condition* conditionOf(const api::Status& status, const std::string& type) {
  const auto found = std::ranges::find(status.conditions, type, &api::Condition::type);
  return found == status.conditions.end() ? nullptr : &*found;
}

TEST(Plan, AFreshJobLaunchesUpToItsParallelismAndCountsThemInTheStatus) {
  const Plan plan = planned(snapshotOf(gridJob(2), nodesOf({16, 16})));
  ASSERT_EQ(plan.launches.size(), 2U);
  EXPECT_EQ(plan.launches[0].object["metadata"]["name"],
            trialPodName("gpt2", plan.launches[0].trial));
  EXPECT_EQ(plan.status.trials.launched, 2);
  EXPECT_EQ(plan.status.trials.pending, 2);
  EXPECT_EQ(plan.status.phase, api::Phase::kRunning);
  EXPECT_TRUE(plan.deletions.empty());
  EXPECT_FALSE(plan.output.has_value());
}

// Pods that only start running change the counts alone: that waits for a write that records
// something, or for 30 s after the last write, when the requeue writes it.
TEST(Plan, TrialsThatOnlyStartedWaitForTheNextWriteOrThirtySeconds) {
  Snapshot launching = snapshotOf(gridJob(2), nodesOf({16, 16}));
  const Plan launched = planned(launching);
  ASSERT_EQ(launched.launches.size(), 2U);

  Snapshot started = launching;
  started.job.status = launched.status;
  for (const auto& launch : launched.launches) {
    started.inFlight.push_back(running(launch.trial));
  }
  started.statusWrittenAt = kNow - seconds(23);
  const Plan held = planned(started);
  EXPECT_EQ(held.status, launched.status);
  ASSERT_TRUE(held.requeueAfter.has_value());
  EXPECT_LE(*held.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(7)));

  started.statusWrittenAt = kNow - seconds(30);
  const Plan due = planned(started);
  EXPECT_EQ(due.status.trials.running, 2);
  EXPECT_EQ(due.status.trials.pending, 0);

  started.statusWrittenAt.reset();  // never written by the operator
  EXPECT_EQ(planned(started).status.trials.running, 2);
}

// Figures that change in the words under the same reason (a queued trial's scheduler message,
// "trials in flight") wait alike; new words, or a new reason, are written at once.
TEST(Plan, AMessageWhoseFiguresAloneChangedWaitsLikeTheCounts) {
  Snapshot snapshot = snapshotOf(gridJob(2), nodesOf({16, 16}));
  const Plan launched = planned(snapshot);
  snapshot.job.status = launched.status;
  for (const auto& launch : launched.launches) {
    snapshot.inFlight.push_back(running(launch.trial));
  }
  snapshot.statusWrittenAt = kNow - seconds(30);
  const Plan current = planned(snapshot);
  ASSERT_NE(conditionOf(current.status, "Running"), nullptr);
  const std::string& inFlight = conditionOf(current.status, "Running")->message;
  ASSERT_NE(inFlight.find_first_of("0123456789"), std::string::npos) << inFlight;

  // The same words with other figures: "trials in flight: 2" written as "...: 17.5".
  const auto otherFigures = [](const std::string& words) {
    std::string older;
    bool inFigure = false;
    for (const char c : words) {
      const bool digit = std::isdigit(static_cast<unsigned char>(c)) != 0;
      if (digit && !inFigure) {
        older += "17.5";
      } else if (!digit) {
        older += c;
      }
      inFigure = digit;
    }
    return older;
  };
  Snapshot refigured = snapshot;
  refigured.job.status = current.status;
  refigured.job.status.message = otherFigures(current.status.message);
  for (auto& condition : refigured.job.status.conditions) {
    condition.message = otherFigures(condition.message);
  }
  refigured.statusWrittenAt = kNow - seconds(5);
  EXPECT_EQ(planned(refigured).status, refigured.job.status);

  refigured.statusWrittenAt = kNow - seconds(30);
  EXPECT_EQ(conditionOf(planned(refigured).status, "Running")->message, inFlight);

  Snapshot reworded = refigured;
  reworded.statusWrittenAt = kNow - seconds(5);
  for (auto& condition : reworded.job.status.conditions) {
    condition.message = "Kueue has not made its Workload yet";
  }
  EXPECT_EQ(conditionOf(planned(reworded).status, "Running")->message, inFlight);

  Snapshot otherReason = refigured;
  otherReason.statusWrittenAt = kNow - seconds(5);
  for (auto& condition : otherReason.job.status.conditions) {
    if (condition.type == "Running") {
      condition.reason = "WaitingForGPUs";
    }
  }
  EXPECT_EQ(conditionOf(planned(otherReason).status, "Running")->message, inFlight);
}

// A trial that ended while its siblings run, and whose result launches nothing new, waits up to
// 5 s after its container ended to be recorded with those that end meanwhile.
TEST(Plan, ATrialThatEndedWaitsFiveSecondsForItsSiblingsWhenNothingNewWouldStart) {
  Snapshot snapshot = snapshotOf(gridJob(4), nodesOf({16, 16, 16, 16}));
  for (const auto* trial : {"z1_gas1_tmbspg2", "z1_gas1_tmbspg3", "z1_gas1_tmbspg4"}) {
    snapshot.inFlight.push_back(running(trial));
  }
  conclude(snapshot, {succeeded("z1_gas1_tmbspg1", 30.0, 45)});
  snapshot.concluded[0].state.containerFinished = kNow - seconds(2);
  const Plan held = planned(snapshot);
  EXPECT_EQ(held.status, snapshot.job.status);
  EXPECT_TRUE(held.launches.empty());
  EXPECT_TRUE(held.deletions.empty());
  EXPECT_TRUE(held.events.empty());
  ASSERT_TRUE(held.requeueAfter.has_value());
  EXPECT_LE(*held.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(3)));

  snapshot.concluded[0].state.containerFinished = kNow - seconds(5);
  const Plan recorded = planned(snapshot);
  ASSERT_EQ(recorded.status.results.size(), 1U);
  const TrialRun recordedRun{TrialRun::Carrier::kPod, trialPodName("gpt2", "z1_gas1_tmbspg1"), "",
                             ""};
  EXPECT_EQ(recorded.deletions, std::vector{recordedRun});
  EXPECT_EQ(std::ranges::count(reasons(recorded), "TrialSucceeded"), 1);

  // A node clock ahead of ours makes no trial wait on it.
  snapshot.concluded[0].state.containerFinished = kNow + seconds(60);
  EXPECT_EQ(planned(snapshot).status.results.size(), 1U);

  // Once nothing else runs (the grid then launches the rest), the result is recorded at once.
  snapshot.concluded[0].state.containerFinished = kNow - seconds(2);
  snapshot.inFlight.clear();
  EXPECT_EQ(planned(snapshot).status.results.size(), 1U);
}

// Two trials that ended by one reconcile (observe puts them in the order they started): both
// recorded in that order, one Event names both, and both Pods go (after the status: apply's order).
TEST(Plan, TrialsThatEndedTogetherAreRecordedInOrderUnderOneEvent) {
  Snapshot snapshot = snapshotOf(gridJob(2), nodesOf({16, 16}));
  conclude(snapshot,
           {succeeded("z1_gas1_tmbspg1", 30.0, 45), succeeded("z1_gas1_tmbspg2", 50.0, 40)});
  const Plan plan = planned(snapshot);
  ASSERT_GE(plan.status.results.size(), 2U);
  EXPECT_EQ(plan.status.results[0].name, "z1_gas1_tmbspg1");
  EXPECT_EQ(plan.status.results[1].name, "z1_gas1_tmbspg2");
  EXPECT_EQ(plan.finished.size(), 2U);
  EXPECT_EQ(plan.deletions.size(), 2U);
  const auto events = reasons(plan);
  EXPECT_EQ(std::ranges::count(events, "TrialSucceeded"), 1);
  EXPECT_EQ(std::ranges::count(events, "BestImproved"), 1);
  const auto ended = std::ranges::find(plan.events, "TrialSucceeded", &JobEvent::reason);
  EXPECT_EQ(ended->message,
            "2 trials ended Succeeded: z1_gas1_tmbspg1 (throughput 30); z1_gas1_tmbspg2 "
            "(throughput 50)");
  ASSERT_TRUE(plan.status.best.has_value());
  EXPECT_EQ(plan.status.best->trial, "z1_gas1_tmbspg2");
}

// Two 16-GPU nodes, one of each GPU model, as a job of `model` counts them (observe's forJob).
Snapshot onMixedNodes(const std::string& model) {
  api::AutotuneJob job = gridJob(2);
  job.spec.gpuModels = {model};
  GpuCapacity cluster = nodesOf({16, 16});
  cluster.nodes[0].product = "NVIDIA-A100-SXM4-80GB";
  cluster.nodes[1].product = "NVIDIA-H100-80GB-HBM3";
  return snapshotOf(job, forJob(cluster, job.spec));
}

// A job of one GPU model launches on its model's free GPUs, never on another model's.
TEST(Plan, AJobOfOneGpuModelLaunchesOnThatModelsGpusAlone) {
  Snapshot snapshot = onMixedNodes("NVIDIA-H100-80GB-HBM3");
  const Plan launched = planned(snapshot);
  ASSERT_EQ(launched.launches.size(), 2U);
  for (const auto& launch : launched.launches) {
    EXPECT_EQ(launch.object["spec"]["nodeSelector"]["nvidia.com/gpu.product"],
              "NVIDIA-H100-80GB-HBM3");
  }

  // Its node full, it waits for GPUs, the other model's free node notwithstanding.
  snapshot.capacity.nodes[0].used = 16;
  const Plan waiting = planned(snapshot);
  EXPECT_TRUE(waiting.launches.empty());
  EXPECT_TRUE(waiting.waitsForRoom);
  EXPECT_FALSE(waiting.waitsForNode);
}

// No node of the model: nothing is created, the job says which models the nodes offer, and looks
// again as a job no node can hold does.
TEST(Plan, AJobOfAGpuModelNoNodeOffersSaysSoWithoutPods) {
  const Plan plan = planned(onMixedNodes("NVIDIA-L40S"));
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_TRUE(plan.waitsForNode);
  const api::Condition* running = conditionOf(plan.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->status, "False");
  EXPECT_EQ(running->reason, "GpuModelUnavailable");
  EXPECT_EQ(plan.status.message,
            "no schedulable node offers GPU model NVIDIA-L40S (spec.gpuModels, the label "
            "nvidia.com/gpu.product); the nodes with GPUs offer NVIDIA-A100-SXM4-80GB, "
            "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(plan.requeueAfter, seconds(30));
}

// Trials of a job of no GPU model that ran on two models: a Warning says the search mixed them,
// once, when the second model appears; a job of one model is never told.
TEST(Plan, TrialsOnTwoGpuModelsAreToldOfOnce) {
  Snapshot snapshot = snapshotOf(gridJob(2), nodesOf({16, 16}));
  std::vector<Concluded> ended = {succeeded("z1_gas1_tmbspg1", 30.0, 45),
                                  succeeded("z1_gas1_tmbspg2", 50.0, 40)};
  ended[0].result.record.gpuModel = "NVIDIA-A100-SXM4-80GB";
  ended[1].result.record.gpuModel = "NVIDIA-H100-80GB-HBM3";
  conclude(snapshot, {ended[0]});
  EXPECT_EQ(std::ranges::count(reasons(planned(snapshot)), "MixedGpuModels"), 0);
  conclude(snapshot, ended);
  const Plan mixed = planned(snapshot);
  ASSERT_EQ(std::ranges::count(reasons(mixed), "MixedGpuModels"), 1);
  const auto warning = std::ranges::find(mixed.events, "MixedGpuModels", &JobEvent::reason);
  EXPECT_EQ(warning->type, "Warning");
  EXPECT_NE(warning->message.find("2 models (NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3)"),
            std::string::npos)
      << warning->message;

  snapshot.job.status = mixed.status;  // written: the next trial's end says nothing more
  conclude(snapshot, {succeeded("z1_gas1_tmbspg3", 60.0, 30)});
  EXPECT_EQ(std::ranges::count(reasons(planned(snapshot)), "MixedGpuModels"), 0);

  Snapshot pinned = onMixedNodes("NVIDIA-H100-80GB-HBM3");
  conclude(pinned, ended);
  EXPECT_EQ(std::ranges::count(reasons(planned(pinned)), "MixedGpuModels"), 0);
}

TEST(Plan, AJobNoNodeCanHoldWaitsWithoutPodsAndLooksAgain) {
  const Plan plan = planned(snapshotOf(gridJob(2), nodesOf({4, 4})));
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_TRUE(plan.waitsForNode);
  EXPECT_FALSE(planned(snapshotOf(gridJob(2), nodesOf({8, 8}))).waitsForNode);
  const api::Condition* running = conditionOf(plan.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->status, "False");
  EXPECT_EQ(running->reason, "Unschedulable");
  EXPECT_NE(plan.status.message.find("the largest has 4"), std::string::npos);
  EXPECT_EQ(plan.status.message.find("--node-selector"), std::string::npos);
  EXPECT_EQ(plan.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(30)));

  // Where the operator watches some nodes only, the likeliest reason is named: a GPU node without
  // the label.
  Snapshot selected = snapshotOf(gridJob(2), nodesOf({4, 4}));
  selected.capacity.nodeSelector = "nvidia.com/gpu.present=true";
  EXPECT_NE(planned(selected).status.message.find(
                "the largest has 4 (of the nodes labelled nvidia.com/gpu.present=true, the only "
                "ones the operator watches: its --node-selector)"),
            std::string::npos);
}

// Fewer free slots than the parallelism allows: the job launches what fits, says it waits for
// GPUs, and looks again within 30 s even if no event wakes it.
TEST(Plan, AJobShortOfGpusLaunchesWhatFitsAndLooksAgain) {
  Snapshot snapshot = snapshotOf(gridJob(3), nodesOf({16}));
  snapshot.capacity.nodes[0].used = 8;
  const Plan plan = planned(snapshot);
  EXPECT_EQ(plan.launches.size(), 1U);
  const api::Condition* running = conditionOf(plan.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->reason, "WaitingForGPUs");
  ASSERT_TRUE(plan.requeueAfter.has_value());
  EXPECT_LE(*plan.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(30)));
}

api::AutotuneJob twoNodeJob(int parallelism) {
  api::AutotuneJob job = gridJob(parallelism);
  job.spec.resources.gpusPerTrial = 16;
  job.spec.resources.nodesPerTrial = 2;
  return job;
}

// Each trial of a two-node job is an Indexed Job with its Service, launched only where two nodes
// have its share free: three nodes of 8 hold one such trial, not one and a half.
TEST(Plan, AMultiNodeJobLaunchesWholeTrialsAsIndexedJobs) {
  const Plan plan = planned(snapshotOf(twoNodeJob(2), nodesOf({8, 8, 8})));
  ASSERT_EQ(plan.launches.size(), 1U);
  const RunLaunch& launch = plan.launches[0];
  EXPECT_EQ(launch.object["kind"], "Job");
  EXPECT_EQ(launch.object["metadata"]["name"], trialBatchJobName("gpt2", launch.trial));
  ASSERT_TRUE(launch.service.has_value());
  EXPECT_EQ((*launch.service)["metadata"]["name"], trialBatchJobName("gpt2", launch.trial));
  EXPECT_EQ(plan.status.trials.pending, 1);
  EXPECT_EQ(conditionOf(plan.status, "Running")->reason, "WaitingForGPUs");
}

TEST(Plan, AMultiNodeJobWithoutEnoughNodesSaysHowManyItNeeds) {
  const Plan plan = planned(snapshotOf(twoNodeJob(1), nodesOf({16, 4})));
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_EQ(conditionOf(plan.status, "Running")->reason, "Unschedulable");
  EXPECT_EQ(plan.status.message,
            "fewer than 2 schedulable nodes (spec.resources.nodesPerTrial) have 8 allocatable "
            "nvidia.com/gpu (spec.resources.gpusPerTrial / nodesPerTrial); 1 have");
}

// A lost rank loses the trial: its Job goes, and a Job of its own runs the next attempt.
TEST(Plan, ALostMultiNodeTrialIsRelaunchedAsANewJob) {
  Snapshot snapshot = snapshotOf(twoNodeJob(1), nodesOf({8, 8}));
  const std::string trial = planned(snapshot).launches.at(0).trial;
  TrialRunState lost = running(trial);
  lost.run = {TrialRun::Carrier::kBatchJob, trialBatchJobName("gpt2", trial), "", ""};
  lost.phase = TrialRunState::Phase::kLost;
  lost.message = "its Pod x was lost: Evicted";
  snapshot.inFlight.push_back(lost);
  const Plan plan = planned(snapshot);
  ASSERT_EQ(plan.launches.size(), 1U);
  EXPECT_EQ(plan.launches[0].object["metadata"]["name"], trialBatchJobName("gpt2", trial, 1));
  ASSERT_TRUE(plan.launches[0].replaces.has_value());
  EXPECT_EQ(plan.launches[0].replaces->run.name, trialBatchJobName("gpt2", trial));
  EXPECT_EQ(plan.status.inFlight.at(0).attempt, 1);
}

TEST(Plan, GpusOlderWaitingJobsHoldAreNotHandedToThisOne) {
  Snapshot snapshot = snapshotOf(gridJob(2), nodesOf({16}));
  snapshot.slotsHeldForOlderJobs = 2;
  const Plan plan = planned(snapshot);
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_EQ(conditionOf(plan.status, "Running")->reason, "WaitingForGPUs");
}

TEST(Plan, ATrialWhosePodNameIsTakenIsRecordedFailedNotLaunched) {
  Snapshot snapshot = snapshotOf(gridJob(1), nodesOf({16}));
  const std::string first = planned(snapshot).launches.at(0).trial;
  snapshot.namesTaken.insert(trialPodName("gpt2", first));
  const Plan plan = planned(snapshot);
  ASSERT_FALSE(plan.status.results.empty());
  EXPECT_EQ(plan.status.results[0].name, first);
  EXPECT_EQ(plan.status.results[0].outcome, api::Outcome::kFailed);
  EXPECT_NE(plan.status.results[0].reason.find("is not this job's"), std::string::npos);
  for (const auto& launch : plan.launches) {
    EXPECT_NE(launch.trial, first);
  }
}

// The search over: the output and the final status, with the last trial in both.
TEST(Plan, TheLastResultEndsTheSearchWithTheOutputHoldingIt) {
  Snapshot snapshot = snapshotOf(gridJob(4), nodesOf({16, 16}));
  conclude(snapshot,
           {succeeded("z1_gas1_tmbspg1", 30.0, 50), succeeded("z1_gas1_tmbspg2", 50.0, 49),
            succeeded("z1_gas1_tmbspg3", 60.0, 48), succeeded("z1_gas1_tmbspg4", 40.0, 47)});
  const Plan plan = planned(snapshot);
  EXPECT_EQ(plan.status.phase, api::Phase::kSucceeded);
  ASSERT_TRUE(plan.output.has_value());
  const std::string results = (*plan.output)["data"]["results.json"];
  EXPECT_NE(results.find("z1_gas1_tmbspg4"), std::string::npos);
  EXPECT_EQ(reasons(plan).back(), "Completed");
  EXPECT_FALSE(plan.requeueAfter.has_value());
  // Should the output not be written, the status keeps the results but not the final phase.
  Learned learned;
  learned.outputRefused = OutputRefusal{"OutputWriteFailed", "Forbidden"};
  const Plan refused = planned(snapshot, learned);
  EXPECT_NE(refused.status.phase, api::Phase::kSucceeded);
  EXPECT_EQ(refused.status.results.size(), 4U);
}

// It still says which generation of the spec it has seen (kstatus, Argo CD and Flux read that).
TEST(Plan, AFinishedJobOnlyDeletesWhatIsLeft) {
  api::AutotuneJob job = gridJob(2);
  job.status.phase = api::Phase::kSucceeded;
  Snapshot snapshot = snapshotOf(job, nodesOf({16}));
  snapshot.staleRuns = {{TrialRun::Carrier::kPod, "gpt2-z1-gas1-tmbspg1", "", ""}};
  const Plan plan = planned(snapshot);
  api::Status seen = job.status;
  seen.observedGeneration = snapshot.generation;
  EXPECT_EQ(api::encode(plan.status), api::encode(seen));
  EXPECT_EQ(plan.deletions, snapshot.staleRuns);
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_TRUE(plan.events.empty());
}

// --- a shared cluster ----------------------------------------------------------------------------

// A create of the trial's run refused with the API server's error, as apply tells it to the plan.
RefusedCreate refusedWith(const std::string& trial, k8s::ErrorKind kind, std::string message) {
  k8s::Error error;
  error.kind = kind;
  error.message = std::move(message);
  return {trial, refusalOf(error), error.message};
}

RefusedCreate quotaRefusal(const std::string& trial) {
  return refusedWith(
      trial, k8s::ErrorKind::kForbidden,
      "pods \"" + trialPodName("gpt2", trial) +
          "\" is forbidden: exceeded quota: gpu, requested: requests.nvidia.com/gpu=8, used: "
          "requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8");
}

// A create the quota refuses is no trial in flight and no attempt: the trial waits, counted
// queued, the job says why in the quota's words, and the create is tried again with backoff.
TEST(Plan, ATrialTheQuotaRefusesWaitsWithoutSpendingAnAttempt) {
  Snapshot snapshot = snapshotOf(gridJob(2), nodesOf({16, 16}));
  const Plan first = planned(snapshot);
  ASSERT_EQ(first.launches.size(), 2U);
  Learned learned;
  learned.refusedCreates = {quotaRefusal(first.launches[1].trial)};
  const Plan replanned = planned(snapshot, learned);
  ASSERT_EQ(replanned.status.inFlight.size(), 1U);
  EXPECT_EQ(replanned.status.inFlight[0].name, first.launches[0].trial);
  EXPECT_EQ(replanned.status.trials.launched, 1);
  EXPECT_EQ(replanned.status.trials.queued, 1);
  const api::Condition* running = conditionOf(replanned.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->reason, "QuotaExceeded");
  EXPECT_NE(running->message.find("exceeded quota: gpu"), std::string::npos);
  EXPECT_TRUE(replanned.retry);
  EXPECT_EQ(std::ranges::count(reasons(replanned), "QuotaExceeded"), 1);

  // Refused again for the same quota: the job said so already, so no second Event.
  snapshot.job.status = replanned.status;
  EXPECT_EQ(std::ranges::count(reasons(planned(snapshot, learned)), "QuotaExceeded"), 0);
}

// Pod Security refusing the template is for good: no relaunch, no deletion of what runs; the job
// fails with the server's words once nothing runs any more.
TEST(Plan, ATemplateRefusedForGoodStopsLaunchesAndFailsOnceNothingRuns) {
  Snapshot snapshot = snapshotOf(gridJob(1), nodesOf({16}));
  const std::string trial = planned(snapshot).launches.at(0).trial;
  Learned learned;
  learned.refusedCreates = {
      refusedWith(trial, k8s::ErrorKind::kForbidden,
                  "pods \"x\" is forbidden: violates PodSecurity \"restricted:latest\": "
                  "allowPrivilegeEscalation != false")};
  const Plan refused = planned(snapshot, learned);
  EXPECT_EQ(refused.status.phase, api::Phase::kFailed);
  EXPECT_TRUE(refused.status.inFlight.empty());
  const api::Condition* failed = conditionOf(refused.status, "Failed");
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, "LaunchRefused");
  EXPECT_NE(failed->message.find("violates PodSecurity"), std::string::npos);
  EXPECT_FALSE(refused.retry);

  // With a trial still running, the job waits for it and launches nothing more.
  Snapshot busy = snapshotOf(gridJob(2), nodesOf({16, 16}));
  const Plan launched = planned(busy);
  busy.job.status = launched.status;
  busy.inFlight.push_back(running(launched.launches[0].trial));
  Learned busyLearned;
  busyLearned.refusedCreates = {
      refusedWith(launched.launches[1].trial, k8s::ErrorKind::kInvalid, "spec: Invalid")};
  const Plan waiting = planned(busy, busyLearned);
  EXPECT_NE(waiting.status.phase, api::Phase::kFailed);
  EXPECT_EQ(conditionOf(waiting.status, "LaunchRefused")->status, "True");
  EXPECT_EQ(conditionOf(waiting.status, "Running")->reason, "LaunchRefused");
  busy.job.status = waiting.status;
  EXPECT_TRUE(planned(busy).launches.empty());
  busy.inFlight.clear();
  EXPECT_EQ(planned(busy).status.phase, api::Phase::kFailed);
}

// A preempted trial runs again as its next attempt, counting the preemption, not a relaunch.
TEST(Plan, APreemptedTrialRunsAgainWithItsOwnReason) {
  Snapshot snapshot = snapshotOf(gridJob(1), nodesOf({16}));
  const std::string trial = planned(snapshot).launches.at(0).trial;
  TrialRunState preempted = running(trial);
  preempted.phase = TrialRunState::Phase::kLost;
  preempted.attempt = 2;
  preempted.preemptions = 2;
  preempted.preempted = true;
  preempted.message = "PreemptionByScheduler: Preempted in order to admit critical pod";
  snapshot.inFlight.push_back(preempted);
  const Plan plan = planned(snapshot);
  ASSERT_EQ(plan.launches.size(), 1U);
  ASSERT_TRUE(plan.launches[0].replaces.has_value());
  EXPECT_EQ(plan.launches[0].replaces->why, Relaunch::kPreempted);
  EXPECT_NE(plan.launches[0].replaces->event.message.find("was preempted (PreemptionByScheduler"),
            std::string::npos);
  EXPECT_EQ(plan.launches[0].object["metadata"]["annotations"]["autotune.io/preemptions"], "3");
  ASSERT_EQ(plan.status.inFlight.size(), 1U);
  EXPECT_EQ(plan.status.inFlight[0].attempt, 3);
  EXPECT_EQ(plan.status.inFlight[0].preemptions, 3);
}

// WaitingForRoom is True, dated when the wait began, while trials wait for GPUs; it goes back to
// False once none does, a job that fails before launching included.
TEST(Plan, WaitingForRoomSaysSinceWhenAndNoMoreOnceRoomIsFoundOrTheJobFails) {
  Snapshot snapshot = snapshotOf(gridJob(3), nodesOf({16}));
  snapshot.capacity.nodes[0].used = 8;
  const Plan waiting = planned(snapshot);
  const api::Condition* waits = conditionOf(waiting.status, "WaitingForRoom");
  ASSERT_NE(waits, nullptr);
  EXPECT_EQ(waits->status, "True");
  EXPECT_EQ(waits->reason, "WaitingForGPUs");
  EXPECT_EQ(waits->lastTransitionTime, formatTime(kNow));

  snapshot.job.status = waiting.status;
  snapshot.now = kNow + seconds(30);
  EXPECT_EQ(conditionOf(planned(snapshot).status, "WaitingForRoom")->lastTransitionTime,
            formatTime(kNow))
      << "still waiting: the time the wait began stays";

  Snapshot roomy = snapshotOf(gridJob(3), nodesOf({16, 16}));
  roomy.job.status = waiting.status;
  EXPECT_EQ(conditionOf(planned(roomy).status, "WaitingForRoom")->status, "False");

  Snapshot failing = snapshotOf(gridJob(1), nodesOf({16}));
  failing.job.status = waiting.status;
  TrialRunState exhausted = running(planned(failing).launches.at(0).trial);
  exhausted.phase = TrialRunState::Phase::kNotMeasured;
  exhausted.attempt = kMaxRelaunches;
  failing.inFlight.push_back(exhausted);
  const Plan failed = planned(failing);
  ASSERT_EQ(failed.status.phase, api::Phase::kFailed);
  EXPECT_EQ(conditionOf(failed.status, "WaitingForRoom")->status, "False");

  EXPECT_EQ(
      conditionOf(planned(snapshotOf(gridJob(3), nodesOf({16, 16}))).status, "WaitingForRoom"),
      nullptr)
      << "a job that never waited has none";
}

// How long a trial waited counts from when it was first wanted: a launch after its job waited
// for room carries that time, a relaunch its first attempt's, and a trial that started is
// measured from there.
TEST(Plan, ATrialsWaitCountsFromWhenItWasFirstWanted) {
  Snapshot snapshot = snapshotOf(gridJob(3), nodesOf({16}));
  snapshot.capacity.nodes[0].used = 8;
  EXPECT_TRUE(planned(snapshot).waitsForRoom);

  snapshot = snapshotOf(gridJob(3), nodesOf({16, 16}));
  snapshot.waitingSince = kNow - seconds(600);
  Plan plan = planned(snapshot);
  EXPECT_FALSE(plan.waitsForRoom);
  ASSERT_FALSE(plan.launches.empty());
  EXPECT_EQ(plan.launches[0].object["metadata"]["annotations"]["autotune.io/wanted-since"],
            formatTime(kNow - seconds(600)));

  Snapshot again = snapshotOf(gridJob(1), nodesOf({16}));
  TrialRunState lost = running(planned(again).launches.at(0).trial);
  lost.phase = TrialRunState::Phase::kNotMeasured;
  again.inFlight.push_back(lost);
  plan = planned(again);
  ASSERT_EQ(plan.launches.size(), 1U);
  EXPECT_EQ(plan.launches[0].object["metadata"]["annotations"]["autotune.io/wanted-since"],
            formatTime(*lost.created));

  Snapshot ended = snapshotOf(gridJob(2), nodesOf({16, 16}));
  Concluded done = succeeded("z1_gas1_tmbspg1", 30.0, 45);
  done.state.wantedSince = kNow - seconds(900);
  conclude(ended, {done});
  plan = planned(ended);
  ASSERT_EQ(plan.pendingWaits.size(), 1U);
  EXPECT_DOUBLE_EQ(plan.pendingWaits[0].count(), 855.0);
}

// The relaunch's name held by someone else's Pod is recorded as a taken first name is.
TEST(Plan, ARelaunchWhoseNameIsTakenIsRecordedFailed) {
  Snapshot snapshot = snapshotOf(gridJob(1), nodesOf({16}));
  const std::string trial = planned(snapshot).launches.at(0).trial;
  TrialRunState lost = running(trial);
  lost.phase = TrialRunState::Phase::kLost;
  lost.message = "Evicted";
  snapshot.inFlight.push_back(lost);
  snapshot.namesTaken.insert(trialPodName("gpt2", trial, 1));
  const Plan plan = planned(snapshot);
  ASSERT_FALSE(plan.status.results.empty());
  EXPECT_EQ(plan.status.results[0].name, trial);
  EXPECT_NE(plan.status.results[0].reason.find("is not this job's"), std::string::npos);
  for (const auto& launch : plan.launches) {
    EXPECT_NE(launch.run.name, trialPodName("gpt2", trial, 1));
  }
}

// The GPUs a job holds back from younger jobs are those of the launches it wants now and cannot
// make, never more than the cluster has, and none once it wants nothing.
TEST(Plan, AWaitingJobHoldsOnlyWhatItWantsNow) {
  Snapshot snapshot = snapshotOf(gridJob(8), nodesOf({16}));
  snapshot.capacity.nodes[0].used = 8;
  const Plan plan = planned(snapshot);
  EXPECT_EQ(plan.launches.size(), 1U);
  EXPECT_EQ(conditionOf(plan.status, "Running")->reason, "WaitingForGPUs");
  // The grid has four micro-batches: one launched, three wanted, 24 GPUs, capped at the 16 there
  // are.
  EXPECT_EQ(plan.gpusWaitedFor, 16);
  EXPECT_EQ(plan.status.trials.queued, 3);

  // Every configuration in flight: the engine wants no more, so nothing is held or waited for.
  Snapshot busy = snapshotOf(gridJob(8), nodesOf({16}));
  busy.capacity.nodes[0].used = 16;
  for (const auto* trial :
       {"z1_gas1_tmbspg1", "z1_gas1_tmbspg2", "z1_gas1_tmbspg3", "z1_gas1_tmbspg4"}) {
    busy.inFlight.push_back(running(trial));
  }
  const Plan full = planned(busy);
  EXPECT_EQ(full.gpusWaitedFor, 0);
  EXPECT_NE(conditionOf(full.status, "Running")->reason, "WaitingForGPUs");
}

// A trial queued longer than spec.queueTimeout fails the job with its own reason, keeping its
// results.
TEST(Plan, ATrialQueuedPastTheQueueTimeoutFailsTheJobKeepingItsResults) {
  api::AutotuneJob job = gridJob(2);
  job.spec.queueTimeout = api::Duration::parse("1h").value();
  Snapshot snapshot = snapshotOf(job, nodesOf({16, 16}));
  TrialRunState queued = running("z1_gas1_tmbspg2");
  queued.phase = TrialRunState::Phase::kQueued;
  queued.heldBack = true;
  queued.started.reset();
  queued.created = kNow - seconds(3599);
  queued.message = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
  snapshot.inFlight.push_back(queued);
  conclude(snapshot, {succeeded("z1_gas1_tmbspg1", 30.0, 50)});
  EXPECT_NE(planned(snapshot).status.phase, api::Phase::kFailed);
  snapshot.inFlight[0].created = kNow - seconds(3600);
  const Plan plan = planned(snapshot);
  EXPECT_EQ(plan.status.phase, api::Phase::kFailed);
  EXPECT_EQ(conditionOf(plan.status, "Failed")->reason, "QueueTimeout");
  EXPECT_EQ(plan.status.results.size(), 1U);
}

// --- Kueue -------------------------------------------------------------------------------------

// A model too large for any stage on its GPUs: the job fails before it launches anything, in the
// engine's words, which say what would fit.
TEST(Plan, AJobWhereNothingFitsFailsBeforeLaunchingSayingWhatWould) {
  api::AutotuneJob job = gridJob(2);
  job.spec.model.numParameters = 70'000'000'000;
  const Plan plan = planned(snapshotOf(job, nodesOf({16, 16})));
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_EQ(plan.status.phase, api::Phase::kFailed);
  EXPECT_NE(plan.status.message.find("nothing fits: no ZeRO stage of the search leaves room"),
            std::string::npos)
      << plan.status.message;
  EXPECT_NE(plan.status.message.find("What would fit: "), std::string::npos);
  EXPECT_EQ(plan.status.trials.launched, 0);
}

api::AutotuneJob queuedJob(int parallelism) {
  api::AutotuneJob job = gridJob(parallelism);
  job.spec.queueName = "team-a";
  return job;
}

// Kueue admits a queued job's trials as its quota allows: the operator creates up to the
// parallelism with every GPU taken, holds none back for older jobs, and waits for none.
TEST(Plan, AJobInAKueueQueueLaunchesUpToItsParallelismWhateverTheGpus) {
  Snapshot snapshot = snapshotOf(queuedJob(3), nodesOf({16}));
  snapshot.capacity.nodes[0].used = 16;
  snapshot.slotsHeldForOlderJobs = 2;
  snapshot.queue = QueueState::kFound;
  const Plan plan = planned(snapshot);
  EXPECT_EQ(plan.launches.size(), 3U);
  EXPECT_EQ(plan.gpusWaitedFor, 0);
  EXPECT_FALSE(plan.waitsForRoom);
  EXPECT_EQ(plan.launches[0].object["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-a");

  // The same job without a queue waits for GPUs.
  Snapshot unqueued = snapshot;
  unqueued.job.spec.queueName.clear();
  unqueued.queue = QueueState::kNotWatched;
  EXPECT_TRUE(planned(unqueued).launches.empty());
}

// A trial whose Workload Kueue has not admitted: the job says so in the Workload's own words and
// counts it apart from the other queued trials.
TEST(Plan, ATrialAwaitingAdmissionIsQueuedInTheWorkloadsWords) {
  Snapshot snapshot = snapshotOf(queuedJob(2), nodesOf({16, 16}));
  snapshot.queue = QueueState::kFound;
  TrialRunState admitted = running("z1_gas1_tmbspg1");
  TrialRunState waiting = running("z1_gas1_tmbspg2");
  waiting.phase = TrialRunState::Phase::kQueued;
  waiting.heldBack = true;
  waiting.awaitingAdmission = true;
  waiting.message =
      "waits for Kueue admission in LocalQueue team-a: couldn't assign flavors to pod set main: "
      "insufficient quota for nvidia.com/gpu in flavor default-flavor";
  snapshot.inFlight = {admitted, waiting};
  const Plan plan = planned(snapshot);
  const api::Condition* running = conditionOf(plan.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->status, "True");  // one trial runs
  EXPECT_EQ(running->reason, "WaitingForAdmission");
  EXPECT_NE(running->message.find(waiting.run.name + " waits for Kueue admission"),
            std::string::npos)
      << running->message;
  EXPECT_NE(running->message.find("insufficient quota for nvidia.com/gpu"), std::string::npos);
  EXPECT_EQ(plan.status.trials.queued, 1);
  EXPECT_EQ(plan.status.trials.awaitingAdmission, 1);
  EXPECT_EQ(plan.status.trials.running, 1);
}

// A LocalQueue that does not exist: nothing is created, the Running condition says which queue
// and where, one Warning Event says it once, and trials in flight go on.
TEST(Plan, AJobWhoseLocalQueueIsMissingCreatesNothingAndSaysSoOnce) {
  Snapshot snapshot = snapshotOf(queuedJob(2), nodesOf({16, 16}));
  snapshot.queue = QueueState::kMissing;
  const Plan plan = planned(snapshot);
  EXPECT_TRUE(plan.launches.empty());
  const api::Condition* running = conditionOf(plan.status, "Running");
  ASSERT_NE(running, nullptr);
  EXPECT_EQ(running->status, "False");
  EXPECT_EQ(running->reason, "LocalQueueNotFound");
  EXPECT_NE(running->message.find("LocalQueue team-a (spec.queueName) does not exist in namespace "
                                  "ml"),
            std::string::npos)
      << running->message;
  EXPECT_EQ(plan.status.trials.queued, 2);
  EXPECT_EQ(std::ranges::count(reasons(plan), "LocalQueueNotFound"), 1);

  snapshot.job.status = plan.status;
  EXPECT_EQ(std::ranges::count(reasons(planned(snapshot)), "LocalQueueNotFound"), 0);

  snapshot.queue = QueueState::kFound;
  const Plan found = planned(snapshot);
  EXPECT_EQ(found.launches.size(), 2U);
  EXPECT_NE(conditionOf(found.status, "Running")->reason, "LocalQueueNotFound");
}

// A trial preempted while its LocalQueue is gone waits for the queue as a first launch does.
TEST(Plan, ATrialLostWhileItsLocalQueueIsMissingRunsAgainOnlyOnceTheQueueExists) {
  Snapshot snapshot = snapshotOf(queuedJob(1), nodesOf({16}));
  TrialRunState preempted = running(planned(snapshot).launches.at(0).trial);
  preempted.phase = TrialRunState::Phase::kLost;
  preempted.preempted = true;
  preempted.message = "WorkloadEvictedDueToPreempted: Preempted to accommodate a workload";
  snapshot.inFlight.push_back(preempted);
  snapshot.queue = QueueState::kMissing;
  const Plan held = planned(snapshot);
  EXPECT_TRUE(held.launches.empty());
  EXPECT_EQ(conditionOf(held.status, "Running")->reason, "LocalQueueNotFound");
  ASSERT_EQ(held.status.inFlight.size(), 1U) << "the trial is still the job's";
  EXPECT_TRUE(held.status.results.empty()) << "and not recorded as failed";

  snapshot.queue = QueueState::kFound;
  const Plan relaunched = planned(snapshot);
  ASSERT_EQ(relaunched.launches.size(), 1U);
  ASSERT_TRUE(relaunched.launches[0].replaces.has_value());
  EXPECT_EQ(relaunched.launches[0].replaces->why, Relaunch::kPreempted);
}

// A multi-node trial is one Workload: the Job carries the queue, its Pods do not, and the
// priority label of the template reaches both.
TEST(Plan, AMultiNodeTrialIsQueuedAsOneJob) {
  api::AutotuneJob job = twoNodeJob(1);
  job.spec.queueName = "team-a";
  job.spec.podTemplate["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high";
  Snapshot snapshot = snapshotOf(job, nodesOf({16, 16}));
  snapshot.queue = QueueState::kFound;
  const Plan plan = planned(snapshot);
  ASSERT_EQ(plan.launches.size(), 1U);
  const json& batchJob = plan.launches[0].object;
  EXPECT_EQ(batchJob["kind"], "Job");
  EXPECT_EQ(batchJob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-a");
  EXPECT_EQ(batchJob["metadata"]["labels"]["kueue.x-k8s.io/priority-class"], "high");
  const json& podLabels = batchJob["spec"]["template"]["metadata"]["labels"];
  EXPECT_FALSE(podLabels.contains("kueue.x-k8s.io/queue-name"));
  EXPECT_EQ(podLabels["kueue.x-k8s.io/priority-class"], "high");
}

TEST(Plan, EventsAboutOneTrialReadAsBefore) {
  EXPECT_EQ(aboutTrials("TrialLaunched", "Normal", "launched", {{"z1", "Pod gpt2-z1"}}).message,
            "Trial z1 launched as Pod gpt2-z1");
  EXPECT_EQ(aboutTrials("TrialFailed", "Warning", "ended Failed", {{"z1", "exit 1"}}).message,
            "Trial z1 ended Failed: exit 1");
  // Names derive from the trials, so the same report twice is one Event.
  EXPECT_EQ(aboutTrials("TrialLaunched", "Normal", "launched", {{"a", ""}, {"b", ""}}).subject,
            aboutTrials("TrialLaunched", "Normal", "launched", {{"a", "x"}, {"b", "y"}}).subject);
}

}  // namespace
}  // namespace autotune::controller
