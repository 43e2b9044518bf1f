#pragma once
// What a trial's run says about the trial: queued for room (no node yet: GPUs other workloads
// hold, a scheduling gate), waiting on its node for its container, running, finished with an exit
// the trial protocol classifies, lost to something outside the trial (eviction, a node gone, a
// deletion the controller did not make), preempted (by a higher priority, a drain, a queueing
// system), or never started on its node (an image that cannot be pulled, a container that cannot
// be created). Queueing is not failing: it has no deadline but spec.queueTimeout. Lost, preempted
// and unstarted trials run again rather than being counted; an unstarted one is never an outcome
// of its config, and a preempted one spends none of its relaunches.

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "api/job.h"
#include "controller/objects/objects.h"
#include "controller/objects/trial_run.h"
#include "tuning/protocol.h"

namespace autotune::controller {

// A lost or unstarted trial is launched again at most this many times; then it counts as Failed.
// Preemptions are not counted.
inline constexpr int kMaxRelaunches = 2;
// A preempted trial is launched again as often, apart from those: a trial that a busy cluster
// preempts more often than that fails, saying so, rather than hold its job for ever.
inline constexpr int kMaxPreemptions = 10;

struct TrialRunState {
  enum class Phase {
    kQueued,       // not on a node yet: waiting for room, as long as it takes (queueTimeout)
    kPending,      // on its node, its containers not started yet
    kRunning,      // the primary container has not ended
    kFinished,     // the primary container ended: `exit` holds how
    kLost,         // the run is gone or going for reasons outside the trial: relaunch it
    kNotMeasured,  // it did not start within schedulingTimeout (notMeasured): relaunch it
  };
  Phase phase = Phase::kQueued;
  TrialRun run;            // the Pod, or a multi-node trial's batch Job
  std::string trialName;   // canonical, from the annotation autotune.io/trial-name
  std::string space;       // from the label autotune.io/space
  int attempt = 0;         // from the annotation autotune.io/attempt
  int preemptions = 0;     // of the earlier attempts, from autotune.io/preemptions
  bool preempted = false;  // kLost: by a higher priority, a drain or a queueing system
  // kQueued: held back for room (the scheduler cannot place it now, a scheduling gate holds it, a
  // queueing system suspends it), not merely yet to be looked at by the scheduler.
  bool heldBack = false;
  // kQueued, in a Kueue LocalQueue: its Workload is not admitted yet; `message` says why.
  bool awaitingAdmission = false;
  std::optional<Timestamp> created;  // metadata.creationTimestamp: queued since then
  // From autotune.io/wanted-since: wanted since then, before its run existed (its job waited for
  // room, or earlier attempts ran).
  std::optional<Timestamp> wantedSince;
  std::optional<Timestamp> scheduledAt;  // bound to its node (PodScheduled's transition)
  std::optional<Timestamp> started;      // status.startTime: the kubelet took the Pod
  // Why it waits (the scheduler's message, its scheduling gates, or the container's waiting
  // reason), or why it is lost.
  std::string message;
  std::string waitingReason;  // the primary container's, e.g. ErrImagePull
  // kFinished only: the primary container's exit. On exit 0 the termination message is the
  // metrics file (exit.metrics); otherwise it is the log tail (exit.message).
  tuning::TrialExit exit;
  std::optional<Timestamp> containerStarted;   // state.terminated.startedAt
  std::optional<Timestamp> containerFinished;  // state.terminated.finishedAt
  std::string node;                            // kFinished: the node it ran on
  std::string imageID;  // kFinished: the primary container's image, as the runtime names it
  // A multi-node trial's Pod: its batch Job (trialBatchJobName) and completion index.
  std::string batchJob;
  std::string batchJobUid;
  std::string rank;

  // The relaunches spent: attempts that were neither the first nor a preemption's.
  int relaunchesSpent() const { return attempt - preemptions; }
};

// Reads a trial Pod. `spec` names the primary container. A Pod bound to one of `goneNodes` is
// lost (Cluster::missingNodes says which nodes are gone). A Pod being deleted is lost unless its
// trial had ended by itself before the deletion: the controller deletes a trial's Pod only after
// recording the trial in status.results, so Pods of recorded trials are not to be observed at all.
// The error names a Pod that lacks the trial-name annotation (not made by trialPod).
tl::expected<TrialRunState, std::string> readTrialPod(const Pod& pod, const api::Spec& spec,
                                                      const NodeNames& goneNodes = {});

// A multi-node trial as one state, whose run is its batch Job, from the states of its Pods (of
// one attempt), of which there are spec.resources.nodesPerTrial once the Job controller has made
// them all:
// - a rank that ended otherwise than in success ends the trial as it did, one tuning::classify
//   finds out of memory first, else the first to end: the others fail with it or are stopped by
//   the Job controller;
// - else rank 0, which writes the metrics, ends it when it finishes;
// - else a lost rank loses it, to be run again whole (preempted if that rank was);
// - else it is queued while a rank has no node, pending while not every Pod is made yet (since the
//   first was, as the scheduling timeout goes) or a rank's container has not started, and runs
//   since the last of them started.
TrialRunState combineRanks(const std::vector<TrialRunState>& ranks, const api::Spec& spec);

// Whether the trial's container waits for something no retry of the kubelet's will bring: an
// image that cannot be pulled, or a ConfigMap, Secret or setting the container cannot be made with.
bool containerCannotStart(const TrialRunState& state);

// When a trial in flight runs out of time: a queued one at creationTimestamp + queueTimeout (none
// when unset); one on its node at its binding + schedulingTimeout until the kubelet takes the Pod
// or while its container cannot be created, else at status.startTime + trialTimeout. Nothing for
// finished, lost and unstarted trials.
std::optional<Timestamp> deadline(const TrialRunState& state, const api::Spec& spec);

// Why a trial on its node is given up at `now` without a measurement, if it is: its container
// could not be created within spec.schedulingTimeout (an image that cannot be pulled, a missing
// ConfigMap or Secret). None of that is the config's doing, so it runs again (shouldRelaunch),
// and the search never learns anything from it.
std::optional<std::string> notMeasured(const TrialRunState& state, const api::Spec& spec,
                                       Timestamp now);

// Why a queued trial has waited too long at `now`, if it has: spec.queueTimeout ran out.
std::optional<std::string> queueTimedOut(const TrialRunState& state, const api::Spec& spec,
                                         Timestamp now);

// Whether a lost or unstarted trial is to be launched again (as attempt + 1): always when it was
// preempted, else while it has relaunches left.
bool shouldRelaunch(const TrialRunState& state);

// Whether the run of a trial that ended may be deleted once the trial is recorded: always when
// it still runs (past its deadline) or was lost; when it finished, unless spec.cleanup is Keep.
bool removable(const TrialRunState& state, const api::Spec& spec);

// A trial's result, to write to status.results before its run is deleted: its record and, for
// the profiling trial, what it measured.
using TrialResult = tuning::RecordedExit;

// The result of a trial at `now`, if it has one:
// - finished: tuning::recordExit of its exit (the profiling trial's model info in `measured`),
//   started and lasting as its container did;
// - running past its trial timeout: TimedOut (the caller deletes the Pod after recording);
// - lost with no relaunch left: Failed, naming what happened to it. A lost trial may be the
//   config's doing: an offload that exhausts the node's memory gets its Pod evicted.
// Nothing while it is in flight, lost and to be relaunched, or not measured (notMeasured).
std::optional<TrialResult> resultOf(const TrialRunState& state, const api::Spec& spec,
                                    Timestamp now);

}  // namespace autotune::controller
