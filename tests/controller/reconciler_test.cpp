// The reconcile's decisions against an in-memory API server: what it launches, the order of its
// writes (a result before its Pod's deletion), invalid specs, unschedulable jobs, timeouts,
// relaunches, and a restart that makes the same decisions. The same behaviours run against the
// real API server in the end-to-end tier (tests/e2e).

#include "controller/apply/reconciler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "api/codec.h"
#include "controller/decision/observe.h"
#include "controller/decision/trial_state.h"
#include "controller/objects/trial_pod.h"
#include "observability/log.h"
#include "tuning/naming.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using std::chrono::minutes;
using std::chrono::seconds;

// Just enough of an API server: objects by path, resourceVersions, the status subresource (whose
// writes it records in managedFields, as the operator's field manager), AlreadyExists and Conflict,
// finalizers (a deleted object that has some stays, deletionTimestamp set, until the last is taken
// off), merge patches, and a log of every write.
class MemoryApi : public k8s::Transport {
 public:
  tl::expected<k8s::HttpResponse, std::string> send(const k8s::HttpRequest& request) override {
    const std::string path = request.target.substr(0, request.target.find('?'));
    const bool status = path.ends_with("/status");
    const std::string objectPath = status ? path.substr(0, path.size() - 7) : path;
    (request.method == "GET" ? reads : writes).push_back(request.method + " " + path);
    // A create is refused by the name of the object it would make.
    const std::string writtenPath =
        request.method == "POST"
            ? path + "/" + json::parse(request.body)["metadata"].value("name", "")
            : objectPath;
    if (request.method != "GET") {
      if (const auto why = refusal(writtenPath)) {
        return answer(403, "Forbidden", *why);
      }
    }
    if (request.method == "GET") {
      const auto found = objects.find(objectPath);
      return found == objects.end() ? answer(404, "NotFound")
                                    : k8s::HttpResponse{200, encoded(found->second), {}};
    }
    if (request.method == "DELETE") {
      const auto found = objects.find(objectPath);
      if (found == objects.end()) {
        return answer(404, "NotFound");
      }
      const json options = json::parse(request.body);
      if (options.contains("preconditions") &&
          options["preconditions"]["uid"] != found->second["metadata"]["uid"]) {
        return answer(409, "Conflict");
      }
      if (!found->second["metadata"].value("finalizers", json::array()).empty()) {
        found->second["metadata"]["deletionTimestamp"] = formatTime(now);
        return store(objectPath, found->second);
      }
      objects.erase(found);
      return k8s::HttpResponse{200, "{}", {}};
    }
    json body = json::parse(request.body);
    if (request.method == "POST") {
      const std::string created = path + "/" + body["metadata"].value("name", "");
      if (objects.contains(created)) {
        return answer(409, "AlreadyExists");
      }
      body["metadata"]["uid"] = "uid-" + body["metadata"].value("name", "");
      body["metadata"]["creationTimestamp"] = formatTime(now);
      return store(created, std::move(body));
    }
    // A merge patch onto the object; an apply, the object as sent. A resourceVersion is a
    // precondition.
    if (request.method == "PATCH") {
      const auto found = objects.find(objectPath);
      const std::string version = body["metadata"].value("resourceVersion", "");
      if (!version.empty() &&
          (found == objects.end() || found->second["metadata"]["resourceVersion"] != version)) {
        return answer(found == objects.end() ? 404 : 409,
                      found == objects.end() ? "NotFound" : "Conflict");
      }
      if (request.contentType != "application/merge-patch+json") {
        return store(objectPath, std::move(body));
      }
      if (found == objects.end()) {
        return answer(404, "NotFound");
      }
      json patched = found->second;
      patched.merge_patch(body);
      const json& metadata = patched["metadata"];
      if (metadata.contains("deletionTimestamp") &&
          metadata.value("finalizers", json::array()).empty()) {
        objects.erase(found);
        return k8s::HttpResponse{200, encoded(patched), {}};
      }
      return store(objectPath, std::move(patched));
    }
    const auto found = objects.find(objectPath);  // PUT
    if (found == objects.end()) {
      return answer(404, "NotFound");
    }
    if (body["metadata"].value("resourceVersion", "") !=
        found->second["metadata"].value("resourceVersion", "")) {
      return answer(409, "Conflict");
    }
    json updated = found->second;
    if (status) {
      updated["status"] = body["status"];
      // As the API server records the operator's write: its field manager's status entry, timed to
      // the second.
      updated["metadata"]["managedFields"] =
          json::array({{{"manager", "autotune-operator"},
                        {"operation", "Update"},
                        {"subresource", "status"},
                        {"time", formatTime(std::chrono::floor<std::chrono::seconds>(now))}}});
    } else {
      body["status"] = updated.value("status", json::object());
      updated = std::move(body);
    }
    return store(objectPath, std::move(updated));
  }

  tl::expected<k8s::HttpResponse, std::string> stream(const k8s::HttpRequest&,
                                                      const k8s::LineHandler&, std::chrono::seconds,
                                                      std::stop_token) override {
    return tl::unexpected(std::string("no watches here"));
  }

  std::vector<json> under(const std::string& prefix) const {
    std::vector<json> found;
    for (const auto& [path, object] : objects) {
      if (path.starts_with(prefix) && path.find('/', prefix.size()) == std::string::npos) {
        found.push_back(object);
      }
    }
    return found;
  }

  int count(const std::string& write) const {
    return static_cast<int>(std::count(writes.begin(), writes.end(), write));
  }

  std::map<std::string, json> objects;
  std::vector<std::string> writes;
  std::vector<std::string> reads;
  // Objects whose writes are Forbidden, and why; a path ending in '*' stands for all it begins.
  std::map<std::string, std::string> refused;
  std::chrono::system_clock::time_point now;

 private:
  std::optional<std::string> refusal(const std::string& path) const {
    for (const auto& [refusedPath, why] : refused) {
      if (refusedPath == path ||
          (refusedPath.ends_with('*') &&
           path.starts_with(std::string_view(refusedPath).substr(0, refusedPath.size() - 1)))) {
        return why;
      }
    }
    return std::nullopt;
  }

  tl::expected<k8s::HttpResponse, std::string> store(const std::string& path, json object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    objects[path] = object;
    return k8s::HttpResponse{200, encoded(object), {}};
  }

  // As Go's encoder writes it: bytes that are not UTF-8 (a test's Pod message cut through a
  // character) become U+FFFD.
  static std::string encoded(const json& object) {
    return object.dump(-1, ' ', false, json::error_handler_t::replace);
  }

  static tl::expected<k8s::HttpResponse, std::string> answer(int code, const std::string& reason,
                                                             const std::string& message = "") {
    return k8s::HttpResponse{code,
                             json{{"kind", "Status"},
                                  {"code", code},
                                  {"reason", reason},
                                  {"message", message.empty() ? reason : message}}
                                 .dump(),
                             {}};
  }

  int version_ = 0;
};

constexpr std::string_view kJobs = "/apis/autotune.io/v1alpha1/namespaces/ml/autotunejobs";
constexpr std::string_view kPodsPath = "/api/v1/namespaces/ml/pods";

json node(const std::string& name, int gpus) {
  return {{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.memory", "32768"}}}}},
          {"status",
           {{"allocatable", {{"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

json gpt2Job(int gpusPerTrial = 16) {
  auto job = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: gpt2, namespace: ml, generation: 1}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: auto
    gradient_accumulation_steps: 1
    fp16: {enabled: true}
    zero_optimization: {stage: [0, 1, 2, 3]}
  model: {numParameters: 774000000, activationMemoryPerSample: 9600000000}
  resources: {gpusPerTrial: 16, gpuMemory: 32Gi}
  parallelism: 2
  trialTimeout: 30m
  template:
    spec:
      containers:
      - {name: trainer, image: trial-sim, command: [trial-sim, --deepspeed, x]}
)");
  EXPECT_TRUE(job.has_value());
  (*job)["spec"]["resources"]["gpusPerTrial"] = gpusPerTrial;
  return *job;
}

class Reconcile : public ::testing::Test {
 protected:
  void SetUp() override {
    api_->now = now_;
    cluster_.nodes().replace({node("gpu-0", 16), node("gpu-1", 16)});
  }

  void submit(json job) {
    job["metadata"]["uid"] = "uid-gpt2";
    job["metadata"]["creationTimestamp"] = formatTime(now_);
    job["metadata"]["resourceVersion"] = "1";
    api_->objects[std::string(kJobs) + "/gpt2"] = job;
  }

  // What the watches would have delivered by now.
  void syncCaches() {
    jobs_.replace(api_->under(std::string(kJobs) + "/"));
    pods_.replace(api_->under(std::string(kPodsPath) + "/"));
  }

  runtime::ReconcileResult reconcile(ReconcilerHooks hooks = {}, std::stop_token leadership = {}) {
    api_->now = now_;
    syncCaches();
    Reconciler reconciler(client_, cluster_, std::move(hooks));
    const auto result = reconciler.reconcile(
        "ml/gpt2", Context{observability::Logger(observability::LogLevel::kError, log_), now_,
                           std::move(leadership)});
    syncCaches();
    return result;
  }

  json job() const { return api_->objects.at(std::string(kJobs) + "/gpt2"); }
  std::vector<json> pods() const { return api_->under(std::string(kPodsPath) + "/"); }

  json& pod(const std::string& name) {
    return api_->objects.at(std::string(kPodsPath) + "/" + name);
  }

  // The measurement ConfigMaps the API server holds in namespace ml.
  std::vector<json> keptMeasurements() const {
    std::vector<json> kept = api_->under("/api/v1/namespaces/ml/configmaps/");
    std::erase_if(kept, [](const json& configMap) {
      return !configMap["metadata"]["name"].get<std::string>().starts_with(kMeasurementPrefix);
    });
    return kept;
  }

  // The data key of a measurement ConfigMap's one measurement that ends in `suffix`.
  static std::string keyEndingIn(const json& configMap, std::string_view suffix) {
    for (const auto& [key, value] : configMap["data"].items()) {
      if (key.ends_with(suffix)) {
        return key;
      }
    }
    return "";
  }

  void finish(const std::string& name, int exitCode, const std::string& message) {
    json& trial = pod(name);
    trial["spec"]["nodeName"] = "gpu-0";
    trial["status"] = {{"phase", exitCode == 0 ? "Succeeded" : "Failed"},
                       {"startTime", formatTime(now_)},
                       {"containerStatuses",
                        {{{"name", "trainer"},
                          {"state",
                           {{"terminated",
                             {{"exitCode", exitCode},
                              {"reason", exitCode == 0 ? "Completed" : "Error"},
                              {"message", message},
                              {"startedAt", formatTime(now_)},
                              {"finishedAt", formatTime(now_ + seconds(30))}}}}}}}}};
  }

  // A job of one trial, the trial measured at throughput 59 by the next reconcile: the job ends.
  void runOneTrial(const json& oneTrialJob) {
    submit(oneTrialJob);
    reconcile();
    ASSERT_EQ(pods().size(), 1U);
    finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0, "latency": 1.0})");
    reconcile();
  }

  // The job deleted, and its output with it (the garbage collector's part), then `again` created
  // under its name, with another UID.
  void createAgain(json again) {
    api_->objects.erase(std::string(kJobs) + "/gpt2");
    api_->objects.erase("/api/v1/namespaces/ml/configmaps/gpt2-optimal");
    submit(std::move(again));
    api_->objects[std::string(kJobs) + "/gpt2"]["metadata"]["uid"] = "uid-gpt2-again";
  }

  void run(const std::string& name, std::chrono::system_clock::time_point since) {
    json& trial = pod(name);
    trial["spec"]["nodeName"] = "gpu-0";
    trial["status"] = {
        {"phase", "Running"},
        {"startTime", formatTime(since)},
        {"containerStatuses",
         {{{"name", "trainer"}, {"state", {{"running", {{"startedAt", formatTime(since)}}}}}}}}};
  }

  std::shared_ptr<MemoryApi> api_ = std::make_shared<MemoryApi>();
  k8s::Client client_{api_};
  std::ostringstream log_;
  Cluster cluster_;
  AutotuneJobStore& jobs_ = cluster_.addAutotuneJobs("");
  PodStore& pods_ = cluster_.addPods("");
  std::chrono::system_clock::time_point now_ = parseTime("2026-11-22T12:00:00Z").value();
};

TEST_F(Reconcile, LaunchesUpToParallelismTrialPodsAndReportsRunning) {
  submit(gpt2Job());
  reconcile();
  ASSERT_EQ(pods().size(), 2U);
  for (const auto& trial : pods()) {
    EXPECT_TRUE(trial["metadata"]["name"].get<std::string>().starts_with("gpt2-z"));
    EXPECT_EQ(trial["metadata"]["ownerReferences"][0]["uid"], "uid-gpt2");
  }
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["trials"]["launched"], 2);
  EXPECT_EQ(status["observedGeneration"], 1);
  // One TrialLaunched Event names both trials and their Pods.
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0]["reason"], "TrialLaunched");
  const std::string message = events[0]["message"];
  EXPECT_TRUE(message.starts_with("2 trials launched: ")) << message;
  for (const auto& trial : pods()) {
    EXPECT_NE(message.find("(Pod " + trial["metadata"]["name"].get<std::string>() + ")"),
              std::string::npos)
        << message;
  }
}

// A reconcile that learns mid-way that this replica may no longer lead creates no Pod: the next
// leader may already have recorded and deleted the trials its status write counted.
// How long a job waited for its first trial is told once: when its first trials launch, and not
// for the trials launched after.
TEST_F(Reconcile, TheWaitForAJobsFirstTrialIsToldOnce) {
  submit(gpt2Job());
  std::vector<double> told;
  ReconcilerHooks hooks;
  hooks.firstTrialLaunched = [&told](std::chrono::duration<double> sinceCreation) {
    told.push_back(sinceCreation.count());
  };
  now_ += seconds(40);
  reconcile(hooks);
  ASSERT_EQ(pods().size(), 2U);
  EXPECT_EQ(told, std::vector<double>{40.0});

  const std::string first = pods()[0]["metadata"]["name"];
  finish(first, 0, R"({"throughput": 59.0, "latency": 1.0, "FLOPS_per_gpu": 1.0})");
  reconcile(hooks);
  EXPECT_EQ(told.size(), 1U);
}

TEST_F(Reconcile, AReconcileWhoseLeadershipIsInDoubtCreatesNoPod) {
  submit(gpt2Job());
  std::stop_source leadership;
  leadership.request_stop();
  reconcile({}, leadership.get_token());
  EXPECT_TRUE(pods().empty());
  for (const auto& write : api_->writes) {
    EXPECT_FALSE(write.starts_with("POST " + std::string(kPodsPath))) << write;
  }
  reconcile();  // the next leader, with the same world, launches them
  EXPECT_EQ(pods().size(), 2U);
}

TEST_F(Reconcile, RecordsAResultBeforeDeletingItsPod) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  finish(first, 0, R"({"throughput": 59.0, "latency": 1.0, "FLOPS_per_gpu": 1.0})");
  api_->writes.clear();
  reconcile();

  const json results = job()["status"]["results"];
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0]["outcome"], "Succeeded");
  EXPECT_EQ(results[0]["value"], 59.0);
  const auto statusWrite = std::find(api_->writes.begin(), api_->writes.end(),
                                     "PUT " + std::string(kJobs) + "/gpt2/status");
  const auto podDelete = std::find(api_->writes.begin(), api_->writes.end(),
                                   "DELETE " + std::string(kPodsPath) + "/" + first);
  ASSERT_NE(statusWrite, api_->writes.end());
  ASSERT_NE(podDelete, api_->writes.end());
  EXPECT_LT(statusWrite, podDelete);
}

TEST_F(Reconcile, AReconcileAfterARestartCreatesNothingTwice) {
  submit(gpt2Job());
  reconcile();
  const auto launched = pods();
  api_->writes.clear();
  reconcile();  // a fresh Reconciler, as after a restart, with the same world
  EXPECT_EQ(pods(), launched);
  for (const auto& write : api_->writes) {
    EXPECT_FALSE(write.starts_with("POST " + std::string(kPodsPath))) << write;
  }
}

// A status write that finds the job changed since the cache read it stops the reconcile before any
// Pod is created, and is no failure (no backoff): the newer job, once the watch brings it, is
// reconciled again, with a look a second on as a guard. A refusal fails it, to be retried with
// backoff.
TEST_F(Reconcile, AJobChangedSinceItWasReadStopsTheReconcileWithoutFailingIt) {
  submit(gpt2Job());
  syncCaches();
  api_->objects.at(std::string(kJobs) + "/gpt2")["metadata"]["resourceVersion"] = "2";
  Reconciler reconciler(client_, cluster_, {});
  const auto stale = reconciler.reconcile(
      "ml/gpt2", Context{observability::Logger(observability::LogLevel::kError, log_), now_, {}});
  EXPECT_FALSE(stale.failed);
  EXPECT_EQ(stale.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(1)));
  EXPECT_TRUE(pods().empty());

  api_->refused[std::string(kJobs) + "/gpt2"] = "the status is frozen";
  const auto refused = reconcile();
  EXPECT_TRUE(refused.failed);
  EXPECT_TRUE(pods().empty());
}

TEST_F(Reconcile, ASemanticallyInvalidSpecFailsNamingTheFieldAndLaunchesNothing) {
  json invalid = gpt2Job();
  invalid["spec"]["argMappings"] = {{"no_such_key", "--flag"}};
  submit(invalid);
  reconcile();
  EXPECT_TRUE(pods().empty());
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Failed");
  const auto conditions = status["conditions"];
  const auto specValid = std::find_if(conditions.begin(), conditions.end(),
                                      [](const json& c) { return c["type"] == "SpecValid"; });
  ASSERT_NE(specValid, conditions.end());
  EXPECT_EQ((*specValid)["status"], "False");
  EXPECT_NE((*specValid)["message"].get<std::string>().find("spec.argMappings.no_such_key"),
            std::string::npos);
}

TEST_F(Reconcile, AJobNoNodeCanHoldWaitsAsUnschedulableWithoutPods) {
  submit(gpt2Job(64));
  const auto result = reconcile();
  EXPECT_TRUE(pods().empty());
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["trials"]["running"], 0);
  EXPECT_NE(status["message"].get<std::string>().find("spec.resources.gpusPerTrial"),
            std::string::npos);
  EXPECT_TRUE(result.requeueAfter.has_value());
}

// Past trialTimeout (30m) a running trial is TimedOut, an outcome of its config. A trial no node
// took, the scheduler saying GPUs are short, is queued: however long it waits, it spends no
// attempt and is never relaunched, and the job says it is queued, in the scheduler's words.
TEST_F(Reconcile, ARunningTrialPastItsTimeoutIsRecordedOneNeverScheduledWaits) {
  submit(gpt2Job());
  reconcile();
  const std::string running = pods()[0]["metadata"]["name"];
  const std::string neverScheduled = pods()[1]["metadata"]["name"];
  run(running, now_);
  pod(neverScheduled)["status"] = json::parse(R"({"phase": "Pending", "conditions": [
      {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
       "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]})");
  now_ += minutes(31);
  reconcile();
  const json results = job()["status"]["results"];
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(trialPodName("gpt2", results[0]["name"].get<std::string>()), running);
  EXPECT_EQ(results[0]["outcome"], "TimedOut");
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + running));
  EXPECT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + neverScheduled));
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + neverScheduled + "-r1"));
  const json status = job()["status"];
  EXPECT_GE(status["trials"]["queued"], 1);
  const auto condition = std::ranges::find_if(status["conditions"],
                                              [](const json& c) { return c["type"] == "Running"; });
  ASSERT_NE(condition, status["conditions"].end());
  EXPECT_EQ((*condition)["reason"], "Queued");
  EXPECT_NE((*condition)["message"].get<std::string>().find("Insufficient nvidia.com/gpu"),
            std::string::npos);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_FALSE(std::ranges::any_of(
      events, [](const json& event) { return event["reason"] == "TrialRelaunched"; }));
}

// A trial that never starts on any of its three attempts fails the job, which says why; nothing
// about its config is recorded as if it had been measured.
TEST_F(Reconcile, ATrialNeverStartedInThreeAttemptsFailsTheJobSayingWhy) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  for (const std::string attempt : {"", "-r1", "-r2"}) {
    json& trial = pod(first + attempt);
    trial["spec"]["nodeName"] = "gpu-0";
    trial["status"] = {
        {"phase", "Pending"},
        {"startTime", formatTime(now_)},
        {"containerStatuses",
         {{{"name", "trainer"},
           {"state",
            {{"waiting",
              {{"reason", "ErrImagePull"}, {"message", "pull access denied for trial-sim"}}}}}}}}};
    EXPECT_EQ(job()["status"]["phase"], "Running");
    now_ += minutes(16);
    reconcile();
  }
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Failed");
  const std::string message = status["message"];
  EXPECT_NE(message.find("was not measured in 3 attempts, the last its container could not start "
                         "within spec.schedulingTimeout: ErrImagePull: pull access denied"),
            std::string::npos)
      << message;
  for (const auto& result : status.value("results", json::array())) {
    EXPECT_NE(trialPodName("gpt2", result["name"].get<std::string>()), first) << result;
  }
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first + "-r2"));
}

// The status names each trial in flight and its attempt before the Pods exist, so a Pod no
// reconcile ever saw (never created, or created and deleted while the operator was down) is known
// gone: its trial runs again as <pod>-r1, never again under the name already used, and nothing
// says the config did it.
TEST_F(Reconcile, APodNeverSeenRunsAgainAsItsNextAttempt) {
  json submitted = gpt2Job();
  submitted["status"] = {{"phase", "Running"},
                         {"inFlight", {{{"name", "z1_gas1_tmbspg3"}, {"attempt", 0}}}}};
  submit(submitted);
  api_->writes.clear();
  reconcile();
  const std::string first = trialPodName("gpt2", "z1_gas1_tmbspg3");
  EXPECT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + first + "-r1"));
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
  const json status = job()["status"];
  EXPECT_TRUE(status.value("results", json::array()).empty());
  EXPECT_TRUE(std::ranges::any_of(status["inFlight"], [](const json& trial) {
    return trial["name"] == "z1_gas1_tmbspg3" && trial["attempt"] == 1;
  }));
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_TRUE(std::ranges::any_of(events, [&](const json& event) {
    return event["reason"] == "TrialRelaunched" &&
           event["message"].get<std::string>().find("was not measured (its Pod " + first +
                                                    " is gone") != std::string::npos;
  }));
}

// What the API server answers a delete of a trial Pod: it stays, its deletion marked, until the
// operator takes its finalizer off.
void deleteAsAUserWould(const k8s::Client& client, const std::string& pod) {
  ASSERT_TRUE(client.remove(k8s::kPods, "ml", pod).has_value());
}

// The position of the first write that begins so, or writes.size() if none does.
std::size_t firstWrite(const std::vector<std::string>& writes, const std::string& beginning) {
  return static_cast<std::size_t>(
      std::ranges::find_if(writes, [&](const auto& w) { return w.starts_with(beginning); }) -
      writes.begin());
}

// Every trial Pod carries the finalizer: the API server keeps it until the operator lets go.
TEST_F(Reconcile, TrialPodsAreHeldForTheirResults) {
  submit(gpt2Job());
  reconcile();
  ASSERT_FALSE(pods().empty());
  for (const json& trial : pods()) {
    EXPECT_EQ(trial["metadata"]["finalizers"], json::array({"autotune.io/trial-result"}));
  }
}

// A Pod deleted while its trial ran stays, its deletion marked: its trial is lost and runs again
// as its next attempt, and the Pod is let go of only once the status says so.
TEST_F(Reconcile, APodDeletedWhileItsTrialRanIsLetGoOfOnceItsLossIsWritten) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  run(first, now_);
  deleteAsAUserWould(client_, first);
  ASSERT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
  api_->writes.clear();
  reconcile();
  EXPECT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + first + "-r1"));
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
  EXPECT_EQ(api_->count("POST " + std::string(kPodsPath)), 1);
  const auto status = firstWrite(api_->writes, "PUT " + std::string(kJobs) + "/gpt2/status");
  const auto letGo = firstWrite(api_->writes, "PATCH " + std::string(kPodsPath) + "/" + first);
  EXPECT_LT(status, letGo);
  EXPECT_LT(letGo, api_->writes.size());
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_TRUE(std::ranges::any_of(events, [](const json& event) {
    return event["reason"] == "TrialRelaunched" &&
           event["message"].get<std::string>().find("was lost (deleted before the trial ended)") !=
               std::string::npos;
  }));
}

// A trial that ended while no operator ran, its Pod deleted since (a user, or the Pod garbage
// collector): the Pod still tells how it ended, so the result is recorded and nothing runs again.
TEST_F(Reconcile, ATrialThatEndedAndWhosePodWasDeletedWhileNoOperatorRanIsRecorded) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  finish(first, 0, R"({"throughput": 59.0, "latency": 1.0})");
  now_ += minutes(1);
  api_->now = now_;
  deleteAsAUserWould(client_, first);
  // The operator starts again: its cache holds nothing but what the API server lists.
  Cluster restarted;
  restarted.nodes().replace({node("gpu-0", 16), node("gpu-1", 16)});
  restarted.addAutotuneJobs("").replace(api_->under(std::string(kJobs) + "/"));
  restarted.addPods("").replace(api_->under(std::string(kPodsPath) + "/"));
  Reconciler(client_, restarted)
      .reconcile("ml/gpt2",
                 Context{observability::Logger(observability::LogLevel::kError, log_), now_, {}});
  const json results = job()["status"].value("results", json::array());
  ASSERT_EQ(results.size(), 1U) << job()["status"].dump();
  EXPECT_EQ(results[0]["outcome"], "Succeeded");
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first + "-r1"));
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
}

// What paces the status writes that only move trials from pending to running is the operator's
// last status write as the API server records it (its field manager's managedFields entry), not
// a memory of the process: an operator started again, or a new leader, waits as the one before.
TEST_F(Reconcile, StartingTrialsWaitForTheNextStatusWriteAcrossARestart) {
  const std::string statusWrites = "PUT " + std::string(kJobs) + "/gpt2/status";
  submit(gpt2Job());
  reconcile();
  ASSERT_EQ(pods().size(), 2U);
  ASSERT_EQ(api_->count(statusWrites), 1);
  now_ += seconds(10);
  for (const auto& trial : pods()) {
    run(trial["metadata"]["name"], now_);
  }
  // The operator starts again: its cache holds nothing but what the API server lists.
  Cluster restarted;
  restarted.nodes().replace({node("gpu-0", 16), node("gpu-1", 16)});
  restarted.addAutotuneJobs("").replace(api_->under(std::string(kJobs) + "/"));
  restarted.addPods("").replace(api_->under(std::string(kPodsPath) + "/"));
  const auto reconcileRestarted = [&] {
    api_->now = now_;
    Reconciler(client_, restarted)
        .reconcile("ml/gpt2",
                   Context{observability::Logger(observability::LogLevel::kError, log_), now_, {}});
  };
  reconcileRestarted();
  EXPECT_EQ(api_->count(statusWrites), 1) << "10 s after the last write: held";
  EXPECT_EQ(job()["status"]["trials"]["pending"], 2);

  now_ += seconds(20);
  reconcileRestarted();
  EXPECT_EQ(api_->count(statusWrites), 2) << "30 s after the last write: written";
  EXPECT_EQ(job()["status"]["trials"]["running"], 2);
}

// When the job began to wait for GPUs is its WaitingForRoom condition's time, which the API server
// keeps: a trial launched once room is found after a restart still counts its wait from then.
TEST_F(Reconcile, AWaitForGpusIsDatedAcrossARestart) {
  cluster_.nodes().replace({node("gpu-0", 16)});
  submit(gpt2Job());
  reconcile();
  ASSERT_EQ(pods().size(), 1U) << "room for one trial of two";
  const json waiting = job()["status"]["conditions"];
  const auto condition = std::ranges::find(waiting, "WaitingForRoom", [](const json& entry) {
    return entry["type"].get<std::string>();
  });
  ASSERT_NE(condition, waiting.end());
  EXPECT_EQ((*condition)["status"], "True");
  EXPECT_EQ((*condition)["reason"], "WaitingForGPUs");
  const std::string since = formatTime(now_);
  EXPECT_EQ((*condition)["lastTransitionTime"], since);

  // The operator starts again a minute later, and a node with room has joined.
  now_ += seconds(60);
  Cluster restarted;
  restarted.nodes().replace({node("gpu-0", 16), node("gpu-1", 16)});
  restarted.addAutotuneJobs("").replace(api_->under(std::string(kJobs) + "/"));
  restarted.addPods("").replace(api_->under(std::string(kPodsPath) + "/"));
  api_->now = now_;
  Reconciler(client_, restarted)
      .reconcile("ml/gpt2",
                 Context{observability::Logger(observability::LogLevel::kError, log_), now_, {}});
  const std::vector<json> trials = pods();
  ASSERT_EQ(trials.size(), 2U);
  const auto launched = std::ranges::find_if(trials, [](const json& trial) {
    return trial["metadata"]["annotations"].contains("autotune.io/wanted-since");
  });
  ASSERT_NE(launched, trials.end()) << "the second trial carries when it was first wanted";
  EXPECT_EQ((*launched)["metadata"]["annotations"]["autotune.io/wanted-since"], since);
  const json conditions = job()["status"]["conditions"];
  for (const auto& entry : conditions) {
    if (entry["type"] == "WaitingForRoom") {
      EXPECT_EQ(entry["status"], "False");
      EXPECT_EQ(entry["reason"], "NotWaiting");
    }
  }
}

// The scheduler preempts a trial's Pod and deletes it: it stays until the operator has read it,
// so it runs again as preempted, spending no attempt.
TEST_F(Reconcile, APreemptedAndDeletedPodRunsAgainAsPreempted) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  run(first, now_);
  pod(first)["status"]["conditions"] = json::parse(
      R"([{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
           "message": "Preempted in order to admit critical pod"}])");
  deleteAsAUserWould(client_, first);
  reconcile();
  const json relaunched = api_->objects.at(std::string(kPodsPath) + "/" + first + "-r1");
  EXPECT_EQ(relaunched["metadata"]["annotations"]["autotune.io/preemptions"], "1");
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_TRUE(std::ranges::any_of(events, [](const json& event) {
    return event["reason"] == "TrialRelaunched" &&
           event["message"].get<std::string>().find("was preempted (PreemptionByScheduler") !=
               std::string::npos;
  }));
}

// The job deleted: garbage collection deletes its Pods, which the operator lets go of, as no job
// will read them.
TEST_F(Reconcile, ThePodsOfADeletedJobAreLetGoOf) {
  submit(gpt2Job());
  reconcile();
  const auto trials = pods();
  ASSERT_FALSE(trials.empty());
  api_->objects.erase(std::string(kJobs) + "/gpt2");
  for (const json& trial : trials) {
    deleteAsAUserWould(client_, trial["metadata"]["name"]);
  }
  ASSERT_EQ(pods().size(), trials.size());
  reconcile();
  EXPECT_TRUE(pods().empty());
}

// A trial Pod someone stripped of its trial-name annotation cannot be read; deleted, it is still
// let go of rather than held for ever.
TEST_F(Reconcile, ATrialPodThatCannotBeReadIsLetGoOfOnceDeleted) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  pod(first)["metadata"]["annotations"].erase("autotune.io/trial-name");
  deleteAsAUserWould(client_, first);
  reconcile();
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
}

// The job deleted in the foreground while a trial runs: garbage collection deletes its Pod first.
// The job launches nothing more and writes nothing: the Pod is let go of, not relaunched.
TEST_F(Reconcile, AJobBeingDeletedLetsGoOfItsPodsAndLaunchesNothing) {
  submit(gpt2Job());
  reconcile();
  const auto trials = pods();
  ASSERT_FALSE(trials.empty());
  for (const json& trial : trials) {
    run(trial["metadata"]["name"], now_);
  }
  json& deleting = api_->objects.at(std::string(kJobs) + "/gpt2");
  deleting["metadata"]["deletionTimestamp"] = formatTime(now_);
  deleting["metadata"]["finalizers"] = json::array({"foregroundDeletion"});
  for (const json& trial : trials) {
    deleteAsAUserWould(client_, trial["metadata"]["name"]);
  }
  api_->writes.clear();
  reconcile();
  EXPECT_TRUE(pods().empty());
  EXPECT_EQ(api_->count("POST " + std::string(kPodsPath)), 0);
  EXPECT_EQ(api_->count("PUT " + std::string(kJobs) + "/gpt2/status"), 0);
}

// A Pod of ours that is not being deleted is kept by its finalizer, even when its job is gone:
// garbage collection deletes it first, and only then is it let go of.
TEST_F(Reconcile, APodOfADeletedJobIsLetGoOfOnlyOnceItIsBeingDeleted) {
  submit(gpt2Job());
  reconcile();
  const auto trials = pods();
  api_->objects.erase(std::string(kJobs) + "/gpt2");
  api_->writes.clear();
  reconcile();
  EXPECT_EQ(pods().size(), trials.size());
  EXPECT_EQ(api_->writes, std::vector<std::string>{});
}

TEST_F(Reconcile, AnEvictedTrialRunsAgainAsItsNextAttempt) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods()[0]["metadata"]["name"];
  pod(first)["status"] = {{"phase", "Failed"}, {"reason", "Evicted"}};
  reconcile();
  EXPECT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + first + "-r1"));
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
  EXPECT_TRUE(job()["status"].value("results", json::array()).empty());
}

constexpr std::string_view kNewNode = "/api/v1/nodes/gpu-9";

// A trial runs on gpu-9, a node the Node cache does not hold (yet, or any more).
class NodeMissingFromTheCache : public Reconcile {
 protected:
  void SetUp() override {
    Reconcile::SetUp();
    submit(gpt2Job());
    reconcile();
    trial_ = pods()[0]["metadata"]["name"];
    run(trial_, now_);
    pod(trial_)["spec"]["nodeName"] = "gpu-9";
  }

  bool runsOn() const { return api_->objects.contains(std::string(kPodsPath) + "/" + trial_); }
  bool relaunched() const {
    return api_->objects.contains(std::string(kPodsPath) + "/" + trial_ + "-r1");
  }
  int lookups() const {
    return static_cast<int>(std::ranges::count(api_->reads, "GET " + std::string(kNewNode)));
  }

  std::string trial_;
};

// A node added while the Node watch lags: the API server has it, so its trial runs on, however
// long the cache takes, and the job looks again every kNodeRecheck.
TEST_F(NodeMissingFromTheCache, ATrialOnANodeTheApiServerHasRunsOn) {
  api_->objects[std::string(kNewNode)] = node("gpu-9", 16);
  for (int i = 0; i < 10; ++i) {
    const auto result = reconcile();
    ASSERT_TRUE(result.requeueAfter.has_value());
    EXPECT_LE(*result.requeueAfter, kNodeRecheck);
    now_ += seconds(10);
  }
  EXPECT_TRUE(runsOn());
  EXPECT_FALSE(relaunched());
  EXPECT_EQ(lookups(), 10);
  EXPECT_TRUE(job()["status"].value("results", json::array()).empty());
}

// A node deleted: its trial is lost once the API server has answered 404 for kNodeGoneGrace, and
// runs again as its next attempt.
TEST_F(NodeMissingFromTheCache, ATrialIsLostOnlyOnceItsNodeAnswered404ForTheGrace) {
  reconcile();
  now_ += kNodeGoneGrace - seconds(1);
  reconcile();
  EXPECT_TRUE(runsOn());
  EXPECT_FALSE(relaunched());
  EXPECT_EQ(lookups(), 2);
  now_ += seconds(1);
  reconcile();
  EXPECT_FALSE(runsOn());
  EXPECT_TRUE(relaunched());
  EXPECT_EQ(lookups(), 2);  // gone is gone: no more lookups
}

// A node deleted and registered again within the grace loses nothing; once the watch delivers it,
// the lookups stop.
TEST_F(NodeMissingFromTheCache, ANodeBackWithinTheGraceLosesNoTrial) {
  reconcile();
  now_ += seconds(20);
  api_->objects[std::string(kNewNode)] = node("gpu-9", 16);
  reconcile();
  now_ += seconds(20);  // 40 s after the first 404
  reconcile();
  EXPECT_TRUE(runsOn());
  EXPECT_FALSE(relaunched());
  EXPECT_EQ(lookups(), 3);
  cluster_.nodes().upsert(node("gpu-9", 16));
  now_ += seconds(20);
  reconcile();
  EXPECT_EQ(lookups(), 3);
  EXPECT_TRUE(runsOn());
}

TEST_F(Reconcile, ADeletedJobIsNoError) {
  const auto result = reconcile();
  EXPECT_FALSE(result.failed);
  EXPECT_TRUE(api_->writes.empty());
}

std::optional<json> conditionOf(const json& job, const std::string& type) {
  for (const auto& condition : job["status"].value("conditions", json::array())) {
    if (condition.value("type", "") == type) {
      return condition;
    }
  }
  return std::nullopt;
}

// Hundreds of errors still fit the condition's 32 KiB: the user sees SpecValid=False with as
// many as fit and how many more there are.
TEST_F(Reconcile, AnInvalidSpecWithThousandsOfErrorsStillSaysSo) {
  json invalid = gpt2Job();
  for (int i = 0; i < 3000; ++i) {
    invalid["spec"]["argMappings"]["no_such_key_" + std::to_string(i)] = "--flag";
  }
  submit(invalid);
  reconcile();
  const std::optional<json> specValid = conditionOf(job(), "SpecValid");
  ASSERT_TRUE(specValid.has_value());
  EXPECT_EQ((*specValid)["status"], "False");
  const std::string message = (*specValid)["message"];
  EXPECT_LE(message.size(), 32768U);
  EXPECT_TRUE(message.ends_with(" more")) << message.substr(message.size() - 40);
  EXPECT_NE(message.find("spec.argMappings.no_such_key_0: "), std::string::npos);
}

// A reconcile that throws is its job's problem: the job says so, and recovers when the next
// reconcile succeeds.
TEST_F(Reconcile, AReconcileThatThrowsIsReportedOnTheJobAndClearedWhenOneSucceeds) {
  submit(gpt2Job());
  ReconcilerHooks throwing;
  throwing.trialLaunched = [](const api::AutotuneJob&, const std::string&) {
    throw std::runtime_error("boom in a hook");
  };
  const runtime::ReconcileResult result = reconcile(throwing);
  EXPECT_TRUE(result.failed);
  ASSERT_TRUE(result.exception.has_value());
  EXPECT_NE(result.exception->find("boom in a hook"), std::string::npos);
  std::optional<json> reconciled = conditionOf(job(), "Reconciled");
  ASSERT_TRUE(reconciled.has_value()) << job().dump();
  EXPECT_EQ((*reconciled)["status"], "False");
  EXPECT_EQ((*reconciled)["reason"], "ReconcileException");
  EXPECT_NE((*reconciled)["message"].get<std::string>().find("boom in a hook"), std::string::npos);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_TRUE(std::any_of(events.begin(), events.end(), [](const json& event) {
    return event["reason"] == "ReconcileException" && event["type"] == "Warning";
  }));

  EXPECT_FALSE(reconcile().failed);
  reconciled = conditionOf(job(), "Reconciled");
  ASSERT_TRUE(reconciled.has_value());
  EXPECT_EQ((*reconciled)["status"], "True");
  EXPECT_EQ((*reconciled)["reason"], "Recovered");
}

// A trial whose last words are a progress bar cut through a character (the kubelet keeps the
// last 4 KiB): its reason is valid UTF-8, it is recorded, and its Pod goes.
TEST_F(Reconcile, ATrialMessageCutThroughACharacterIsRecordedAndItsPodDeleted) {
  submit(gpt2Job());
  reconcile();
  const std::string first = pods().front()["metadata"]["name"];
  std::string bar;
  for (int i = 0; i < 800; ++i) {
    bar += "\xE2\x96\x88";  // U+2588, a tqdm bar's block
  }
  finish(first, 1, "\x96\x88" + bar + "\r 45%|" + bar + "\xE2\x96");
  const runtime::ReconcileResult result = reconcile();
  EXPECT_FALSE(result.failed);
  EXPECT_FALSE(result.exception.has_value());
  const json results = job()["status"]["results"];
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0]["outcome"], "Failed");
  EXPECT_FALSE(api_->objects.contains(std::string(kPodsPath) + "/" + first));
}

// A Pod left by an earlier job of the same name (deleted with --cascade=orphan) holds a trial's
// name: the job says so in that trial's result and goes on, and the Pod stays as it is.
TEST_F(Reconcile, APodOfAnotherOwnerWithATrialsNameIsReportedNeverAdopted) {
  submit(gpt2Job());
  reconcile();
  const std::string taken = pods().front()["metadata"]["name"];
  api_->objects.clear();
  const std::string foreignPath = std::string(kPodsPath) + "/" + taken;
  api_->objects[foreignPath] = {
      {"metadata",
       {{"name", taken},
        {"namespace", "ml"},
        {"resourceVersion", "1"},
        {"ownerReferences",
         {{{"kind", "AutotuneJob"}, {"name", "gpt2"}, {"uid", "uid-old"}, {"controller", true}}}}}},
      {"status", {{"phase", "Running"}}}};
  submit(gpt2Job());
  reconcile();

  const json results = job()["status"]["results"];
  ASSERT_EQ(results.size(), 1U) << job()["status"].dump();
  EXPECT_EQ(results[0]["outcome"], "Failed");
  EXPECT_NE(results[0]["reason"].get<std::string>().find("is not this job's"), std::string::npos);
  EXPECT_EQ(api_->objects.at(foreignPath)["metadata"]["ownerReferences"][0]["uid"], "uid-old");
  EXPECT_EQ(api_->count("DELETE " + foreignPath), 0);
  EXPECT_EQ(pods().size(), 2U);  // the foreign Pod and the other trial's
}

// A grid of one configuration: z1_gas1_tmbspg3.
json singleTrialJob() {
  json single = gpt2Job();
  single["spec"]["search"] = {{"strategy", "grid"}, {"earlyStopping", 0}};
  single["spec"]["deepspeedConfig"]["zero_optimization"]["stage"] = 1;
  single["spec"]["deepspeedConfig"]["train_micro_batch_size_per_gpu"] = 3;
  return single;
}

constexpr std::string_view kMeasurements = "/api/v1/namespaces/ml/configmaps/autotune-m-";

// A trial that failed says nothing of its config that holds for another job (a registry outage,
// a bad node): it is recorded, and not kept.
TEST_F(Reconcile, AFailedTrialIsNotKept) {
  cluster_.addMeasurements("");
  submit(singleTrialJob());
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 1, "RuntimeError: NCCL error: unhandled system error");
  reconcile();
  ASSERT_EQ(job()["status"]["results"].size(), 1U);
  EXPECT_EQ(job()["status"]["results"][0]["outcome"], "Failed");
  const auto kept = api_->under(std::string(kMeasurements));
  EXPECT_TRUE(kept.empty()) << kept.size() << " kept";
}

// The trials a reconcile records are kept together: one ConfigMap, one request, however many
// ended; a job created again takes each of them.
TEST_F(Reconcile, TrialsRecordedTogetherAreKeptInOneRequest) {
  MeasurementStore& measurements = cluster_.addMeasurements("");
  json two = singleTrialJob();
  two["spec"]["deepspeedConfig"]["train_micro_batch_size_per_gpu"] = {2, 3};
  submit(two);
  reconcile();
  ASSERT_EQ(pods().size(), 2U);
  api_->writes.clear();
  for (const auto& trial : pods()) {
    finish(trial["metadata"]["name"], 0, R"({"throughput": 59.0, "latency": 1.0})");
  }
  reconcile();
  ASSERT_EQ(job()["status"]["phase"], "Succeeded") << job()["status"].dump();
  const std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  EXPECT_EQ(kept[0]["data"].size(), 4U) << "two measurements, two keys each";
  EXPECT_EQ(api_->count("POST /api/v1/namespaces/ml/configmaps"), 2)
      << "the measurements and the output";

  measurements.replace(kept);
  createAgain(two);
  reconcile();
  EXPECT_TRUE(pods().empty());
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(job()["status"]["trials"]["reused"], 2);
  const json results = job()["status"]["results"];
  for (const auto& result : results) {
    EXPECT_EQ(result["reusedFrom"], kept[0]["metadata"]["name"]);
  }
}

// A finished trial is kept as a measurement ConfigMap; the job deleted and created again (another
// UID) takes it from the cache as the trial's result, and creates no Pod.
TEST_F(Reconcile, AFinishedTrialIsKeptAndTheSameJobCreatedAgainTakesIt) {
  MeasurementStore& measurements = cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  measurements.replace(kept);

  createAgain(singleTrialJob());
  api_->writes.clear();
  reconcile();
  EXPECT_EQ(api_->count("POST " + std::string(kPodsPath)), 0);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  const json results = job()["status"]["results"];
  ASSERT_EQ(results.size(), 1U);
  EXPECT_EQ(results[0]["value"], 59.0);
  EXPECT_TRUE(results[0]["reusedFrom"].get<std::string>().starts_with("autotune-m-"));
  EXPECT_EQ(job()["status"]["trials"]["reused"], 1);
  EXPECT_GT(job()["status"]["gpuHours"]["saved"].get<double>(), 0);
}

// Nodes labelled as GPU feature discovery labels nodes of that GPU model.
std::vector<json> nodesOfModel(const std::string& product) {
  std::vector<json> labelled = {node("gpu-0", 16), node("gpu-1", 16)};
  for (auto& gpuNode : labelled) {
    gpuNode["metadata"]["labels"]["nvidia.com/gpu.product"] = product;
  }
  return labelled;
}

// Each result names the GPU model its trial ran on, as its node is labelled, and a result taken
// from a kept measurement names the model it was measured on.
TEST_F(Reconcile, AResultNamesTheGpuModelItsTrialRanOn) {
  cluster_.nodes().replace(nodesOfModel("NVIDIA-H100-80GB-HBM3"));
  MeasurementStore& measurements = cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(job()["status"]["results"][0]["gpuModel"], "NVIDIA-H100-80GB-HBM3");

  measurements.replace(keptMeasurements());
  createAgain(singleTrialJob());
  reconcile();
  const json reused = job()["status"]["results"][0];
  EXPECT_FALSE(reused["reusedFrom"].get<std::string>().empty()) << reused.dump();
  EXPECT_EQ(reused["gpuModel"], "NVIDIA-H100-80GB-HBM3");
}

// A model as long as a label value may be is recorded cut, ending in a hash of the whole.
TEST_F(Reconcile, ALongGpuModelIsRecordedCut) {
  const std::string product = "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-with-a-vendor-suffix-01234567";
  ASSERT_EQ(product.size(), 63U);
  cluster_.nodes().replace(nodesOfModel(product));
  runOneTrial(singleTrialJob());
  const std::string recorded = job()["status"]["results"][0]["gpuModel"];
  EXPECT_LE(recorded.size(), api::kMaxRecordedGpuModel);
  EXPECT_EQ(recorded, tuning::boundedName(product, api::kMaxRecordedGpuModel));
  EXPECT_EQ(recorded.substr(0, 20), product.substr(0, 20));
}

// On a DRA node without GPU feature discovery's labels, the driver's slice names the GPU a trial
// ran on, as the label would, and gives its memory: results and kept measurements say which.
TEST_F(Reconcile, OnANodeOfDraSlicesAloneTheSliceNamesTheGpuATrialRanOn) {
  std::vector<json> unlabelled = {node("gpu-0", 0), node("gpu-1", 0)};
  std::vector<json> slices;
  for (auto& draNode : unlabelled) {
    draNode["metadata"].erase("labels");
    draNode["status"]["allocatable"] = json::object();
    const std::string name = draNode["metadata"]["name"];
    json devices = json::array();
    for (int index = 0; index < 16; ++index) {
      devices.push_back({{"name", "gpu-" + std::to_string(index)},
                         {"attributes", {{"productName", {{"string", "NVIDIA H100 80GB HBM3"}}}}},
                         {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
    }
    slices.push_back(
        {{"metadata", {{"name", name + "-gpus"}, {"resourceVersion", "1"}}},
         {"spec", {{"driver", "gpu.nvidia.com"}, {"nodeName", name}, {"devices", devices}}}});
  }
  cluster_.nodes().replace(unlabelled);
  cluster_.addDeviceSlices("gpu.nvidia.com").replace(slices);
  cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(job()["status"]["results"][0]["gpuModel"], "NVIDIA-H100-80GB-HBM3");
  const std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  const json identity =
      json::parse(kept[0]["data"][keyEndingIn(kept[0], ".identity.json")].get<std::string>());
  EXPECT_EQ(identity["gpu"], json::parse(R"({"product": "NVIDIA-H100-80GB-HBM3",
                                              "memoryBytes": 85899345920})"));
}

// A measurement the cache holds sealed, but which the API server already holds edited or no longer
// holds (the watch has not told yet), is not taken: the trial runs.
TEST_F(Reconcile, AMeasurementIsTakenAsTheApiServerHoldsItNotAsTheCacheLastSawIt) {
  MeasurementStore& measurements = cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  measurements.replace(kept);
  const std::string path =
      "/api/v1/namespaces/ml/configmaps/" + kept[0]["metadata"]["name"].get<std::string>();

  json& edited = api_->objects.at(path);
  edited["data"][keyEndingIn(edited, ".result.json")] = std::string(1'000'000, 'x');
  edited["metadata"]["resourceVersion"] = "edited";  // as the API server marks every write
  createAgain(singleTrialJob());
  reconcile();
  EXPECT_EQ(pods().size(), 1U) << "the edited measurement was taken from the cache";
  EXPECT_EQ(job()["status"]["trials"]["reused"], 0);

  for (const auto& trial : pods()) {
    api_->objects.erase(std::string(kPodsPath) + "/" +
                        trial["metadata"]["name"].get<std::string>());
  }
  api_->objects.erase(path);
  createAgain(singleTrialJob());
  reconcile();
  EXPECT_EQ(pods().size(), 1U) << "the deleted measurement was taken from the cache";
  EXPECT_EQ(job()["status"]["trials"]["reused"], 0);
}

// The Pods of a job deleted and created again under its name are remembered as deleted; they
// hold no names, and are no one's: the new job runs its trials under them.
TEST_F(Reconcile, AJobCreatedAgainUnderItsNameRunsTheTrialsOfTheOneBefore) {
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  ASSERT_TRUE(pods().empty()) << "deleted once recorded, and remembered so";

  json again = singleTrialJob();
  again["spec"]["reuse"] = "Disabled";
  createAgain(std::move(again));
  reconcile();
  EXPECT_EQ(pods().size(), 1U);
  EXPECT_TRUE(job()["status"]["results"].empty()) << job()["status"].dump();
}

// Measurements kept again under a name the cache holds sealed (the same job's of the same trials,
// as after a crash between their write and the status's) are written over where they stand: one
// PATCH at the version held, without a create refused as AlreadyExists and a read. A stale cache
// costs the create and the read, and still keeps them. Another job's measurements of the same
// trials go into a ConfigMap of their own, created in one request.
TEST_F(Reconcile, MeasurementsKeptAgainCostOneRequest) {
  MeasurementStore& measurements = cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  const std::string path =
      "/api/v1/namespaces/ml/configmaps/" + kept[0]["metadata"]["name"].get<std::string>();
  const std::string resultKey = keyEndingIn(kept[0], ".result.json");
  const auto measureAgain = [&](json cached, const std::string& uid) {
    measurements.replace({std::move(cached)});
    json again = singleTrialJob();
    again["spec"]["reuse"] = "Disabled";
    createAgain(std::move(again));
    api_->objects[std::string(kJobs) + "/gpt2"]["metadata"]["uid"] = uid;
    reconcile();
    ASSERT_EQ(pods().size(), 1U) << job()["status"].dump();
    api_->writes.clear();
    api_->reads.clear();
    finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 61.0})");
    reconcile();
    EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  };

  measureAgain(kept[0], "uid-gpt2");
  EXPECT_EQ(api_->count("PATCH " + path), 1);
  EXPECT_EQ(api_->count("POST /api/v1/namespaces/ml/configmaps"), 1) << "the output alone";
  EXPECT_EQ(std::ranges::count(api_->reads, "GET " + path), 0);
  EXPECT_NE(api_->objects.at(path)["data"][resultKey].get<std::string>().find("61"),
            std::string::npos);

  json stale = api_->objects.at(path);
  stale["metadata"]["resourceVersion"] = "1";
  measureAgain(stale, "uid-gpt2");
  EXPECT_EQ(std::ranges::count(api_->reads, "GET " + path), 1);
  EXPECT_EQ(api_->objects.at(path)["metadata"]["annotations"]["autotune.io/measured-by-uid"],
            "uid-gpt2");

  const json before = api_->objects.at(path);
  measureAgain(before, "uid-second");
  EXPECT_EQ(api_->count("POST /api/v1/namespaces/ml/configmaps"), 2)
      << "its measurement and the output";
  EXPECT_EQ(api_->count("PATCH " + path), 0);
  EXPECT_EQ(api_->objects.at(path), before);
  EXPECT_EQ(keptMeasurements().size(), 2U);
}

// A ConfigMap that is not a measurement (no autotune.io/measurement label) under the name the
// operator is about to keep measurements at is left alone: the job gets a Warning Event naming it
// and the trials, and goes on.
TEST_F(Reconcile, AConfigMapNotOursUnderTheNameOfMeasurementsIsLeftAlone) {
  cluster_.addMeasurements("");
  runOneTrial(singleTrialJob());
  const std::vector<json> kept = keptMeasurements();
  ASSERT_EQ(kept.size(), 1U);
  const std::string path =
      "/api/v1/namespaces/ml/configmaps/" + kept[0]["metadata"]["name"].get<std::string>();
  json& squatted = api_->objects.at(path);
  squatted["metadata"]["labels"].erase("autotune.io/measurement");
  squatted["metadata"]["resourceVersion"] = "someone-else";
  const json before = squatted;

  json again = singleTrialJob();
  again["spec"]["reuse"] = "Disabled";
  createAgain(std::move(again));
  // The same UID, so the same name: as after a crash between the write and the status.
  api_->objects[std::string(kJobs) + "/gpt2"]["metadata"]["uid"] = "uid-gpt2";
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 61.0})");
  EXPECT_FALSE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(api_->objects.at(path), before);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  const auto notKept = std::ranges::find_if(
      events, [](const json& event) { return event["reason"] == "MeasurementNotKept"; });
  ASSERT_NE(notKept, events.end());
  const std::string message = (*notKept)["message"];
  for (const std::string_view said : {"The measurement of trial z1_gas1_tmbspg3 was not kept",
                                      "exists and is not a measurement", "it is left alone"}) {
    EXPECT_NE(message.find(said), std::string::npos) << said << " / " << message;
  }
}

// A measurement the API server refuses to keep (here a quota on ConfigMaps) costs the job nothing
// but a Warning Event: its result is recorded and the search ends as it would.
TEST_F(Reconcile, AMeasurementTheApiServerRefusesIsNotKeptAndTheJobGoesOn) {
  submit(singleTrialJob());
  api_->refused[std::string(kMeasurements) + "*"] =
      "configmaps \"autotune-m-x\" is forbidden: exceeded quota: team-quota, requested: "
      "count/configmaps=1, used: count/configmaps=10, limited: count/configmaps=10";
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0})");
  EXPECT_FALSE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(job()["status"]["results"].size(), 1U);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  const auto notKept = std::ranges::find_if(
      events, [](const json& event) { return event["reason"] == "MeasurementNotKept"; });
  ASSERT_NE(notKept, events.end());
  EXPECT_EQ((*notKept)["type"], "Warning");
  EXPECT_NE((*notKept)["message"].get<std::string>().find("exceeded quota"), std::string::npos)
      << notKept->dump();
}

// An output the API server refuses (here RBAC; a name taken or a size limit are alike): the job
// says so in a condition and one Warning Event, keeps its results, retries, and completes once the
// write goes through.
TEST_F(Reconcile, AnOutputThatCannotBeWrittenIsReportedAndRetriedUntilItIs) {
  submit(singleTrialJob());
  const std::string output = "/api/v1/namespaces/ml/configmaps/gpt2-optimal";
  api_->refused[output] = "configmaps is forbidden";
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0})");

  EXPECT_TRUE(reconcile().failed);
  EXPECT_TRUE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Running");
  EXPECT_EQ(job()["status"]["results"].size(), 1U);
  std::optional<json> written = conditionOf(job(), "OutputWritten");
  ASSERT_TRUE(written.has_value()) << job()["status"].dump();
  EXPECT_EQ((*written)["status"], "False");
  EXPECT_EQ((*written)["reason"], "OutputWriteFailed");
  EXPECT_NE((*written)["message"].get<std::string>().find("ConfigMap gpt2-optimal"),
            std::string::npos);
  EXPECT_NE((*written)["message"].get<std::string>().find("Forbidden"), std::string::npos);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const json& event) { return event["reason"] == "OutputWriteFailed"; }),
            1);

  api_->refused.clear();
  EXPECT_FALSE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  written = conditionOf(job(), "OutputWritten");
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ((*written)["status"], "True");
  EXPECT_TRUE(api_->objects.contains(output));
}

// A ResourceQuota refusing a trial's Pod: the trial is not counted in flight and spends no
// attempt; the job says it waits for quota, in the quota's words, with one Event; once the quota
// has room the trial's first Pod is created.
TEST_F(Reconcile, ACreateTheQuotaRefusesWaitsAndRunsOnceThereIsRoom) {
  submit(singleTrialJob());
  const std::string podPath = std::string(kPodsPath) + "/gpt2-z1-gas1-tmbspg3";
  api_->refused[podPath] =
      "pods \"gpt2-z1-gas1-tmbspg3\" is forbidden: exceeded quota: gpu, requested: "
      "requests.nvidia.com/gpu=16, used: requests.nvidia.com/gpu=8, limited: "
      "requests.nvidia.com/gpu=16";
  EXPECT_TRUE(reconcile().failed);  // looked at again with backoff
  EXPECT_TRUE(reconcile().failed);
  json status = job()["status"];
  EXPECT_FALSE(status.contains("inFlight")) << status.dump();
  EXPECT_EQ(status["trials"]["launched"], 0);
  EXPECT_EQ(status["trials"]["queued"], 1);
  const std::optional<json> running = conditionOf(job(), "Running");
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ((*running)["reason"], "QuotaExceeded");
  EXPECT_NE((*running)["message"].get<std::string>().find("exceeded quota: gpu"),
            std::string::npos);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_EQ(std::ranges::count_if(
                events, [](const json& event) { return event["reason"] == "QuotaExceeded"; }),
            1);

  api_->refused.clear();
  EXPECT_FALSE(reconcile().failed);
  EXPECT_TRUE(api_->objects.contains(podPath));
  status = job()["status"];
  ASSERT_EQ(status["inFlight"].size(), 1U);
  EXPECT_EQ(status["inFlight"][0]["attempt"], 0);
}

// Pod Security refusing the template: the job fails at once, in the server's words, and nothing
// is created again.
TEST_F(Reconcile, ATemplateThePodSecurityAdmissionRefusesFailsTheJob) {
  submit(singleTrialJob());
  const std::string podPath = std::string(kPodsPath) + "/gpt2-z1-gas1-tmbspg3";
  api_->refused[podPath] =
      "pods \"gpt2-z1-gas1-tmbspg3\" is forbidden: violates PodSecurity \"restricted:latest\": "
      "allowPrivilegeEscalation != false";
  reconcile();
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_NE(status["message"].get<std::string>().find("violates PodSecurity"), std::string::npos);
  api_->writes.clear();
  reconcile();
  EXPECT_EQ(api_->count("POST " + std::string(kPodsPath)), 0);
}

// Deleting a trial's Pod names the Pod it saw: one made since under that name is left alone.
TEST_F(Reconcile, APodMadeSinceUnderATrialsNameIsNeverDeleted) {
  submit(singleTrialJob());
  reconcile();
  const std::string name = pods()[0]["metadata"]["name"];
  finish(name, 0, R"({"throughput": 59.0})");
  syncCaches();
  pod(name)["metadata"]["uid"] = "uid-someone-else";
  Reconciler reconciler(client_, cluster_);
  reconciler.reconcile(
      "ml/gpt2", Context{observability::Logger(observability::LogLevel::kError, log_), now_, {}});
  EXPECT_EQ(job()["status"]["results"].size(), 1U);
  EXPECT_TRUE(api_->objects.contains(std::string(kPodsPath) + "/" + name));
}

// A Pod made by anyone who may create Pods in the namespace, labelled for an ended job, carrying
// the annotations a multi-node trial's Pods once had and a controller reference to a Job of
// someone else's: it is not the job's trial, so neither that Job nor the Pod is deleted, and one
// Warning Event tells of it however often the job is reconciled.
TEST_F(Reconcile, AForgedPodNeverMakesTheOperatorDeleteAnotherJob) {
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  const std::string etl = "/apis/batch/v1/namespaces/ml/jobs/nightly-etl";
  api_->objects[etl] = {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"name", "nightly-etl"}, {"namespace", "ml"}, {"uid", "uid-etl"}}},
      {"spec", {{"suspend", true}}}};
  const std::string ghost = std::string(kPodsPath) + "/ghost";
  api_->objects[ghost] = {
      {"metadata",
       {{"name", "ghost"},
        {"namespace", "ml"},
        {"uid", "uid-ghost"},
        {"resourceVersion", "1"},
        {"labels", {{"autotune.io/job", "gpt2"}}},
        {"annotations",
         {{"autotune.io/owner-name", "gpt2"},
          {"autotune.io/owner-uid", "uid-gpt2"},
          {"autotune.io/trial-name", "z1_gas1_tmbspg3"},
          {"batch.kubernetes.io/job-completion-index", "0"}}},
        {"ownerReferences",
         {{{"apiVersion", "batch/v1"},
           {"kind", "Job"},
           {"name", "nightly-etl"},
           {"uid", "uid-etl"},
           {"controller", true}}}}}},
      {"spec", {{"nodeName", "gpu-0"}, {"containers", {{{"name", "trainer"}}}}}},
      {"status", {{"phase", "Succeeded"}}}};
  reconcile();
  reconcile();

  EXPECT_EQ(api_->count("DELETE " + etl), 0);
  EXPECT_EQ(api_->count("DELETE " + ghost), 0);
  EXPECT_TRUE(api_->objects.contains(etl));
  EXPECT_TRUE(api_->objects.contains(ghost));
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  const auto told = std::ranges::count_if(events, [](const json& event) {
    return event["reason"] == "ForeignPod" && event["type"] == "Warning" &&
           event["message"].get<std::string>().find("Pod ghost") != std::string::npos;
  });
  EXPECT_EQ(told, 1);
  EXPECT_EQ(api_->count("POST /api/v1/namespaces/ml/events"), static_cast<int>(events.size()))
      << "the Event is not sent again";
}

// A ConfigMap of the output's name that is not this job's is never written over: server-side
// apply with force would take it over, and garbage collection would delete it with the job.
TEST_F(Reconcile, AnOutputNameTakenByAnotherConfigMapIsAConflictThatLeavesItAlone) {
  submit(singleTrialJob());
  const std::string output = "/api/v1/namespaces/ml/configmaps/gpt2-optimal";
  const json theirs = {{"apiVersion", "v1"},
                       {"kind", "ConfigMap"},
                       {"metadata",
                        {{"name", "gpt2-optimal"},
                         {"namespace", "ml"},
                         {"ownerReferences",
                          {{{"apiVersion", "apps/v1"},
                            {"kind", "Deployment"},
                            {"name", "web"},
                            {"uid", "web-1"},
                            {"controller", true}}}}}},
                       {"data", {{"settings", "theirs"}}}};
  api_->objects[output] = theirs;
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0})");

  EXPECT_TRUE(reconcile().failed);
  EXPECT_TRUE(reconcile().failed);
  EXPECT_EQ(api_->objects.at(output)["data"], theirs["data"]);
  EXPECT_EQ(api_->count("PATCH " + output), 0);
  EXPECT_EQ(job()["status"]["phase"], "Running");
  EXPECT_EQ(job()["status"]["results"].size(), 1U);
  const std::optional<json> written = conditionOf(job(), "OutputWritten");
  ASSERT_TRUE(written.has_value()) << job()["status"].dump();
  EXPECT_EQ((*written)["status"], "False");
  EXPECT_EQ((*written)["reason"], "OutputConflict");
  EXPECT_NE((*written)["message"].get<std::string>().find("controlled by Deployment web"),
            std::string::npos)
      << (*written)["message"];
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_EQ(std::count_if(events.begin(), events.end(),
                          [](const json& event) { return event["reason"] == "OutputConflict"; }),
            1);

  // Once the other ConfigMap is gone, the output is written and the job succeeds.
  api_->objects.erase(output);
  EXPECT_FALSE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(api_->objects.at(output)["metadata"]["annotations"]["autotune.io/job-uid"],
            job()["metadata"]["uid"]);
}

// An output written before a restart (retained: no owner reference) is the job's to write again.
TEST_F(Reconcile, AnOutputThisJobWroteIsWrittenAgainEvenWithoutAnOwner) {
  json retained = singleTrialJob();
  retained["spec"]["output"] = {{"retain", true}};
  submit(retained);
  reconcile();
  ASSERT_EQ(pods().size(), 1U);
  finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0})");
  const std::string output = "/api/v1/namespaces/ml/configmaps/gpt2-optimal";
  api_->objects[output] = {{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata",
                            {{"name", "gpt2-optimal"},
                             {"namespace", "ml"},
                             {"annotations", {{"autotune.io/job-uid", job()["metadata"]["uid"]}}}}},
                           {"data", {{"results.json", "from before the restart"}}}};

  EXPECT_FALSE(reconcile().failed);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded");
  EXPECT_EQ(api_->count("PATCH " + output), 1);
  EXPECT_FALSE(api_->objects.at(output)["metadata"].contains("ownerReferences"));
  EXPECT_NE(api_->objects.at(output)["data"]["results.json"], "from before the restart");
}

// The reconcile that records the last trial also writes the output: that trial is in it.
TEST_F(Reconcile, TheOutputHoldsTheTrialRecordedByTheReconcileThatWritesIt) {
  runOneTrial(singleTrialJob());
  ASSERT_EQ(job()["status"]["phase"], "Succeeded");
  const std::string results =
      api_->objects.at("/api/v1/namespaces/ml/configmaps/gpt2-optimal")["data"]["results.json"];
  EXPECT_NE(results.find(R"("name":"z1_gas1_tmbspg3")"), std::string::npos) << results;
}

// A single-trial job with an afterTuning Job, whose name a Job already holds: the job's own (from a
// reconcile cut short after creating it) or a CronJob's.
class AfterTuningHeld : public Reconcile {
 protected:
  void runWithHolder(bool ours) {
    api_->objects[std::string(kPath)] = {{"metadata",
                                          {{"name", "gpt2-after-tuning"},
                                           {"namespace", "ml"},
                                           {"uid", "uid-held"},
                                           {"ownerReferences",
                                            {{{"kind", ours ? "AutotuneJob" : "CronJob"},
                                              {"name", ours ? "gpt2" : "nightly"},
                                              {"uid", ours ? "uid-gpt2" : "uid-nightly"},
                                              {"controller", true}}}}}}};
    runWithoutHolder();
  }

  void runWithoutHolder() {
    json single = singleTrialJob();
    single["spec"]["afterTuning"] = {
        {"spec",
         {{"template",
           {{"spec",
             {{"restartPolicy", "Never"},
              {"containers", {{{"name", "train"}, {"image", "example.org/train:1.0"}}}}}}}}}}};
    submit(single);
    reconcile();
    ASSERT_EQ(pods().size(), 1U) << job()["status"].dump();
    finish(pods()[0]["metadata"]["name"], 0, R"({"throughput": 59.0})");
    reconcile();
  }

  int nameTakenEvents() const {
    const auto events = api_->under("/api/v1/namespaces/ml/events/");
    return static_cast<int>(std::count_if(events.begin(), events.end(), [](const json& event) {
      return event["reason"] == "AfterTuningNameTaken" &&
             event["message"].get<std::string>().find("controlled by CronJob nightly") !=
                 std::string::npos;
    }));
  }

  static constexpr std::string_view kPath = "/apis/batch/v1/namespaces/ml/jobs/gpt2-after-tuning";
};

// Someone else's Job is left alone and not named as the job's; condition AfterTuningFailed and a
// Warning Event say whose it is.
TEST_F(AfterTuningHeld, SomeoneElsesJobIsNotClaimed) {
  runWithHolder(false);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded") << job()["status"].dump();
  EXPECT_FALSE(job()["status"].contains("afterTuningJob")) << job()["status"].dump();
  EXPECT_EQ(api_->objects.at(std::string(kPath))["metadata"]["uid"], "uid-held");
  EXPECT_EQ(nameTakenEvents(), 1);
  const json conditions = job()["status"]["conditions"];
  EXPECT_TRUE(std::ranges::any_of(conditions, [](const json& condition) {
    return condition["type"] == "AfterTuningFailed" && condition["reason"] == "NameTaken" &&
           condition["message"].get<std::string>().find("CronJob nightly") != std::string::npos;
  })) << conditions.dump();
}

// The job's own Job is the one it meant to create: named, and no Event.
TEST_F(AfterTuningHeld, TheJobsOwnJobIsNamed) {
  runWithHolder(true);
  EXPECT_EQ(job()["status"]["phase"], "Succeeded") << job()["status"].dump();
  EXPECT_EQ(job()["status"]["afterTuningJob"], "gpt2-after-tuning");
  EXPECT_EQ(nameTakenEvents(), 0);
}

// The afterTuning Job refused for good (a webhook, a policy, an invalid object): the job still
// Succeeds, its output written and its trial recorded, and says why in condition
// AfterTuningFailed and a Warning Event. A refusal the operator's rights explain is tried again.
TEST_F(AfterTuningHeld, ARefusedAfterTuningJobIsAConditionOfASucceededJob) {
  api_->refused[std::string(kPath)] =
      "admission webhook \"jobs.example.com\" denied the request: no Jobs on weekends";
  runWithoutHolder();
  const json status = job()["status"];
  EXPECT_EQ(status["phase"], "Succeeded") << status.dump();
  EXPECT_EQ(status["results"].size(), 1U);
  EXPECT_FALSE(status.contains("afterTuningJob"));
  EXPECT_TRUE(api_->objects.contains("/api/v1/namespaces/ml/configmaps/gpt2-optimal"));
  const json* failed = nullptr;
  for (const auto& condition : status["conditions"]) {
    if (condition["type"] == "AfterTuningFailed") {
      failed = &condition;
    }
  }
  ASSERT_NE(failed, nullptr) << status.dump();
  EXPECT_EQ((*failed)["status"], "True");
  EXPECT_EQ((*failed)["reason"], "CreateRefused");
  EXPECT_NE((*failed)["message"].get<std::string>().find("no Jobs on weekends"), std::string::npos);
  const auto events = api_->under("/api/v1/namespaces/ml/events/");
  EXPECT_EQ(std::ranges::count_if(
                events, [](const json& event) { return event["reason"] == "AfterTuningFailed"; }),
            1);
}

TEST_F(AfterTuningHeld, AnAfterTuningJobTheOperatorsRightsRefusedIsTriedAgain) {
  api_->refused[std::string(kPath)] =
      "jobs.batch is forbidden: User \"system:serviceaccount:ops:autotune\" cannot create "
      "resource \"jobs\" in API group \"batch\" in the namespace \"ml\"";
  runWithoutHolder();
  EXPECT_NE(job()["status"]["phase"], "Succeeded") << job()["status"].dump();
  api_->refused.clear();
  reconcile();
  EXPECT_EQ(job()["status"]["phase"], "Succeeded") << job()["status"].dump();
  EXPECT_EQ(job()["status"]["afterTuningJob"], "gpt2-after-tuning");
  EXPECT_TRUE(api_->objects.contains(std::string(kPath)));
}

// --- Kueue --------------------------------------------------------------------------------------

// The reconciler with Kueue's objects watched (--kueue), and a Workload for a trial Pod as Kueue
// 0.17 makes one: owned by the Pod, its quota not reserved yet.
class KueueReconcile : public Reconcile {
 protected:
  void pendingWorkload(const json& pod, const std::string& message) {
    const std::string name = pod["metadata"]["name"];
    workloads_.upsert({{"metadata",
                        {{"name", "pod-" + name + "-63e32"},
                         {"namespace", "ml"},
                         {"ownerReferences",
                          {{{"apiVersion", "v1"},
                            {"kind", "Pod"},
                            {"name", name},
                            {"uid", pod["metadata"]["uid"]},
                            {"controller", true}}}}}},
                       {"status",
                        {{"conditions",
                          {{{"type", "QuotaReserved"},
                            {"status", "False"},
                            {"reason", "Pending"},
                            {"message", message}}}}}}});
  }

  // As Kueue's webhook holds a trial Pod until its Workload is admitted.
  void gate(const std::string& name) {
    json& trial = pod(name);
    trial["spec"]["schedulingGates"] = {{{"name", "kueue.x-k8s.io/admission"}}};
    trial["status"] = {
        {"phase", "Pending"},
        {"conditions",
         {{{"type", "PodScheduled"},
           {"status", "False"},
           {"reason", "SchedulingGated"},
           {"message", "Scheduling is blocked due to non-empty scheduling gates"}}}}};
  }

  WorkloadStore& workloads_ = cluster_.addWorkloads("");
  LocalQueueStore& queues_ = cluster_.addLocalQueues("");
};

json queuedJob() {
  json queued = gpt2Job();
  queued["spec"]["queueName"] = "team-a";
  return queued;
}

// A queue that does not exist holds every launch, saying so; once it exists, the trials are
// created, and those Kueue holds say why in its words, with no deadline but queueTimeout.
TEST_F(KueueReconcile, AJobWaitsForItsLocalQueueThenForAdmissionInKueuesWords) {
  submit(queuedJob());
  reconcile();
  EXPECT_TRUE(pods().empty());
  std::optional<json> running = conditionOf(job(), "Running");
  ASSERT_TRUE(running.has_value()) << job()["status"].dump();
  EXPECT_EQ((*running)["reason"], "LocalQueueNotFound");
  EXPECT_NE((*running)["message"].get<std::string>().find("LocalQueue team-a"), std::string::npos);

  queues_.upsert({{"metadata", {{"name", "team-a"}, {"namespace", "ml"}}}});
  reconcile();
  ASSERT_EQ(pods().size(), 2U);
  for (const auto& trial : pods()) {
    EXPECT_EQ(trial["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], "team-a");
    gate(trial["metadata"]["name"]);
  }
  syncCaches();
  const runtime::ReconcileResult waiting = reconcile();
  EXPECT_NE(conditionOf(job(), "Running")
                .value()["message"]
                .get<std::string>()
                .find("Kueue has not made its Workload yet"),
            std::string::npos);
  // Nothing else may wake a job whose trials Kueue gates: it looks again when the hint is due.
  ASSERT_TRUE(waiting.requeueAfter.has_value());
  EXPECT_LE(*waiting.requeueAfter, std::chrono::duration_cast<runtime::Duration>(seconds(31)));
  now_ += seconds(31);  // a Workload not seen by then is one the operator's watch may not see
  reconcile();
  EXPECT_NE(conditionOf(job(), "Running")
                .value()["message"]
                .get<std::string>()
                .find("integrations.labelKeysToCopy"),
            std::string::npos)
      << job()["status"].dump();
  for (const auto& trial : pods()) {
    pendingWorkload(trial,
                    "couldn't assign flavors to pod set main: insufficient unused quota for "
                    "nvidia.com/gpu in flavor default-flavor, 16 more needed");
  }
  now_ += minutes(20);  // past the scheduling timeout: a queued trial has none
  reconcile();
  EXPECT_EQ(pods().size(), 2U);
  running = conditionOf(job(), "Running");
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ((*running)["status"], "False");
  EXPECT_EQ((*running)["reason"], "WaitingForAdmission");
  EXPECT_NE((*running)["message"].get<std::string>().find(
                "waits for Kueue admission in LocalQueue team-a: couldn't assign flavors"),
            std::string::npos)
      << (*running)["message"];
  EXPECT_EQ(job()["status"]["trials"]["awaitingAdmission"], 2);
  EXPECT_EQ(job()["status"]["trials"]["queued"], 2);
  EXPECT_EQ(job()["status"]["phase"], "Running");
}

// Kueue evicting a multi-node trial suspends its Job, and the Job controller stops its Pods: the
// trial was preempted, to run again whole, not failed. Pods alive under a Job the cache still holds
// suspended were made by its resumption, which the Job watch has not delivered yet: the trial runs.
TEST(KueueObserve, AMultiNodeTrialWhoseJobKueueSuspendedIsPreempted) {
  json document = gpt2Job();
  document["metadata"]["uid"] = "uid-gpt2";
  document["spec"]["resources"]["nodesPerTrial"] = 2;
  document["spec"]["queueName"] = "team-a";
  const auto decoded = api::decode(document).value();
  const api::AutotuneJob& job = decoded.job;
  tuning::EngineInput input;
  input.spec = job.spec;
  input.freeSlots = 1;
  const tuning::Trial trial = tuning::decide(input).launch.at(0);
  json batchJob = trialBatchJob(job, trial);
  batchJob["metadata"]["uid"] = "uid-batch";
  batchJob["spec"]["suspend"] = true;
  Cluster cluster;
  auto& jobs = cluster.addAutotuneJobs("");
  auto& pods = cluster.addPods("");
  auto& batchJobs = cluster.addBatchJobs("");
  document["status"]["inFlight"] = {{{"name", trial.name}, {"attempt", 0}}};
  std::vector<json> rankPods;
  jobs.upsert(document);
  batchJobs.upsert(batchJob);
  for (int rank = 0; rank < 2; ++rank) {
    json pod = {{"metadata", batchJob["spec"]["template"]["metadata"]},
                {"spec", batchJob["spec"]["template"]["spec"]}};
    pod["metadata"]["name"] =
        batchJob["metadata"]["name"].get<std::string>() + "-" + std::to_string(rank) + "-x7k2q";
    pod["metadata"]["namespace"] = "ml";
    pod["metadata"]["ownerReferences"] = {{{"apiVersion", "batch/v1"},
                                           {"kind", "Job"},
                                           {"name", batchJob["metadata"]["name"]},
                                           {"uid", "uid-batch"},
                                           {"controller", true}}};
    pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] =
        std::to_string(rank);
    pod["spec"]["nodeName"] = "gpu-" + std::to_string(rank);
    pod["status"] = {{"phase", "Running"},
                     {"startTime", "2026-11-22T11:59:00Z"},
                     {"containerStatuses",
                      {{{"name", "trainer"},
                        {"state", {{"running", {{"startedAt", "2026-11-22T11:59:00Z"}}}}}}}}};
    pods.upsert(pod);
    rankPods.push_back(pod);
  }
  const Timestamp now = parseTime("2026-11-22T12:00:00Z").value();
  const Snapshot resumed = observe(cluster, *cluster.job("ml/gpt2"), now);
  ASSERT_EQ(resumed.inFlight.size(), 1U);
  EXPECT_EQ(resumed.inFlight[0].phase, TrialRunState::Phase::kRunning);
  EXPECT_FALSE(resumed.inFlight[0].preempted);

  for (auto& pod : rankPods) {
    pod["status"] = {{"phase", "Failed"},
                     {"containerStatuses",
                      {{{"name", "trainer"},
                        {"state", {{"terminated", {{"exitCode", 143}, {"reason", "Error"}}}}}}}}};
    pods.upsert(pod);
  }
  const Snapshot snapshot = observe(cluster, *cluster.job("ml/gpt2"), now);
  ASSERT_EQ(snapshot.inFlight.size(), 1U);
  EXPECT_TRUE(snapshot.concluded.empty());
  EXPECT_TRUE(snapshot.inFlight[0].preempted);
  EXPECT_TRUE(shouldRelaunch(snapshot.inFlight[0]));
  EXPECT_NE(snapshot.inFlight[0].message.find("suspended by a queueing system"), std::string::npos);

  // Evicted for its waitForPodsReady timeout rather than preempted, the trial spends an attempt.
  auto& workloads = cluster.addWorkloads("");
  workloads.upsert({{"metadata",
                     {{"name", "job-gpt2-z1-63e32"},
                      {"namespace", "ml"},
                      {"ownerReferences",
                       {{{"apiVersion", "batch/v1"},
                         {"kind", "Job"},
                         {"name", batchJob["metadata"]["name"]},
                         {"uid", "uid-batch"},
                         {"controller", true}}}}}},
                    {"status",
                     {{"conditions",
                       {{{"type", "Evicted"},
                         {"status", "True"},
                         {"reason", "PodsReadyTimeout"},
                         {"message", "Exceeded the PodsReady timeout ml/job-gpt2-z1-63e32"}}}}}}});
  const Snapshot timedOut = observe(cluster, *cluster.job("ml/gpt2"), now);
  ASSERT_EQ(timedOut.inFlight.size(), 1U);
  EXPECT_EQ(timedOut.inFlight[0].phase, TrialRunState::Phase::kLost);
  EXPECT_FALSE(timedOut.inFlight[0].preempted);
  EXPECT_NE(timedOut.inFlight[0].message.find("PodsReadyTimeout"), std::string::npos);
}

}  // namespace
}  // namespace autotune::controller
