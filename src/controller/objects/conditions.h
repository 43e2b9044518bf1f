#pragma once
// The job's conditions (metav1.Condition), their types and the reasons the controller gives them,
// and how one is set: the transition time moves only when the status does.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "api/codec.h"
#include "api/job.h"
#include "controller/objects/objects.h"

namespace autotune::controller {

namespace condition {
inline constexpr std::string_view kSpecValid = "SpecValid";
// True while trials are searched; False, saying why, while none can run.
inline constexpr std::string_view kRunning = "Running";
inline constexpr std::string_view kComplete = "Complete";
inline constexpr std::string_view kFailed = "Failed";
// False, with the exception, while the job's reconciles throw; True again once one succeeds.
inline constexpr std::string_view kReconciled = "Reconciled";
// False while the search is over and its output ConfigMap could not be written.
inline constexpr std::string_view kOutputWritten = "OutputWritten";
// True once the API server refused a trial's run for good (Pod Security, a policy, a webhook):
// the job launches nothing more, and fails once the trials still running are recorded.
inline constexpr std::string_view kLaunchRefused = "LaunchRefused";
// True once the afterTuning Job could not be made: the API server refused it for good
// (reason CreateRefused), or a Job the job does not control holds its name (NameTaken). The job
// still Succeeded: its output is written and every trial recorded.
inline constexpr std::string_view kAfterTuningFailed = "AfterTuningFailed";
// True while trials the job wants wait for room (free GPU slots by the operator's count, or a
// ResourceQuota), reason WaitingForGPUs or QuotaExceeded; False once none does. Its transition
// time is when the wait began, kept by the API server across restarts: the trials launched once
// room is found carry it (autotune.io/wanted-since).
inline constexpr std::string_view kWaitingForRoom = "WaitingForRoom";
}  // namespace condition

// The Running condition's reasons while trials wait for room, True while some trial runs and
// False while none does: for free GPU slots by the operator's count (older jobs first), for a
// ResourceQuota, for the scheduler or a scheduling gate to place their Pods, for Kueue to admit
// their Workloads, or for the Kueue LocalQueue spec.queueName names to exist.
namespace queued {
inline constexpr std::string_view kWaitingForGpus = "WaitingForGPUs";
inline constexpr std::string_view kQuotaExceeded = "QuotaExceeded";
inline constexpr std::string_view kQueued = "Queued";
inline constexpr std::string_view kWaitingForAdmission = "WaitingForAdmission";
inline constexpr std::string_view kLocalQueueNotFound = "LocalQueueNotFound";
}  // namespace queued

// metav1.Condition's bound on a message.
inline constexpr std::size_t kConditionMessageBytes = 32768;

// Sets a condition, cutting its message to kConditionMessageBytes, and keeps its transition time
// when its status does not change.
void setCondition(api::Status& status, std::string_view type, bool value, std::string_view reason,
                  const std::string& message, Timestamp now, std::int64_t generation);

// The condition of that type, or nullptr.
const api::Condition* findCondition(const api::Status& status, std::string_view type);

// "path: reason; path: reason", as many as fit in maxBytes, then how many more there are.
std::string listed(const api::FieldErrors& errors, std::size_t maxBytes);

}  // namespace autotune::controller
