#pragma once
// What a trial's run says about the trial: still waiting for a node, running, finished with an exit
// the trial protocol classifies, lost to something outside the trial (eviction, a node gone, a
// deletion the controller did not make), or never started (no node for it, an image that cannot
// be pulled, a container that cannot be created). Lost and unstarted trials run again rather than
// being counted; an unstarted one is never an outcome of its config.

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "api/job.h"
#include "controller/objects.h"
#include "controller/trial_run.h"
#include "tuning/protocol.h"

namespace autotune::controller {

// A lost trial is launched again at most this many times; then it counts as Failed.
inline constexpr int kMaxRelaunches = 2;

struct TrialRunState {
  enum class Phase {
    kPending,      // not started: waiting for a node, or for its containers to start
    kRunning,      // the primary container has not ended
    kFinished,     // the primary container ended: `exit` holds how
    kLost,         // the Pod is gone or going for reasons outside the trial: relaunch it
    kNotMeasured,  // it did not start within schedulingTimeout (notMeasured): relaunch it
  };
  Phase phase = Phase::kPending;
  TrialRun run;                      // the Pod, or a multi-node trial's batch Job
  std::string trialName;             // canonical, from the annotation autotune.io/trial-name
  std::string space;                 // from the label autotune.io/space
  int attempt = 0;                   // from the annotation autotune.io/attempt
  std::optional<Timestamp> created;  // metadata.creationTimestamp: pending since then
  std::optional<Timestamp> started;  // status.startTime: the kubelet took the Pod
  bool scheduled = false;            // bound to a node
  bool unschedulable = false;        // the scheduler reported PodScheduled=False, Unschedulable
  // Why it waits (the scheduler's message, or the container's waiting reason), or why it is lost.
  std::string message;
  std::string waitingReason;  // the primary container's, e.g. ErrImagePull
  // kFinished only: the primary container's exit. On exit 0 the termination message is the
  // metrics file (exit.metrics); otherwise it is the log tail (exit.message).
  tuning::TrialExit exit;
  std::optional<Timestamp> containerStarted;   // state.terminated.startedAt
  std::optional<Timestamp> containerFinished;  // state.terminated.finishedAt
  // A multi-node trial's Pod: its batch Job (trialBatchJobName) and completion index.
  std::string batchJob;
  std::string rank;
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
// - else a lost rank loses it, to be run again whole;
// - else it runs once every rank runs, since the last of them started, and is pending until then,
//   since the first was created: a trial partly placed at spec.schedulingTimeout is not measured.
TrialRunState combineRanks(const std::vector<TrialRunState>& ranks, const api::Spec& spec);

// Whether the trial's container waits for something no retry of the kubelet's will bring: an
// image that cannot be pulled, or a ConfigMap, Secret or setting the container cannot be made with.
bool containerCannotStart(const TrialRunState& state);

// When a pending or running trial runs out of time: creationTimestamp + schedulingTimeout until
// the kubelet takes the Pod (a trial that cannot be scheduled does not start its trial timeout)
// or while its container cannot be created, else status.startTime + trialTimeout. Nothing for
// finished, lost and unstarted trials.
std::optional<Timestamp> deadline(const TrialRunState& state, const api::Spec& spec);

// Why a pending trial is given up at `now` without a measurement, if it is: it was not scheduled
// within spec.schedulingTimeout, or its container could not be created in that time (an image
// that cannot be pulled, a missing ConfigMap or Secret). None of that is the config's doing, so
// it runs again (shouldRelaunch), and the search never learns anything from it.
std::optional<std::string> notMeasured(const TrialRunState& state, const api::Spec& spec,
                                       Timestamp now);

// Whether a lost or unstarted trial is to be launched again (as attempt + 1).
bool shouldRelaunch(const TrialRunState& state);

// Whether the run of a trial that ended may be deleted once the trial is recorded: always when
// it still runs (past its deadline) or was lost; when it finished, unless spec.cleanup is Keep.
bool removable(const TrialRunState& state, const api::Spec& spec);

// A trial's result, to write to status.results before its run is deleted.
struct TrialResult {
  api::TrialRecord record;
  std::optional<api::MeasuredModel> measured;  // what the profiling trial measured
};

// The result of a trial at `now`, if it has one:
// - finished: tuning::classify of its exit (the profiling trial's model info in `measured`),
//   started and lasting as its container did;
// - running past its trial timeout: TimedOut (the caller deletes the Pod after recording);
// - lost with no relaunch left: Failed, naming what happened to it. A lost trial may be the
//   config's doing: an offload that exhausts the node's memory gets its Pod evicted.
// Nothing while it is in flight, lost and to be relaunched, or not measured (notMeasured).
std::optional<TrialResult> resultOf(const TrialRunState& state, const api::Spec& spec,
                                    Timestamp now);

}  // namespace autotune::controller
