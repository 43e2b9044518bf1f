#pragma once
// The first step of a reconcile: one job and what runs its trials, read from the
// cache into a Snapshot, each trial's state worked out once (trial_state.h). Pure: nothing here
// talks to the API server.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/job.h"
#include "controller/decision/trial_state.h"
#include "controller/objects/cluster_view.h"
#include "controller/objects/gpu_capacity.h"
#include "controller/objects/measurements.h"
#include "controller/objects/objects.h"
#include "controller/objects/trial_run.h"

namespace autotune::controller {

// A trial that ended since the status was last written, and its result.
struct Concluded {
  TrialRunState state;
  TrialResult result;
  // What its run ran on, when it finished on a node the cache holds: its result is then kept
  // beyond the job (measurements.h).
  std::optional<RanOn> ranOn;
};

// Why the output ConfigMap was not written: `reason` is OutputWriteFailed (the API refused or
// failed) or kOutputConflict (a ConfigMap of that name is not this job's).
inline constexpr std::string_view kOutputConflict = "OutputConflict";
struct OutputRefusal {
  std::string_view reason;
  // For kOutputConflict, who holds the name (holderOf); else what the API server said.
  std::string detail;
};

// How a refused create is taken: a ResourceQuota's refusal waits for quota; Pod Security, a
// policy, a webhook or an invalid object refuse the job's template for good; anything else (the
// server failing, the operator's own rights) is tried again. Told apart by apply, which reads the
// API server's error (refusalOf).
enum class Refusal { kQuota, kForGood, kTransient };

// A create of a trial's run that the API server refused: a quota, a policy, a webhook, or a
// failure on its side.
struct RefusedCreate {
  std::string trial;
  Refusal refusal = Refusal::kTransient;
  std::string message;  // the server's words
};

// The kept measurements that could stand for a job's trials (recall.h), read with the job: the
// ConfigMaps of its namespace made in the environment its trials will run in, by the identities
// they hold (MeasurementIdentity::name).
struct Recallable {
  // What the trials will run on: the image by the digest the job's own trials ran, once one has
  // run where the runtime reports digests; until then as the template gives it.
  RanOn ranOn;
  std::map<std::string, Shared<MeasurementObject>> byName;
  std::chrono::seconds maxAge{};
};

// One valid job and its trials, as the cache held them at `now`.
struct Snapshot {
  Timestamp now;
  std::string key;
  std::int64_t generation = 0;
  api::AutotuneJob job;  // metadata, spec and the status as written
  api::FieldErrors warnings;
  std::optional<Timestamp> statusWrittenAt;  // by the operator, if ever (CachedAutotuneJob)
  std::vector<TrialRunState> inFlight;       // the newest run of each trial still going
  std::vector<Concluded> concluded;          // in the order the trials started
  // The written results followed by those of `concluded`: the history the engine decides from
  // and the status records.
  std::vector<api::TrialRecord> results;
  // The written model info, or what the profiling trial measured since.
  std::optional<api::MeasuredModel> model;
  // Of `results`, those taken from kept measurements by this reconcile (recall.h), and why kept
  // measurements that would have stood for a trial could not.
  std::vector<api::TrialRecord> reused;
  std::vector<std::string> measurementsIgnored;
  // Nothing with spec.reuse Disabled, once the job has ended, while its trials in flight fill
  // spec.parallelism, or while the GPUs a trial would get cannot be told (expectedRanOn).
  std::optional<Recallable> recallable;
  std::vector<TrialRun> staleRuns;  // of recorded or superseded trials, to delete
  // Pods held by api::kTrialResultFinalizer that the written status needs no more and that no
  // deletion of staleRuns lets go: those of recorded trials being deleted or kept (spec.cleanup),
  // and those being deleted that are not the job's trials (an earlier job's of the same name) or
  // cannot be read.
  std::vector<Shared<Pod>> settled;
  // Names of trial runs taken by objects this job does not own (left by an earlier job of the
  // same name, or anyone's): such a trial is recorded Failed, never adopted. Those a create found
  // taken are Learned::namesTaken.
  std::set<std::string> namesTaken;
  // Pods labelled for the job that are not its trials (Cluster::ownerOf) and are not being
  // deleted: neither read, counted nor deleted, and told of once (Cluster::noticeForeignPod).
  std::vector<Shared<Pod>> foreignPods;
  std::vector<std::string> unreadable;  // why some trial Pods could not be read
  MissingNodes missingNodes;            // nodes of its trial Pods that the Node cache lacks
  GpuCapacity capacity;
  int slotsHeldForOlderJobs = 0;
  // Whether the job's Kueue LocalQueue (spec.queueName) exists; kNotWatched without one, or
  // without --kueue.
  QueueState queue = QueueState::kNotWatched;
  // When a queued trial whose Workload is not seen will have waited long enough for its message
  // to say why that may be: the job looks again then, though nothing else may wake it.
  std::optional<Timestamp> workloadOverdueAt;
  // The job waits for room since then (Plan::waitsForRoom): its WaitingForRoom condition.
  std::optional<Timestamp> waitingSince;
};

Snapshot observe(const ClusterView& cluster, const CachedAutotuneJob& job, Timestamp now);

// What the job's trials could take from kept measurements, the rest of `snapshot` observed.
std::optional<Recallable> recallableFor(const ClusterView& cluster, const Snapshot& snapshot);

}  // namespace autotune::controller
