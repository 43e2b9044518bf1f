#pragma once
// The labels and annotations that people and other programs read on what the operator makes
// (trial Pods and Jobs, the output ConfigMap, kept measurements), and the files of the output
// ConfigMap: one name each, for every layer that writes or reads them.

#include <string>
#include <string_view>

namespace autotune::api {

// The operator's User-Agent's product, which the API server records as the field manager of its
// writes (metadata.managedFields): its last status write is read back from there.
inline constexpr std::string_view kOperatorName = "autotune-operator";

// On trial Pods and Jobs and on the output ConfigMap: the job's name in its label-safe form
// (the controller's jobLabelValue).
inline constexpr std::string_view kJobLabel = "autotune.io/job";
// On trial Pods and Jobs: the trial's name, DNS-safe; the space it belongs to; the Kueue
// LocalQueue of a job with spec.queueName.
inline constexpr std::string_view kTrialLabel = "autotune.io/trial";
inline constexpr std::string_view kSpaceLabel = "autotune.io/space";
inline constexpr std::string_view kQueueLabel = "kueue.x-k8s.io/queue-name";
// On trial Pods: the DeepSpeed config the trial runs, as JSON.
inline constexpr std::string_view kConfigAnnotation = "autotune.io/ds-config";
// How many times the trial was launched before this Pod, after its earlier Pods were lost.
inline constexpr std::string_view kAttemptAnnotation = "autotune.io/attempt";
// Of those earlier launches, how many were preempted or drained (they spent no relaunch).
inline constexpr std::string_view kPreemptionsAnnotation = "autotune.io/preemptions";
// Since when the trial has been wanted (RFC 3339), when that is before its run was created: its
// job waited for room first, or earlier attempts ran. How long a trial waited counts from there.
inline constexpr std::string_view kWantedSinceAnnotation = "autotune.io/wanted-since";
// On a trial Pod that takes its GPUs from ResourceClaims: how many it asks for on its node, so that
// while it waits for the scheduler the GPU ledger holds them for it, as it would its
// nvidia.com/gpu request. Read only on the operator's own trial Pods, and only while unbound.
inline constexpr std::string_view kClaimedGpusAnnotation = "autotune.io/claimed-gpus";
// On a multi-node trial's batch Job: the UID of its Service, deleted with it.
inline constexpr std::string_view kServiceUidAnnotation = "autotune.io/service-uid";
// Set by the Job controller on each Pod of an Indexed Job.
inline constexpr std::string_view kCompletionIndexAnnotation =
    "batch.kubernetes.io/job-completion-index";
inline constexpr std::string_view kJobNameLabel = "batch.kubernetes.io/job-name";
// The canonical trial name (z1_gas1_tmbspg3), on a trial's Pod and on the measurement it made:
// labels and Pod names hold only DNS-safe forms of it.
inline constexpr std::string_view kTrialNameAnnotation = "autotune.io/trial-name";

// On every trial Pod the operator makes, its multi-node trials' included: the API server keeps
// the Pod, deleted or not, until the operator has written what it tells into the job's status and
// taken this off. How a trial ended is thus read from the API server after any restart, never
// from what a process remembers.
inline constexpr std::string_view kTrialResultFinalizer = "autotune.io/trial-result";

// Marks a measurement ConfigMap kept beyond its job; its value is the layout's version.
inline constexpr std::string_view kMeasurementLabel = "autotune.io/measurement";
// The identity less the DeepSpeed config, hashed: one environment's measurements, to list or
// delete together.
inline constexpr std::string_view kEnvironmentLabel = "autotune.io/environment";
// The job that measured it: namespace/name, and its UID.
inline constexpr std::string_view kMeasuredByAnnotation = "autotune.io/measured-by";
inline constexpr std::string_view kMeasuredByUidAnnotation = "autotune.io/measured-by-uid";
// The operator's seal over the ConfigMap (the controller's MeasurementSeal).
inline constexpr std::string_view kSealAnnotation = "autotune.io/seal";

// Per-GPU memory in MiB, as NVIDIA GPU feature discovery labels GPU nodes (e.g. 81920).
inline constexpr std::string_view kGpuMemoryLabel = "nvidia.com/gpu.memory";
// The GPU model, as GPU feature discovery labels GPU nodes (e.g. NVIDIA-H100-80GB-HBM3).
inline constexpr std::string_view kGpuProductLabel = "nvidia.com/gpu.product";
// The Nodes GPU feature discovery finds GPUs on: the ones the operator watches by default.
inline constexpr std::string_view kGpuPresentSelector = "nvidia.com/gpu.present=true";

// The output ConfigMap's files: the tuned config the training job mounts, the command that runs
// it, DeepSpeed's summary table, and every trial's record. `autotune run`'s results directory
// holds the last two under the same names, where `autotune report` reads them as it reads the
// ConfigMap.
inline constexpr std::string_view kOutputConfigFile = "ds_config.json";
inline constexpr std::string_view kOutputCommandFile = "cmd.txt";
inline constexpr std::string_view kOutputSummaryFile = "summary.txt";
inline constexpr std::string_view kOutputResultsFile = "results.json";
// The output of a job that tunes for several GPU models holds each model's config under this name
// (ds_config.NVIDIA-H100-80GB-HBM3.json): a model is a label value, so it is a ConfigMap key.
inline std::string modelConfigFile(std::string_view gpuModel) {
  return "ds_config." + std::string(gpuModel) + ".json";
}

// On the AutotuneJob of one GPU model's search: the job that tunes for several, whose it is (in
// its label-safe form). Only its controller reference proves it.
inline constexpr std::string_view kModelSearchOfLabel = "autotune.io/model-search-of";

}  // namespace autotune::api
