#pragma once
// What a kubelet derives from a Pod around running its first container: the command and
// environment, the volumes it mounts, the termination message, and the status it reports. Pure
// functions of the Pod's JSON and of files, so the node simulator's threads only move data.

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "object/time.h"

namespace autotune::nodesim {

using Environment = std::vector<std::pair<std::string, std::string>>;

// The downward API's value of `fieldPath` for `pod`: metadata.name, metadata.namespace,
// metadata.uid, metadata.annotations['k'], metadata.labels['k'], spec.nodeName,
// spec.serviceAccountName, status.hostIP or status.podIP. A missing annotation or label is empty,
// as in Kubernetes; a path outside that list is an error.
tl::expected<std::string, std::string> fieldValue(const nlohmann::json& pod,
                                                  const std::string& fieldPath);

// Kubernetes' $(VAR) expansion in command, args and env values: $(NAME) of a variable defined
// in `variables` (the last definition wins) becomes its value, $$ becomes $, anything else is
// left as written.
std::string expandReferences(std::string_view text, const Environment& variables);

// The container's env list in order, each value expanded against the entries before it.
// valueFrom supports fieldRef only: a secret, ConfigMap or resource reference is an error.
tl::expected<Environment, std::string> containerEnvironment(const nlohmann::json& pod,
                                                            const nlohmann::json& container);

// What the NVIDIA device plugin's allocation looks like from inside the container: with a
// nvidia.com/gpu limit of N, CUDA_VISIBLE_DEVICES=0,...,N-1 (the container sees only its own GPUs,
// numbered from 0), unless the container sets the variable itself; and, as a real GPU tells CUDA
// its memory, AUTOTUNE_SIM_GPU_MEMORY_MIB (trial-sim reads it). Without a GPU limit, the
// `claimedGpus` a DRA driver prepared for the container's ResourceClaims count alike; empty with
// neither.
Environment deviceEnvironment(const nlohmann::json& container, const Environment& environment,
                              std::int64_t gpuMemoryMiB, int claimedGpus = 0);

// command followed by args, expanded against `environment`. Without a command the args are the
// whole command line: there is no image, so no entrypoint to prepend.
tl::expected<std::vector<std::string>, std::string> containerCommand(
    const nlohmann::json& container, const Environment& environment);

// The host name the container sees, as HOSTNAME: the Pod's spec.hostname, else its name.
std::string hostName(const nlohmann::json& pod);

// The Indexed Job a Pod belongs to, as the Job controller marks its Pods.
struct JobMembership {
  std::string name;  // label batch.kubernetes.io/job-name (or job-name), else the owner's name
  std::string uid;   // the controlling ownerReference of kind Job, else label controller-uid
  std::optional<int> index;  // annotation or label batch.kubernetes.io/job-completion-index
};

// nullopt for a Pod that no Job controls.
std::optional<JobMembership> jobMembership(const nlohmann::json& pod);

// The loopback address every host name of one Job resolves to inside its Pods, from the Job's uid
// (else its namespace and name): 127.x.y.z, never 127.0.0.1, with z neither 0 nor 255. On one
// machine Pods have no addresses of their own, so each Job gets one: the ranks of two trials
// running at once then listen on the same port without meeting.
std::string jobAddress(const std::string& namespaceName, const JobMembership& job);

// The /etc/hosts of a Pod with spec.subdomain, as the kubelet manages it: localhost, and the
// names `h`, `h.S`, `h.S.NS.svc` and `h.S.NS.svc.cluster.local` of the Pod's own host name h and,
// for a Pod of an Indexed Job, of `<job>-<i>` for every index i below `completions` (the Job's
// spec.completions), all at jobAddress. nullopt without a subdomain: /etc/hosts is left alone.
std::optional<std::string> hostsFile(const nlohmann::json& pod, std::optional<int> completions);

// A bind mount into the container's view of the filesystem.
struct Mount {
  std::filesystem::path source;  // in the Pod's folder
  std::string target;            // where the container sees it
  bool readOnly = false;
};

struct PreparedMounts {
  std::vector<Mount> mounts;
  std::vector<std::string> skipped;  // volumes of kinds the simulator does not provide, and why
};

// Materialises the volumes the container mounts under `folder`/volumes (downwardAPI and
// projected downwardAPI items as files, emptyDir as an empty folder), writes `hosts` (if any) to
// `folder`/hosts for /etc/hosts, read-only, and adds the termination message file
// `folder`/termination-log on the container's terminationMessagePath (default
// /dev/termination-log), last, so that it wins over a volume mounted above it.
tl::expected<PreparedMounts, std::string> prepareMounts(
    const nlohmann::json& pod, const nlohmann::json& container, const std::filesystem::path& folder,
    const std::optional<std::string>& hosts = std::nullopt);

// The last `limit` bytes of a file (the kubelet keeps the end of a long termination message);
// empty when the file is missing.
std::string readTail(const std::filesystem::path& path, std::size_t limit);

// The kubelet's FallbackToLogsOnError text: the last 80 lines of the log, at most 2048 bytes.
std::string logTail(const std::filesystem::path& path);

// How the container ended, in the terms of containerStatuses[].state.terminated.
struct Outcome {
  int exitCode = 0;
  std::optional<int> signal;
  std::string reason;  // Completed, Error, StartError, ContainerStatusUnknown
  std::string message;
  std::string startedAt;
  std::string finishedAt;
};

// The outcome of a process that exited with `exitCode` or was killed by `signal`: reason
// Completed or Error, and the termination message the kubelet would report (the file's last 4096
// bytes; with FallbackToLogsOnError, an empty file and a failure, the log's tail instead).
Outcome exitOutcome(const nlohmann::json& container, std::optional<int> exitCode,
                    std::optional<int> signal, const std::filesystem::path& terminationFile,
                    const std::filesystem::path& log);

// RFC 3339 in whole seconds (metav1.Time) and in microseconds (metav1.MicroTime, for Leases).
inline std::string timestamp(std::chrono::system_clock::time_point time) {
  return object::formatTime(time, object::Fraction::kWholeSeconds);
}
inline std::string microTimestamp(std::chrono::system_clock::time_point time) {
  return object::formatTime(time, object::Fraction::kMicroseconds);
}
inline std::string now() { return timestamp(std::chrono::system_clock::now()); }

// Rewrites `status` (a Pod's current status) as a kubelet reports a Pod whose first container
// runs since `startedAt`: phase Running, startTime, the kubelet's conditions (others kept), and
// a status per container (the first running, the rest waiting: only the first is run).
void markRunning(nlohmann::json& status, const nlohmann::json& pod, const std::string& startedAt,
                 const std::string& hostIp);

// Why the first container's image cannot be pulled, when it comes from a registry under the
// reserved .invalid domain (RFC 2606): the simulator's stand-in for a registry outage or a
// misspelt image, in the words of containerd. Nothing for any other image, which the simulator
// never pulls.
std::optional<std::string> imagePullFailure(const nlohmann::json& container);

// Rewrites `status` for a Pod whose first container waits to be created for `reason`
// (ErrImagePull): phase Pending, not ready, the container waiting with `message`.
void markWaiting(nlohmann::json& status, const nlohmann::json& pod, const std::string& reason,
                 const std::string& message, const std::string& since, const std::string& hostIp);

// Rewrites `status` for a Pod whose first container ended: phase Succeeded for exit 0, else
// Failed, with the container's terminated state.
void markTerminated(nlohmann::json& status, const nlohmann::json& pod, const Outcome& outcome,
                    const std::string& hostIp);

}  // namespace autotune::nodesim
