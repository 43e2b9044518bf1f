#pragma once
// The Pod that runs one trial on Kubernetes: the job's Pod template with the trial
// protocol (tuning/protocol.h) applied, labelled and owned so that the controller can find its
// trials, map each Pod back to its trial, and let garbage collection remove them with the job.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "api/job.h"
#include "api/labels.h"
#include "tuning/space.h"

namespace autotune::controller {

// A trial Pod's activeDeadlineSeconds exceeds spec.trialTimeout by this much: the operator records
// a trial that ran too long and deletes its Pod; the kubelet's deadline only acts when it did not.
inline constexpr std::chrono::seconds kDeadlineGrace{120};

inline constexpr std::string_view kConfigVolume = "autotune-config";
inline constexpr std::string_view kConfigMountPath = "/etc/autotune";
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kDefaultTerminationMessagePath = "/dev/termination-log";

// The value of the job label: the job name, or for a name over 63 characters (a label value's
// limit) a cut of it ending in a hash of the whole name.
std::string jobLabelValue(std::string_view jobName);

// The Pod name of a trial: tuning::podName for the first attempt; a relaunch gets a name of its
// own, so that its Pod can be created before the lost one is deleted.
std::string trialPodName(std::string_view jobName, std::string_view trialName, int attempt = 0);

// The trial Pod (apiVersion v1, kind Pod), ready to create in the job's namespace. The job must
// have passed validation: its template has a primary container.
//
// From the template: metadata labels and annotations, and the whole spec, except that
// restartPolicy is Never and the primary container gets
// - command/args from tuning::trialCommand, split as the template splits them (the words beyond
//   the template's command go to args when the template has args, else stay in command);
// - env: the protocol's AUTOTUNE_* variables first (so the template's own variables may refer to
//   them as $(AUTOTUNE_TRIAL)), then the template's, placeholders filled in, minus any that the
//   protocol sets;
// - nvidia.com/gpu = gpusPerTrial / nodesPerTrial in limits and requests, other resources kept;
// - terminationMessagePath (the template's, or /dev/termination-log) as the metrics path, with
//   terminationMessagePolicy FallbackToLogsOnError;
// - the read-only autotune-config volume at /etc/autotune: ds_config.json from the annotation
//   autotune.io/ds-config, which holds tuning::launchConfig.
//
// `run` says which run of the trial it is (autotune.io/attempt, autotune.io/preemptions,
// autotune.io/wanted-since).
struct RunOrdinal {
  int attempt = 0;      // 0 for the first
  int preemptions = 0;  // of the earlier attempts
  std::optional<std::chrono::system_clock::time_point> wantedSince;
};
nlohmann::json trialPod(const api::AutotuneJob& job, const tuning::Trial& trial,
                        const RunOrdinal& run = {});

// The name of a multi-node trial's batch Job and of its headless Service: short enough that each
// Pod's host name, `<name>-<index>`, is a DNS label, and starting with a letter, as a Service
// name must.
std::string trialBatchJobName(std::string_view jobName, std::string_view trialName,
                              int attempt = 0);

// A trial with spec.resources.nodesPerTrial N above 1: a batch/v1 Job, completionMode Indexed,
// of N Pods (completions and parallelism N, backoffLimit 0: a rank that fails ends the trial),
// each the Pod trialPod builds, with gpusPerTrial / N GPUs, and
// - the rendezvous in its environment after the protocol's: AUTOTUNE_NUM_NODES,
//   AUTOTUNE_NODE_RANK (its completion index), AUTOTUNE_MASTER_ADDR (index 0's host name,
//   `<name>-0.<name>`) and AUTOTUNE_MASTER_PORT;
// - spec.subdomain naming the trial's Service, so that each Pod has that host name;
// - a required anti-affinity to the trial's other Pods on kubernetes.io/hostname, so that each
//   runs on a node of its own;
// - the AutotuneJob's name and UID in annotations, as the Job controller owns the Pods.
nlohmann::json trialBatchJob(const api::AutotuneJob& job, const tuning::Trial& trial,
                             const RunOrdinal& run = {});

// The headless Service that gives a multi-node trial's Pods their host names.
nlohmann::json trialService(const api::AutotuneJob& job, const tuning::Trial& trial,
                            int attempt = 0);

// The controller reference every object made for a job carries, so that deleting the job
// deletes them.
nlohmann::json ownerReference(const api::AutotuneJob& job);

// DeepSpeed's `--autotuning run`: the batch/v1 Job of spec.afterTuning, its primary container's
// command given the best trial's values (argMappings, placeholders, --deepspeed pointed at
// /etc/autotune/ds_config.json), with the output ConfigMap's ds_config.json mounted there.
std::string afterTuningJobName(std::string_view jobName);
nlohmann::json afterTuningJob(const api::AutotuneJob& job, const tuning::Trial& best);

}  // namespace autotune::controller
