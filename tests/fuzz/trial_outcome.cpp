// A trial Pod's outcome, from Pods as the API server could return them: either the input as a
// whole Pod document, or a trial Pod whose phase, node, deletion, container state, exit code,
// times and termination message (any bytes) the input chooses. Reading the Pod and concluding
// its trial never throw; a concluded trial's reason is at most 256 bytes of valid UTF-8 and its
// record serialises as JSON; a Succeeded measurement is a positive, finite number.

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "api/codec.h"
#include "api/labels.h"
#include "api/text.h"
#include "controller/decision/trial_state.h"
#include "controller/objects/objects.h"
#include "controller/objects/trial_pod.h"
#include "fuzz/check.h"

namespace {

using autotune::fuzz::check;
using nlohmann::json;
namespace api = autotune::api;
namespace controller = autotune::controller;

constexpr std::size_t kReasonBytes = 256;

api::Spec specMeasuring(std::string_view metric) {
  const json document = {
      {"apiVersion", "autotune.io/v1alpha1"},
      {"kind", "AutotuneJob"},
      {"metadata", {{"name", "fuzz"}}},
      {"spec",
       {{"deepspeedConfig", {{"train_micro_batch_size_per_gpu", "auto"}}},
        {"search", {{"metric", metric}}},
        {"template", {{"spec", {{"containers", {{{"name", "trainer"}, {"image", "t"}}}}}}}}}}};
  return api::decode(document).value().job.spec;
}

template <typename T, std::size_t N>
T pick(FuzzedDataProvider& input, const std::array<T, N>& choices) {
  return input.PickValueInArray(choices);
}

constexpr std::array<const char*, 5> kTimes = {"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5Z",
                                               "2026-01-02T03:05:05+01:00", "yesterday", ""};

json containerState(FuzzedDataProvider& input) {
  switch (input.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return {{"running", {{"startedAt", pick(input, kTimes)}}}};
    case 1:
      return {{"waiting",
               {{"reason", pick(input, std::array{"ImagePullBackOff", "CreateContainerError",
                                                  "ContainerCreating", "CrashLoopBackOff"})},
                {"message", input.ConsumeRandomLengthString(512)}}}};
    case 2:
      return json::object();
    default:
      break;
  }
  json terminated = {{"exitCode", input.ConsumeIntegral<std::int32_t>()},
                     {"reason", pick(input, std::array{"Completed", "Error", "OOMKilled",
                                                       "ContainerStatusUnknown", "StartError"})},
                     {"startedAt", pick(input, kTimes)},
                     {"finishedAt", pick(input, kTimes)}};
  if (input.ConsumeBool()) {
    terminated["signal"] = input.ConsumeIntegral<std::int32_t>();
  }
  // Last, so that it can take the rest of the input: the message is the part a trial writes.
  terminated["message"] = input.ConsumeRemainingBytesAsString();
  return {{"terminated", terminated}};
}

json trialPod(FuzzedDataProvider& input) {
  json metadata = {{"name", "fuzz-z1-gas1-mbs2"},
                   {"creationTimestamp", pick(input, kTimes)},
                   {"annotations",
                    {{std::string(api::kTrialNameAnnotation),
                      pick(input, std::array{"z1_gas1_tmbspg2", "profile_model_info", ""})},
                     {std::string(api::kAttemptAnnotation),
                      pick(input, std::array{"0", "2", "-1", "x", "99999999999"})}}},
                   {"labels", {{std::string(api::kSpaceLabel), "z1"}}}};
  if (input.ConsumeBool()) {
    metadata["deletionTimestamp"] = pick(input, kTimes);
    metadata["deletionGracePeriodSeconds"] = input.ConsumeIntegral<std::int64_t>();
  }
  json status = {
      {"phase", pick(input, std::array{"Pending", "Running", "Succeeded", "Failed", "Unknown"})},
      {"startTime", pick(input, kTimes)}};
  if (input.ConsumeBool()) {
    status["conditions"] = {{{"type", "PodScheduled"},
                             {"status", "False"},
                             {"reason", "Unschedulable"},
                             {"message", "0/2 nodes are available"}}};
  }
  if (input.ConsumeBool()) {
    status["reason"] = pick(input, std::array{"Evicted", "NodeLost", "Preempting", "Other"});
  }
  status["containerStatuses"] = {{{"name", "trainer"}, {"state", containerState(input)}}};
  return {{"metadata", metadata},
          {"spec",
           {{"nodeName", pick(input, std::array{"", "node-a", "node-gone"})},
            {"containers", {{{"name", "trainer"}}}}}},
          {"status", status}};
}

void checkConclusion(const controller::TrialResult& conclusion) {
  const api::TrialRecord& record = conclusion.record;
  check(record.reason.size() <= kReasonBytes, "a reason is at most 256 bytes");
  check(api::validUtf8(record.reason) == record.reason, "a reason is valid UTF-8");
  if (record.value) {
    check(std::isfinite(*record.value) && *record.value > 0, "a measurement is positive");
  }
  api::Status status;
  status.results.push_back(record);
  check(!api::encode(status).dump().empty(), "the record serialises");
}

void concludeTrial(const json& object, const api::Spec& spec) {
  const auto pod = controller::decodePod(object);
  if (!pod) {
    return;
  }
  const auto state = controller::readTrialPod(*pod, spec, controller::NodeNames{"node-a"});
  if (!state) {
    return;
  }
  (void)controller::deadline(*state, spec);
  (void)controller::shouldRelaunch(*state);
  const auto now = controller::parseTime("2026-01-02T04:00:00Z").value();
  if (const auto conclusion = controller::resultOf(*state, spec, now)) {
    checkConclusion(*conclusion);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::array<api::Spec, 3> specs = {specMeasuring("throughput"),
                                                 specMeasuring("latency"), specMeasuring("flops")};
  FuzzedDataProvider input(data, size);
  const api::Spec& spec = input.PickValueInArray(specs);
  if (input.ConsumeBool()) {
    const json pod = json::parse(input.ConsumeRemainingBytesAsString(), nullptr, false);
    if (pod.is_object()) {
      concludeTrial(pod, spec);
    }
    return 0;
  }
  concludeTrial(trialPod(input), spec);
  return 0;
}
