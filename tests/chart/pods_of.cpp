// Test equipment for tests/chart/pod_security_test.sh: the Pods the operator would have the cluster
// run for an AutotuneJob, as a v1 List, so that the namespace's Pod Security admission can judge
// them with a server-side dry run. They are the first trial's Pod (controller::trialPod, for the
// trial tuning::decide launches first, as `autotune plan` shows it) and, when the job has
// spec.afterTuning, a Pod of that batch Job's template (controller::afterTuningJob), which is what
// the Job controller would create.
//
//   pods_of FILE    FILE is an AutotuneJob in YAML or JSON; exit 2 when it is not a valid one

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "api/codec.h"
#include "controller/objects/trial_pod.h"
#include "tuning/engine.h"

namespace {

using nlohmann::json;
namespace api = autotune::api;
namespace controller = autotune::controller;
namespace tuning = autotune::tuning;

constexpr int kExitInvalid = 2;

// A job read from a file has no UID; every job the API server stores has one, and the Pods' owner
// reference must name it.
constexpr const char* kPlaceholderUid = "00000000-0000-4000-8000-000000000001";

// The Pod the Job controller makes of the after-tuning Job's template.
json podOfBatchJob(const json& batchJob) {
  const json& podTemplate = batchJob["spec"]["template"];
  json metadata = podTemplate.value("metadata", json::object());
  metadata["name"] = batchJob["metadata"]["name"];
  metadata["namespace"] = batchJob["metadata"]["namespace"];
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", std::move(metadata)},
          {"spec", podTemplate.value("spec", json::object())}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: pods_of FILE\n";
    return kExitInvalid;
  }
  std::ifstream file(argv[1]);
  if (!file) {
    std::cerr << argv[1] << ": cannot be read\n";
    return kExitInvalid;
  }
  std::stringstream text;
  text << file.rdbuf();
  auto decoded = api::decodeYaml(text.str());
  if (!decoded) {
    for (const auto& error : decoded.error()) {
      std::cerr << api::format(error) << "\n";
    }
    return kExitInvalid;
  }
  api::AutotuneJob& job = decoded->job;
  if (job.uid().empty()) {
    job.metadata["uid"] = kPlaceholderUid;
  }

  tuning::EngineInput first;
  first.spec = job.spec;
  first.jobUid = job.uid();
  first.freeSlots = job.spec.parallelism;
  const tuning::Decision decision = tuning::decide(first);
  if (decision.launch.empty()) {
    std::cerr << argv[1] << ": the search launches no trial: " << decision.message << "\n";
    return kExitInvalid;
  }
  const tuning::Trial& trial = decision.launch.front();

  json pods = json::array({controller::trialPod(job, trial)});
  if (job.spec.afterTuning) {
    pods.push_back(podOfBatchJob(controller::afterTuningJob(job, trial)));
  }
  std::cout << json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", std::move(pods)}}.dump(2)
            << "\n";
  return 0;
}
