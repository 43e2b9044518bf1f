#include "controller/decision/trial_state.h"

#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "api/codec.h"
#include "api/job.h"
#include "controller/objects/trial_pod.h"
#include "tuning/space.h"
#include "tuning/trial_metrics.h"

namespace {

using autotune::api::AutotuneJob;
using autotune::api::Outcome;
using autotune::controller::combineRanks;
using autotune::controller::deadline;
using autotune::controller::decodePod;
using autotune::controller::formatTime;
using autotune::controller::NodeNames;
using autotune::controller::parseTime;
using autotune::controller::queueTimedOut;
using autotune::controller::readTrialPod;
using autotune::controller::resultOf;
using autotune::controller::shouldRelaunch;
using autotune::controller::Timestamp;
using autotune::controller::trialPod;
using autotune::controller::TrialRunState;
using autotune::tuning::describeSpace;
using autotune::tuning::makeFastTrial;
using autotune::tuning::makeProfileTrial;
using nlohmann::json;
using Phase = TrialRunState::Phase;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr std::string_view kCreated = "2026-11-22T12:00:00Z";
constexpr std::string_view kStarted = "2026-11-22T12:00:04Z";
constexpr std::string_view kContainerStarted = "2026-11-22T12:00:05Z";
constexpr std::string_view kContainerFinished = "2026-11-22T12:03:25Z";
// DeepSpeed's metrics of z1_gas1_tmbspg3 on 16 GPUs: throughput x latency is 10^6 x its global
// batch of 48.
constexpr std::string_view kMetrics =
    R"({"throughput": 87.3, "latency": 549828.2, "FLOPS_per_gpu": 1.2e13})";
constexpr std::string_view kCudaOutOfMemory =
    "Traceback (most recent call last):\n"
    "  File \"run_clm.py\", line 212, in <module>\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 31.75 "
    "GiB total capacity; 28.12 GiB already allocated; 1.43 GiB free)\n";

Timestamp at(std::string_view text) {
  const auto time = parseTime(text);
  EXPECT_TRUE(time.has_value()) << text;
  return time.value_or(Timestamp{});
}

// The example job: trialTimeout 30m, the default schedulingTimeout of 15m.
constexpr std::string_view kJob = R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: gpt2-large, namespace: ml, uid: 6c1f0d5e-2b47-4a8e-9d11-3f0c2a7b9e10}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    gradient_accumulation_steps: 1
    fp16: {enabled: true}
    zero_optimization: {stage: [0, 1, 2, 3]}
  resources: {gpusPerTrial: 16, gpuMemory: 32Gi}
  search: {strategy: deepspeed, fast: true, metric: throughput, maxTrials: 50, seed: 1}
  parallelism: 2
  trialTimeout: 30m
  argMappings: {train_micro_batch_size_per_gpu: --per_device_train_batch_size}
  template:
    spec:
      containers:
      - name: trainer
        image: example.org/gpt2-train:1.0
        command: [deepspeed, run_clm.py, --deepspeed, /etc/autotune/ds_config.json]
)";

AutotuneJob decodedJob() {
  auto job = autotune::api::decodeJobYaml(kJob);
  EXPECT_TRUE(job.has_value());
  return job.value_or(AutotuneJob{});
}

const AutotuneJob& job() {
  static const AutotuneJob kJob = decodedJob();
  return kJob;
}

// The Pod of trial z1_gas1_tmbspg3 as the controller creates it, as the API server returns it
// before the scheduler has looked at it.
json createdPod(int attempt = 0) {
  json pod = trialPod(job(), makeFastTrial(describeSpace(job().spec), 1, 3, 1),
                      {attempt, 0, std::nullopt});
  pod["metadata"]["creationTimestamp"] = kCreated;
  pod["status"] = {{"phase", "Pending"}};
  return pod;
}

json unschedulablePod() {
  json pod = createdPod();
  pod["status"]["conditions"] = json::parse(R"([{"type": "PodScheduled", "status": "False",
      "reason": "Unschedulable",
      "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}])");
  return pod;
}

json boundPod(json pod = createdPod()) {
  pod["spec"]["nodeName"] = "gpu-node-1";
  pod["status"]["startTime"] = kStarted;
  pod["status"]["conditions"] = json::parse(R"([{"type": "PodScheduled", "status": "True"}])");
  return pod;
}

json withTrainerState(json pod, const std::string& phase, json state) {
  pod["status"]["phase"] = phase;
  pod["status"]["containerStatuses"] = {{{"name", "trainer"}, {"state", std::move(state)}}};
  return pod;
}

json runningPod(json pod = createdPod()) {
  return withTrainerState(boundPod(std::move(pod)), "Running",
                          {{"running", {{"startedAt", kContainerStarted}}}});
}

json terminatedPod(int exitCode, const std::string& reason, std::string_view message,
                   json pod = createdPod()) {
  json terminated = {{"exitCode", exitCode},
                     {"reason", reason},
                     {"startedAt", kContainerStarted},
                     {"finishedAt", kContainerFinished}};
  if (!message.empty()) {
    terminated["message"] = message;
  }
  return withTrainerState(boundPod(std::move(pod)), exitCode == 0 ? "Succeeded" : "Failed",
                          {{"terminated", std::move(terminated)}});
}

TrialRunState observed(const json& pod, const NodeNames& goneNodes = {}) {
  auto state = readTrialPod(decodePod(pod).value(), job().spec, goneNodes);
  EXPECT_TRUE(state.has_value()) << state.error();
  return state.value_or(TrialRunState{});
}

// --- RFC 3339 ------------------------------------------------------------------------------------

TEST(Rfc3339, TheApiServersTimesRoundTrip) {
  const Timestamp time = at("2026-11-22T12:00:05Z");
  EXPECT_EQ(std::chrono::system_clock::to_time_t(time), 1795348805);
  EXPECT_EQ(formatTime(time), "2026-11-22T12:00:05Z");
}

TEST(Rfc3339, FractionsAndOffsetsAreUnderstood) {
  EXPECT_EQ(at("2026-11-22T12:00:05.250Z") - at("2026-11-22T12:00:05Z"),
            std::chrono::milliseconds(250));
  EXPECT_EQ(formatTime(at("2026-11-22T12:00:05.250Z")), "2026-11-22T12:00:05.250Z");
  EXPECT_EQ(at("2026-11-22T12:00:05.123456789Z") - at("2026-11-22T12:00:05Z"),
            std::chrono::nanoseconds(123456789));
  EXPECT_EQ(at("2026-11-22T13:30:05+01:30"), at("2026-11-22T12:00:05Z"));
  EXPECT_EQ(at("2026-11-22T07:00:05-05:00"), at("2026-11-22T12:00:05Z"));
  EXPECT_EQ(formatTime(at("2024-02-29T23:59:59Z")), "2024-02-29T23:59:59Z");
  EXPECT_EQ(formatTime(at("1999-12-31T23:59:59z")), "1999-12-31T23:59:59Z");
}

TEST(Rfc3339, TheFirstAndLastTimesAcceptedAreASpanApartThatCanBeCounted) {
  const auto span = at("2199-12-31T23:59:59Z") - at("1970-01-01T00:00:00Z");
  EXPECT_GT(span, std::chrono::hours(24 * 365 * 229));
  EXPECT_LT(at("1970-01-01T00:00:00Z") - at("2199-12-31T23:59:59Z"), std::chrono::seconds(0));
}

TEST(Rfc3339, AnythingElseIsNotATime) {
  for (const std::string_view text :
       {"", "2026-11-22", "2026-11-22T12:00:05", "2026-11-22 12:00:05Z", "2026-13-01T00:00:00Z",
        "2026-02-30T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T12:60:00Z",
        "2026-11-22T12:00:05.Z", "2026-11-22T12:00:05+0100", "2026-11-22T12:00:05ZZ",
        "20x6-11-22T12:00:05Z", "2026-+1-22T12:00:05Z",
        // Well formed, but before the epoch or so late that a span from now would overflow.
        "1013-01-02T03:04:06Z", "1681-01-02T03:04:06Z", "1969-12-31T23:59:59Z",
        "1970-01-01T00:30:00+01:00", "2200-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}) {
    EXPECT_FALSE(parseTime(text).has_value()) << text;
  }
}

// --- observe
// ---------------------------------------------------------------------------------------

TEST(ObserveTrialPod, ThePodNamesItsTrialSpaceAndAttempt) {
  const TrialRunState state = observed(createdPod(1));
  EXPECT_EQ(state.run.name, "gpt2-large-z1-gas1-tmbspg3-r1");
  EXPECT_EQ(state.trialName, "z1_gas1_tmbspg3");
  EXPECT_EQ(state.space, "z1");
  EXPECT_EQ(state.attempt, 1);
  EXPECT_EQ(state.created, at(kCreated));
}

TEST(ObserveTrialPod, APodWithoutItsTrialNameIsAnError) {
  json pod = createdPod();
  pod["metadata"]["annotations"].erase("autotune.io/trial-name");
  const auto state = readTrialPod(decodePod(pod).value(), job().spec);
  ASSERT_FALSE(state.has_value());
  EXPECT_EQ(state.error(),
            "pod gpt2-large-z1-gas1-tmbspg3 has no autotune.io/trial-name annotation");
}

// GPUs other workloads hold: the trial is queued, in the scheduler's words, since it was made.
TEST(ObserveTrialPod, AnUnschedulableTrialIsQueuedSinceItWasCreated) {
  const TrialRunState state = observed(unschedulablePod());
  EXPECT_EQ(state.phase, Phase::kQueued);
  EXPECT_EQ(state.message, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.");
  EXPECT_EQ(state.created, at(kCreated));
  EXPECT_FALSE(state.scheduledAt.has_value());
  EXPECT_FALSE(state.started.has_value());
}

TEST(ObserveTrialPod, ANewPodIsQueuedForTheScheduler) {
  const TrialRunState state = observed(createdPod());
  EXPECT_EQ(state.phase, Phase::kQueued);
  EXPECT_EQ(state.message, "waiting for the scheduler");
}

// Kueue's admission gate, or any other: queued, naming the gates.
TEST(ObserveTrialPod, APodHeldByASchedulingGateIsQueuedNamingIt) {
  json pod = createdPod();
  pod["spec"]["schedulingGates"] = json::parse(R"([{"name": "kueue.x-k8s.io/admission"}])");
  pod["status"]["conditions"] = json::parse(R"([{"type": "PodScheduled", "status": "False",
      "reason": "SchedulingGated", "message": "Scheduling is blocked due to non-empty scheduling gates"}])");
  const TrialRunState state = observed(pod);
  EXPECT_EQ(state.phase, Phase::kQueued);
  EXPECT_EQ(state.message, "held by scheduling gates: kueue.x-k8s.io/admission");
}

TEST(ObserveTrialPod, ABoundPodPullingItsImageIsPendingAndStarted) {
  json pod = withTrainerState(
      boundPod(), "Pending",
      {{"waiting", {{"reason", "ImagePullBackOff"}, {"message", "Back-off pulling image"}}}});
  const TrialRunState state = observed(pod);
  EXPECT_EQ(state.phase, Phase::kPending);
  EXPECT_TRUE(state.scheduledAt.has_value());
  EXPECT_EQ(state.started, at(kStarted));
  EXPECT_EQ(state.message, "ImagePullBackOff: Back-off pulling image");
}

TEST(ObserveTrialPod, ARunningTrialStartedWhenTheKubeletTookIt) {
  const TrialRunState state = observed(runningPod());
  EXPECT_EQ(state.phase, Phase::kRunning);
  EXPECT_TRUE(state.scheduledAt.has_value());
  EXPECT_EQ(state.started, at(kStarted));
}

TEST(ObserveTrialPod, ExitZeroGivesTheTerminationMessageAsMetrics) {
  const TrialRunState state = observed(terminatedPod(0, "Completed", kMetrics));
  EXPECT_EQ(state.phase, Phase::kFinished);
  EXPECT_EQ(state.exit.exitCode, 0);
  EXPECT_EQ(state.exit.metrics, std::string(kMetrics));
  EXPECT_TRUE(state.exit.message.empty());
  EXPECT_EQ(state.containerStarted, at(kContainerStarted));
  EXPECT_EQ(state.containerFinished, at(kContainerFinished));
}

TEST(ObserveTrialPod, ExitZeroWithoutAMessageHasNoMetrics) {
  const TrialRunState state = observed(terminatedPod(0, "Completed", ""));
  EXPECT_EQ(state.phase, Phase::kFinished);
  EXPECT_FALSE(state.exit.metrics.has_value());
}

TEST(ObserveTrialPod, AFailedExitGivesTheTerminationMessageAsTheLogTail) {
  const TrialRunState state = observed(terminatedPod(1, "Error", kCudaOutOfMemory));
  EXPECT_EQ(state.phase, Phase::kFinished);
  EXPECT_EQ(state.exit.exitCode, 1);
  EXPECT_FALSE(state.exit.metrics.has_value());
  EXPECT_NE(state.exit.message.find("CUDA out of memory"), std::string::npos);
}

TEST(ObserveTrialPod, OomKilledIsReadFromTheContainersReason) {
  const TrialRunState state = observed(terminatedPod(137, "OOMKilled", ""));
  EXPECT_EQ(state.phase, Phase::kFinished);
  EXPECT_TRUE(state.exit.oomKilled);
}

TEST(ObserveTrialPod, ThePrimaryContainerDecidesNotASidecar) {
  json pod = runningPod();
  pod["status"]["containerStatuses"].push_back(json::parse(
      R"({"name": "log-shipper", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}})"));
  EXPECT_EQ(observed(pod).phase, Phase::kRunning);
}

// A trial Pod the kubelet stopped, saying why in the Pod's status.
json stoppedByTheKubelet(const std::string& reason, const std::string& message) {
  json pod = terminatedPod(137, "Error", "");
  pod["status"]["reason"] = reason;
  pod["status"]["message"] = message;
  return pod;
}

TEST(ObserveTrialPod, AnEvictedTrialIsLost) {
  const TrialRunState state =
      observed(stoppedByTheKubelet("Evicted", "The node was low on resource: memory."));
  EXPECT_EQ(state.phase, Phase::kLost);
  EXPECT_EQ(state.message, "Evicted: The node was low on resource: memory.");
}

json disrupted(const std::string& type, const std::string& reason) {
  json pod = runningPod();
  pod["status"]["conditions"].push_back(
      {{"type", type}, {"status", "True"}, {"reason", reason}, {"message", "it says why"}});
  return pod;
}

// A higher priority, a drain or a queueing system preempting the trial is nothing its config
// did; the node running short of memory, a taint, or Kueue evicting it for any other reason than
// preemption may be.
TEST(ObserveTrialPod, APreemptedOrDrainedTrialIsLostAsPreempted) {
  for (const auto& [type, reason] : std::vector<std::pair<std::string, std::string>>{
           {"DisruptionTarget", "PreemptionByScheduler"},
           {"DisruptionTarget", "EvictionByEvictionAPI"},
           {"TerminationTarget", "WorkloadEvictedDueToPreempted"},
           {"TerminationTarget", "StoppedByKueue"}}) {
    const TrialRunState state = observed(disrupted(type, reason));
    EXPECT_EQ(state.phase, Phase::kLost) << reason;
    EXPECT_TRUE(state.preempted) << reason;
    EXPECT_EQ(state.message, reason + ": it says why");
  }
  for (const std::string reason : {"TerminationByKubelet", "DeletionByTaintManager"}) {
    const TrialRunState state = observed(disrupted("DisruptionTarget", reason));
    EXPECT_EQ(state.phase, Phase::kLost) << reason;
    EXPECT_FALSE(state.preempted) << reason;
  }
  // An image that cannot start under waitForPodsReady is evicted for ever: it spends attempts.
  for (const std::string reason :
       {"WorkloadEvictedDueToPodsReadyTimeout", "WorkloadEvictedDueToAdmissionCheck",
        "WorkloadEvictedDueToDeactivated", "WorkloadEvictedDueToLocalQueueStopped"}) {
    const TrialRunState state = observed(disrupted("TerminationTarget", reason));
    EXPECT_EQ(state.phase, Phase::kLost) << reason;
    EXPECT_FALSE(state.preempted) << reason;
    EXPECT_EQ(state.message, reason + ": it says why");
  }
  // Kueue stopping a Pod whose Workload was deleted is no preemption.
  const TrialRunState deleted = observed(disrupted("TerminationTarget", "WorkloadDeleted"));
  EXPECT_EQ(deleted.phase, Phase::kLost);
  EXPECT_FALSE(deleted.preempted);
}

TEST(ObserveTrialPod, ATrialOnALostNodeIsLost) {
  json nodeLost = runningPod();
  nodeLost["status"]["reason"] = "NodeLost";
  EXPECT_EQ(observed(nodeLost).phase, Phase::kLost);

  json unknown = runningPod();
  unknown["status"]["phase"] = "Unknown";
  EXPECT_EQ(observed(unknown).phase, Phase::kLost);

  const TrialRunState gone = observed(runningPod(), NodeNames{"gpu-node-1"});
  EXPECT_EQ(gone.phase, Phase::kLost);
  EXPECT_EQ(gone.message, "node gpu-node-1 is gone");
  EXPECT_EQ(observed(runningPod(), NodeNames{"gpu-node-2"}).phase, Phase::kRunning);
  EXPECT_EQ(observed(runningPod()).phase, Phase::kRunning);
}

TEST(ObserveTrialPod, APodDeletedBySomeoneElseWhileRunningIsLost) {
  json pod = runningPod();
  pod["metadata"]["deletionTimestamp"] = "2026-11-22T12:02:30Z";
  pod["metadata"]["deletionGracePeriodSeconds"] = 30;
  const TrialRunState state = observed(pod);
  EXPECT_EQ(state.phase, Phase::kLost);
  EXPECT_EQ(state.message, "deleted before the trial ended");

  json killed = terminatedPod(143, "Error", "");
  killed["metadata"]["deletionTimestamp"] = "2026-11-22T12:03:50Z";
  killed["metadata"]["deletionGracePeriodSeconds"] = 30;
  EXPECT_EQ(observed(killed).phase, Phase::kLost);
}

TEST(ObserveTrialPod, ATrialThatEndedBeforeItsPodWasDeletedKeepsItsResult) {
  json succeeded = terminatedPod(0, "Completed", kMetrics);
  succeeded["metadata"]["deletionTimestamp"] = "2026-11-22T12:03:40Z";
  succeeded["metadata"]["deletionGracePeriodSeconds"] = 30;
  EXPECT_EQ(observed(succeeded).phase, Phase::kFinished);

  json failed = terminatedPod(1, "Error", "ValueError: bad batch size");
  failed["metadata"]["deletionTimestamp"] = "2026-11-22T12:10:00Z";
  failed["metadata"]["deletionGracePeriodSeconds"] = 30;
  EXPECT_EQ(observed(failed).phase, Phase::kFinished);
}

// No API server sets such a grace period; read as at most a year, it cannot overflow the clock.
TEST(ObserveTrialPod, AGracePeriodOfAnyIntegerIsReadWithinAYear) {
  json pod = terminatedPod(1, "Error", "ValueError: bad batch size");
  pod["metadata"]["deletionTimestamp"] = "2026-11-22T12:10:00Z";
  pod["metadata"]["deletionGracePeriodSeconds"] = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(observed(pod).phase, Phase::kLost);
  pod["metadata"]["deletionGracePeriodSeconds"] = std::numeric_limits<std::int64_t>::min();
  EXPECT_EQ(observed(pod).phase, Phase::kFinished);
}

TEST(ObserveTrialPod, APodTheKubeletRefusedIsLost) {
  json pod = createdPod();
  pod["spec"]["nodeName"] = "gpu-node-1";
  pod["status"] = json::parse(R"({"phase": "Failed", "reason": "UnexpectedAdmissionError",
      "message": "Allocate failed due to no healthy devices present"})");
  const TrialRunState state = observed(pod);
  EXPECT_EQ(state.phase, Phase::kLost);
  EXPECT_EQ(state.message,
            "Failed without running the trial: UnexpectedAdmissionError: Allocate failed due to "
            "no healthy devices present");
}

TEST(ObserveTrialPod, AContainerWhoseStatusTheKubeletLostIsLost) {
  EXPECT_EQ(observed(terminatedPod(137, "ContainerStatusUnknown", "")).phase, Phase::kLost);
}

// --- deadlines and conclusions -------------------------------------------------------------------

// The same trial's container measured a global batch of 512: not the trial's config.
TEST(ConcludeTrial, MetricsOfAnotherGlobalBatchAreConfigNotApplied) {
  const auto conclusion = resultOf(
      observed(terminatedPod(0, "Completed", R"({"throughput": 87.3, "latency": 5865000.0})")),
      job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kConfigNotApplied);
  EXPECT_NE(conclusion->record.reason.find("a global batch of 512"), std::string::npos)
      << conclusion->record.reason;
  EXPECT_NE(conclusion->record.reason.find("not the 48"), std::string::npos);
}

TEST(ConcludeTrial, SucceededWithTheMetricItsContainerWrote) {
  const auto conclusion = resultOf(observed(terminatedPod(0, "Completed", kMetrics)), job().spec,
                                   at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  const auto& record = conclusion->record;
  EXPECT_EQ(record.name, "z1_gas1_tmbspg3");
  EXPECT_EQ(record.space, "z1");
  EXPECT_EQ(record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(record.value, 87.3);
  EXPECT_EQ(record.reason, "");
  EXPECT_EQ(record.startTime, kContainerStarted);
  EXPECT_DOUBLE_EQ(record.durationSeconds, 200);
  EXPECT_EQ(record.metrics, autotune::tuning::readMetrics(kMetrics));
  EXPECT_FALSE(record.metrics.empty());
  EXPECT_FALSE(conclusion->measured.has_value());
}

TEST(ConcludeTrial, ExitZeroWithoutMetricsIsMetricsUnavailable) {
  const auto conclusion =
      resultOf(observed(terminatedPod(0, "Completed", "")), job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kMetricsUnavailable);
  EXPECT_FALSE(conclusion->record.value.has_value());
  EXPECT_EQ(conclusion->record.reason, "exited 0 without writing its metrics file");
}

TEST(ConcludeTrial, OomKilledIsOom) {
  const auto conclusion =
      resultOf(observed(terminatedPod(137, "OOMKilled", "")), job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kOOM);
  EXPECT_EQ(conclusion->record.reason, "OOMKilled");
}

TEST(ConcludeTrial, ACudaOutOfMemoryErrorWithExitOneIsOom) {
  const auto conclusion = resultOf(observed(terminatedPod(1, "Error", kCudaOutOfMemory)),
                                   job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kOOM);
  EXPECT_NE(conclusion->record.reason.find("CUDA out of memory"), std::string::npos);
}

// The log tail as one line, as reasons are shown in `kubectl describe` and in tables.
TEST(ConcludeTrial, AnyOtherFailureIsFailedWithItsLogTailOnOneLine) {
  const auto conclusion =
      resultOf(observed(terminatedPod(1, "Error", "Traceback:\nValueError: bad batch size\n")),
               job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kFailed);
  EXPECT_EQ(conclusion->record.reason, "exited 1: Traceback: ValueError: bad batch size");
}

TEST(ConcludeTrial, AContainerThatCouldNotRunIsFailedWithTheKubeletsReason) {
  const auto conclusion =
      resultOf(observed(terminatedPod(128, "StartError", "")), job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kFailed);
  EXPECT_EQ(conclusion->record.reason, "exited 128: StartError");
}

TEST(ConcludeTrial, TheProfilingTrialGivesTheMeasuredModel) {
  json pod = trialPod(job(), makeProfileTrial(describeSpace(job().spec)));
  pod["metadata"]["creationTimestamp"] = kCreated;
  pod = terminatedPod(0, "Completed",
                      R"({"num_params": 774030080, "activation_mem_per_gpu": 9600000000})", pod);
  const auto conclusion = resultOf(observed(pod), job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.name, "profile_model_info");
  EXPECT_EQ(conclusion->record.outcome, Outcome::kSucceeded);
  ASSERT_TRUE(conclusion->measured.has_value());
  EXPECT_EQ(conclusion->measured->numParameters, 774030080);
  EXPECT_EQ(conclusion->measured->activationMemoryPerSample, 9600000000);
}

// Waiting for GPUs is not failing: a trial no node takes waits as long as it takes, never an
// attempt nor an outcome, unless spec.queueTimeout bounds it.
TEST(ConcludeTrial, AQueuedTrialWaitsAsLongAsItTakesUnlessAQueueTimeoutBoundsIt) {
  const TrialRunState state = observed(unschedulablePod());
  EXPECT_FALSE(deadline(state, job().spec).has_value());
  EXPECT_FALSE(notMeasured(state, job().spec, at(kCreated) + minutes(600)).has_value());
  EXPECT_FALSE(queueTimedOut(state, job().spec, at(kCreated) + minutes(600)).has_value());
  EXPECT_FALSE(resultOf(state, job().spec, at(kCreated) + minutes(600)).has_value());

  autotune::api::Spec bounded = job().spec;
  bounded.queueTimeout = autotune::api::Duration::parse("2h").value();
  EXPECT_EQ(deadline(state, bounded), at(kCreated) + minutes(120));
  EXPECT_FALSE(queueTimedOut(state, bounded, at(kCreated) + minutes(119)).has_value());
  const auto why = queueTimedOut(state, bounded, at(kCreated) + minutes(120));
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why,
            "queued longer than spec.queueTimeout (2h): 0/4 nodes are available: 4 "
            "Insufficient nvidia.com/gpu.");
  EXPECT_FALSE(resultOf(state, bounded, at(kCreated) + minutes(120)).has_value());
}

// schedulingTimeout counts from when the trial got its node, not from a queue that may last
// hours.
TEST(ConcludeTrial, TheSchedulingTimeoutCountsFromTheBinding) {
  json pod = withTrainerState(boundPod(), "Pending",
                              {{"waiting", {{"reason", "ErrImagePull"}, {"message", "no"}}}});
  pod["status"]["conditions"][0]["lastTransitionTime"] = "2026-11-22T15:00:00Z";
  const TrialRunState state = observed(pod);
  EXPECT_EQ(deadline(state, job().spec), at("2026-11-22T15:00:00Z") + minutes(15));
  EXPECT_FALSE(notMeasured(state, job().spec, at("2026-11-22T15:14:00Z")).has_value());
  EXPECT_TRUE(notMeasured(state, job().spec, at("2026-11-22T15:15:00Z")).has_value());
}

TEST(ConcludeTrial, TheTrialTimeoutRunsFromWhenTheKubeletTookThePod) {
  const TrialRunState state = observed(runningPod());
  EXPECT_EQ(deadline(state, job().spec), at(kStarted) + minutes(30));
  EXPECT_FALSE(resultOf(state, job().spec, at(kStarted) + minutes(29)).has_value());

  const auto conclusion = resultOf(state, job().spec, at(kStarted) + minutes(31));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kTimedOut);
  EXPECT_EQ(conclusion->record.reason, "ran longer than spec.trialTimeout");
  EXPECT_EQ(conclusion->record.startTime, kStarted);
  EXPECT_DOUBLE_EQ(conclusion->record.durationSeconds, 31 * 60);
}

// An image that cannot be pulled, or a container that cannot be made, gives its GPUs back at
// schedulingTimeout, not at trialTimeout, and is not measured: never TimedOut.
TEST(ConcludeTrial, AContainerThatCannotStartIsNotMeasuredAfterTheSchedulingTimeout) {
  for (const std::string reason : {"ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                                   "CreateContainerConfigError", "CreateContainerError"}) {
    json pod = withTrainerState(boundPod(), "Pending",
                                {{"waiting", {{"reason", reason}, {"message", "it says why"}}}});
    const TrialRunState state = observed(pod);
    EXPECT_TRUE(containerCannotStart(state)) << reason;
    EXPECT_EQ(deadline(state, job().spec), at(kCreated) + minutes(15)) << reason;
    EXPECT_FALSE(resultOf(state, job().spec, at(kStarted) + minutes(30)).has_value()) << reason;
    const auto why = notMeasured(state, job().spec, at(kCreated) + minutes(15));
    ASSERT_TRUE(why.has_value()) << reason;
    EXPECT_EQ(*why, "its container could not start within spec.schedulingTimeout: " + reason +
                        ": it says why");
  }
}

// A container still being created (a large image pulling) is in its trial time, as before.
TEST(ConcludeTrial, AContainerBeingCreatedIsNotGivenUp) {
  json pod =
      withTrainerState(boundPod(), "Pending", {{"waiting", {{"reason", "ContainerCreating"}}}});
  const TrialRunState state = observed(pod);
  EXPECT_FALSE(containerCannotStart(state));
  EXPECT_EQ(deadline(state, job().spec), at(kStarted) + minutes(30));
  EXPECT_FALSE(notMeasured(state, job().spec, at(kCreated) + minutes(20)).has_value());
}

TEST(ConcludeTrial, FinishedAndLostTrialsHaveNoDeadline) {
  EXPECT_FALSE(deadline(observed(terminatedPod(0, "Completed", kMetrics)), job().spec));
  json evicted = runningPod();
  evicted["status"]["reason"] = "Evicted";
  EXPECT_FALSE(deadline(observed(evicted), job().spec));
}

TEST(ConcludeTrial, ALostTrialIsRelaunchedTwiceAndThenCountsAsFailed) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    json pod = runningPod(createdPod(attempt));
    pod["status"]["reason"] = "Evicted";
    const TrialRunState state = observed(pod);
    EXPECT_TRUE(shouldRelaunch(state)) << attempt;
    EXPECT_FALSE(resultOf(state, job().spec, at(kStarted) + minutes(90)).has_value()) << attempt;
  }
  json pod = runningPod(createdPod(2));
  pod["status"]["reason"] = "Evicted";
  pod["status"]["message"] = "The node was low on resource: memory.";
  const TrialRunState state = observed(pod);
  EXPECT_FALSE(shouldRelaunch(state));
  const auto conclusion = resultOf(state, job().spec, at(kStarted) + minutes(5));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kFailed);
  EXPECT_EQ(conclusion->record.reason,
            "lost on 3 attempts, last: Evicted: The node was low on resource: memory.");
}

// Preemptions spend no relaunch: a trial preempted on its third attempt runs a fourth, and its
// budget counts only the attempts lost otherwise.
TEST(ConcludeTrial, APreemptedTrialIsAlwaysRelaunchedAndSpendsNoAttempt) {
  json pod = createdPod(2);
  pod["metadata"]["annotations"]["autotune.io/preemptions"] = "2";
  json preempted = runningPod(pod);
  preempted["status"]["conditions"].push_back(json::parse(
      R"({"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"})"));
  const TrialRunState state = observed(preempted);
  EXPECT_EQ(state.preemptions, 2);
  EXPECT_EQ(state.relaunchesSpent(), 0);
  EXPECT_TRUE(shouldRelaunch(state));

  json evicted = runningPod(pod);
  evicted["status"]["reason"] = "Evicted";
  const TrialRunState lost = observed(evicted);
  EXPECT_FALSE(lost.preempted);
  EXPECT_TRUE(shouldRelaunch(lost));  // 2 of its 3 attempts were preemptions
}

// Preemptions spend no attempt, but are bounded: the eleventh fails the trial, saying so.
TEST(ConcludeTrial, ATrialPreemptedMoreThanTenTimesFails) {
  const auto preemptedAfter = [](int preemptions) {
    json pod = createdPod(preemptions);
    pod["metadata"]["annotations"]["autotune.io/preemptions"] = std::to_string(preemptions);
    json preempted = runningPod(pod);
    preempted["status"]["conditions"].push_back(
        json::parse(R"({"type": "TerminationTarget", "status": "True",
                        "reason": "WorkloadEvictedDueToPreempted", "message": "for prod"})"));
    return observed(preempted);
  };
  const TrialRunState tenth = preemptedAfter(9);
  EXPECT_TRUE(shouldRelaunch(tenth));
  EXPECT_FALSE(resultOf(tenth, job().spec, at(kContainerFinished)).has_value());

  const TrialRunState eleventh = preemptedAfter(10);
  EXPECT_FALSE(shouldRelaunch(eleventh));
  const auto result = resultOf(eleventh, job().spec, at(kContainerFinished));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->record.outcome, Outcome::kFailed);
  EXPECT_EQ(result->record.reason,
            "preempted 11 times, last: WorkloadEvictedDueToPreempted: for prod");
}

// A trial the kubelet stopped at its activeDeadlineSeconds, while no operator ran to stop it at
// its timeout, timed out: it is no crash of its config's.
TEST(ConcludeTrial, ATrialTheKubeletsDeadlineStoppedTimedOut) {
  const TrialRunState state = observed(stoppedByTheKubelet(
      "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"));
  EXPECT_EQ(state.phase, Phase::kFinished);
  const auto result = resultOf(state, job().spec, at(kContainerFinished));
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->record.outcome, Outcome::kTimedOut);
  EXPECT_EQ(observed(terminatedPod(137, "Error", "")).exit.timedOut, false);
}

TEST(ConcludeTrial, OnlyLostTrialsAreRelaunched) {
  EXPECT_FALSE(shouldRelaunch(observed(runningPod())));
  EXPECT_FALSE(shouldRelaunch(observed(terminatedPod(1, "Error", ""))));
}

// --- multi-node trials ---------------------------------------------------------------------------

// Rank `index` of a multi-node trial: the Pod as the Job controller makes it from the Job's
// template.
json rankOf(json pod, int index) {
  const std::string job = "gpt2-large-z1-gas1-tmbspg3";
  pod["metadata"]["name"] = job + "-" + std::to_string(index) + "-x7k2q";
  pod["metadata"]["ownerReferences"] = json::parse(
      R"([{"apiVersion": "batch/v1", "kind": "Job", "name": "gpt2-large-z1-gas1-tmbspg3",
           "uid": "0b5e", "controller": true}])");
  pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
      std::to_string(index);
  return pod;
}

// The example job on two nodes.
const autotune::api::Spec& twoNodeSpec() {
  static const autotune::api::Spec kSpec = [] {
    autotune::api::Spec spec = job().spec;
    spec.resources.nodesPerTrial = 2;
    return spec;
  }();
  return kSpec;
}

TrialRunState combined(const std::vector<json>& pods) {
  std::vector<TrialRunState> ranks;
  for (const auto& pod : pods) {
    ranks.push_back(observed(pod));
  }
  return combineRanks(ranks, twoNodeSpec());
}

TEST(MultiNodeTrial, ARankPodNamesItsJobTrialAndRank) {
  const auto pod = decodePod(rankOf(createdPod(), 1)).value();
  EXPECT_TRUE(pod.ownerJobUid.empty()) << "its Job controls it: Cluster::ownerOf follows that";
  EXPECT_EQ(pod.batchJob, "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_EQ(pod.batchJobUid, "0b5e");
  EXPECT_EQ(pod.completionIndex, "1");
  EXPECT_EQ(observed(rankOf(createdPod(), 1)).trialName, "z1_gas1_tmbspg3");
}

TEST(MultiNodeTrial, RankZerosMetricsAreTheTrialsOnceItSucceeds) {
  const TrialRunState state =
      combined({rankOf(terminatedPod(0, "Completed", kMetrics), 0), rankOf(runningPod(), 1)});
  EXPECT_EQ(state.phase, Phase::kFinished);
  EXPECT_EQ(state.run.name, "gpt2-large-z1-gas1-tmbspg3");
  const auto conclusion = resultOf(state, job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(conclusion->record.value, 87.3);
}

TEST(MultiNodeTrial, AnyRankOutOfMemoryMakesTheTrialOom) {
  // Rank 0 failed too, as the collective with a dead peer does, and ended first.
  json rankZero = rankOf(terminatedPod(1, "Error", "RuntimeError: Connection closed by peer"), 0);
  rankZero["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] =
      "2026-11-22T12:01:00Z";
  const TrialRunState state =
      combined({rankZero, rankOf(terminatedPod(1, "Error", kCudaOutOfMemory), 1)});
  const auto conclusion = resultOf(state, job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kOOM);
  EXPECT_EQ(state.run.name, "gpt2-large-z1-gas1-tmbspg3");
}

TEST(MultiNodeTrial, AnotherFailureIsTheFirstRankToFailWithItsMessage) {
  json later = rankOf(terminatedPod(137, "Error", "Terminated by the Job controller"), 0);
  later["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] =
      "2026-11-22T12:04:00Z";
  const TrialRunState state =
      combined({later, rankOf(terminatedPod(1, "Error", "ValueError: bad config"), 1)});
  const auto conclusion = resultOf(state, job().spec, at(kContainerFinished));
  ASSERT_TRUE(conclusion.has_value());
  EXPECT_EQ(conclusion->record.outcome, Outcome::kFailed);
  EXPECT_NE(conclusion->record.reason.find("ValueError: bad config"), std::string::npos);
}

TEST(MultiNodeTrial, ARankThatEndedCleanlyLeavesTheTrialRunningUntilRankZeroEnds) {
  const TrialRunState state =
      combined({rankOf(runningPod(), 0), rankOf(terminatedPod(0, "Completed", ""), 1)});
  EXPECT_EQ(state.phase, Phase::kRunning);
  EXPECT_FALSE(resultOf(state, job().spec, at(kContainerFinished)).has_value());
}

TEST(MultiNodeTrial, ALostRankLosesTheWholeTrial) {
  json evicted = rankOf(boundPod(), 1);
  evicted["status"]["phase"] = "Failed";
  evicted["status"]["reason"] = "Evicted";
  evicted["status"]["message"] = "The node was low on resource: memory.";
  const TrialRunState state = combined({rankOf(runningPod(), 0), evicted});
  EXPECT_EQ(state.phase, Phase::kLost);
  EXPECT_TRUE(shouldRelaunch(state));
  EXPECT_NE(state.message.find("gpt2-large-z1-gas1-tmbspg3-1-x7k2q"), std::string::npos);
}

TEST(MultiNodeTrial, RunsOnlyOnceEveryRankRunsAndFromTheLastStart) {
  json late = rankOf(runningPod(), 1);
  late["status"]["startTime"] = "2026-11-22T12:00:09Z";
  const TrialRunState running = combined({rankOf(runningPod(), 0), late});
  EXPECT_EQ(running.phase, Phase::kRunning);
  EXPECT_EQ(running.started, at("2026-11-22T12:00:09Z"));
  EXPECT_EQ(deadline(running, job().spec), at("2026-11-22T12:00:09Z") + minutes(30));

  const TrialRunState one = combineRanks({observed(rankOf(runningPod(), 0))}, twoNodeSpec());
  EXPECT_EQ(one.phase, Phase::kPending);
  EXPECT_EQ(one.message, "1 of its 2 Pods made so far");
}

// A rank without a node makes the whole trial queued: no deadline, never an attempt.
TEST(MultiNodeTrial, APartlyPlacedTrialIsQueued) {
  const TrialRunState state = combined({rankOf(runningPod(), 0), rankOf(unschedulablePod(), 1)});
  EXPECT_EQ(state.phase, Phase::kQueued);
  EXPECT_NE(state.message.find("Insufficient nvidia.com/gpu"), std::string::npos) << state.message;
  EXPECT_FALSE(deadline(state, job().spec).has_value());
  EXPECT_FALSE(notMeasured(state, job().spec, at(kCreated) + minutes(600)).has_value());
  EXPECT_FALSE(resultOf(state, job().spec, at(kCreated) + minutes(600)).has_value());
}

}  // namespace
