#pragma once
// The Pod that runs one trial on Kubernetes (DESIGN §5): the job's Pod template with the trial
// protocol (tuning/protocol.h) applied, labelled and owned so that the controller can find its
// trials, map each Pod back to its trial, and let garbage collection remove them with the job.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::controller {

// Labels on every trial Pod. The job label's value is jobLabelValue(job name).
inline constexpr std::string_view kJobLabel = "autotune.io/job";
inline constexpr std::string_view kTrialLabel = "autotune.io/trial";  // trial name, DNS-safe
inline constexpr std::string_view kSpaceLabel = "autotune.io/space";
inline constexpr std::string_view kQueueLabel = "kueue.x-k8s.io/queue-name";

// Annotations on every trial Pod.
inline constexpr std::string_view kConfigAnnotation = "autotune.io/ds-config";
// The canonical trial name (z1_gas1_tmbspg3): labels and Pod names are only DNS-safe forms of it.
inline constexpr std::string_view kTrialNameAnnotation = "autotune.io/trial-name";
// How many times the trial was launched before this Pod, after its earlier Pods were lost.
inline constexpr std::string_view kAttemptAnnotation = "autotune.io/attempt";

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
// - nvidia.com/gpu = gpusPerTrial in limits and requests, other resources kept;
// - terminationMessagePath (the template's, or /dev/termination-log) as the metrics path, with
//   terminationMessagePolicy FallbackToLogsOnError;
// - the read-only autotune-config volume at /etc/autotune: ds_config.json from the annotation
//   autotune.io/ds-config, which holds tuning::launchConfig.
nlohmann::json trialPod(const api::AutotuneJob& job, const tuning::Trial& trial, int attempt = 0);

// The controller reference every object made for a job carries, so that deleting the job
// deletes them.
nlohmann::json ownerReference(const api::AutotuneJob& job);

// DeepSpeed's `--autotuning run`: the batch/v1 Job of spec.afterTuning, its primary container's
// command given the best trial's values (argMappings, placeholders, --deepspeed pointed at
// /etc/autotune/ds_config.json), with the output ConfigMap's ds_config.json mounted there.
std::string afterTuningJobName(std::string_view jobName);
nlohmann::json afterTuningJob(const api::AutotuneJob& job, const tuning::Trial& best);

}  // namespace autotune::controller
