// Measurements kept beyond their job and reused by later ones: the identity that decides whether
// two trials measure the same thing, the ConfigMaps that keep them and what reads them back, and
// whole searches driven snapshot by snapshot through recall and plan, with the kept
// ConfigMaps in a map that a cache holds for each reconcile.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/labels.h"
#include "controller/cache/cluster.h"
#include "controller/decision/plan.h"
#include "controller/decision/recall.h"
#include "controller/objects/trial_pod.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using std::chrono::seconds;

const Timestamp kReconcileTime = parseTime("2026-11-26T12:00:00Z").value();
constexpr std::int64_t kMemory = 32LL << 30;

api::AutotuneJob jobOf(const std::string& ns, const std::string& name,
                       const std::string& extraSpec = "{}") {
  auto document = api::yamlToJson(R"(
apiVersion: autotune.io/v1alpha1
kind: AutotuneJob
metadata: {name: gpt2, namespace: ml, uid: uid-gpt2, generation: 1}
spec:
  deepspeedConfig:
    train_micro_batch_size_per_gpu: [1, 2, 3, 4]
    fp16: {enabled: true}
    zero_optimization: {stage: 1}
  model: {numParameters: 774000000, activationMemoryPerSample: 1000000000}
  resources: {gpusPerTrial: 8}
  search: {strategy: grid, earlyStopping: 0}
  template:
    spec:
      containers:
      - name: trainer
        image: registry.example/gpt2:1
        command: [python, train.py, --deepspeed, x]
        env:
        - {name: DATA, value: /data}
)");
  EXPECT_TRUE(document.has_value());
  (*document)["metadata"]["namespace"] = ns;
  (*document)["metadata"]["name"] = name;
  (*document)["metadata"]["uid"] = "uid-" + ns + "-" + name;
  (*document)["spec"].merge_patch(*api::yamlToJson(extraSpec));
  auto decoded = api::decode(*document);
  EXPECT_TRUE(decoded.has_value()) << api::format(decoded.error().front());
  return decoded->job;
}

GpuCapacity nodesWithProducts(const std::vector<std::string>& products) {
  GpuCapacity capacity;
  for (std::size_t i = 0; i < products.size(); ++i) {
    capacity.nodes.push_back({"gpu-" + std::to_string(i), 16, 0, 0, kMemory, products[i]});
  }
  return capacity;
}

const GpuCapacity kH100s = nodesWithProducts({"NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"});
const RanOn kOnH100{{"NVIDIA-H100-80GB-HBM3", kMemory}, ""};

const MeasurementSeal kSeal("0123456789abcdef0123456789abcdef");

// The kept measurements, by namespace/name, as the cache would hold them.
using Kept = std::map<std::string, MeasurementObject>;

// What observe reads of `kept` for the job of `snapshot`, from a cache that holds them.
std::optional<Recallable> recallableIn(const Kept& kept, const Snapshot& snapshot) {
  Cluster cluster({kSeal, {}});
  auto& store = cluster.addMeasurements("");
  for (const auto& [key, object] : kept) {
    store.put(std::make_shared<const MeasurementObject>(object));
  }
  return recallableFor(cluster, snapshot);
}

// A ConfigMap as the operator writes it: sealed.
std::optional<MeasurementObject> decodeSealed(const json& configMap) {
  return decodeMeasurementObject(kSeal.sealed(configMap), kSeal);
}

void keep(Kept& kept, const json& configMap) {
  auto object = decodeSealed(configMap);
  ASSERT_TRUE(object.has_value());
  object->key = object->ns + "/" + object->name;
  kept.insert_or_assign(object->key, std::move(*object));
}

// What a trial measures on these GPUs: throughput 10 per micro-batch, out of memory at 4.
Concluded measured(const api::AutotuneJob& job, const std::string& trial, const std::string& space,
                   int ordinal, const RanOn& ranOn) {
  Concluded done;
  done.state.phase = TrialRunState::Phase::kFinished;
  done.state.trialName = trial;
  done.state.run = trialRunOf(job, trial, 0);
  done.state.node = "gpu-0";
  done.state.containerStarted = kReconcileTime - seconds(600 - ordinal * 60);
  done.state.containerFinished = kReconcileTime - seconds(600 - ordinal * 60 - 30);
  done.ranOn = ranOn;
  api::TrialRecord& record = done.result.record;
  record.name = trial;
  record.space = space;
  record.startTime = formatTime(*done.state.containerStarted);
  record.durationSeconds = 30;
  const int microBatch = trial.back() - '0';
  if (trial == tuning::kProfileTrialName) {
    record.outcome = api::Outcome::kSucceeded;
    done.result.measured = api::MeasuredModel{774000000, 1000000000};
  } else if (microBatch >= 4) {
    record.outcome = api::Outcome::kOOM;
    record.reason = "CUDA out of memory";
  } else {
    record.outcome = api::Outcome::kSucceeded;
    record.value = 10.0 * microBatch;
    record.metrics = {{"throughput", 10.0 * microBatch}, {"latency", 1.0 / microBatch}};
  }
  return done;
}

struct Search {
  api::Status status;
  std::vector<std::string> launched;  // trial names, in launch order
  std::vector<std::string> events;    // reasons
};

// Drives a job to its end, reconcile by reconcile: whatever a plan launches ends by the next one,
// having run on `ranOn`, and the measurements each plan keeps go into `kept`.
Search runToEnd(api::AutotuneJob job, const GpuCapacity& capacity, Kept& kept,
                const RanOn& ranOn = kOnH100) {
  Search search;
  std::vector<tuning::Trial> running;
  for (int reconcile = 0; reconcile < 100; ++reconcile) {
    Snapshot snapshot;
    snapshot.now = kReconcileTime;
    snapshot.key = job.namespaceName() + "/" + job.name();
    snapshot.generation = 1;
    job.status = search.status;
    snapshot.job = job;
    snapshot.capacity = capacity;
    snapshot.results = job.status.results;
    snapshot.model = job.status.model;
    for (const auto& trial : running) {
      snapshot.concluded.push_back(
          measured(job, trial.name, trial.space, static_cast<int>(search.launched.size()), ranOn));
      snapshot.results.push_back(snapshot.concluded.back().result.record);
      if (const auto& model = snapshot.concluded.back().result.measured) {
        snapshot.model = model;
      }
    }
    snapshot.recallable = recallableIn(kept, snapshot);
    const auto [recalled, decision, taken] = recall(std::move(snapshot));
    const Plan plan = controller::plan(recalled, decision);
    for (const auto& configMap : plan.measurements) {
      keep(kept, configMap);
    }
    for (const auto& event : plan.events) {
      search.events.push_back(event.reason);
    }
    running.clear();
    for (const auto& launch : plan.launches) {
      search.launched.push_back(launch.trial);
      running.push_back(*std::ranges::find(decision.trials, launch.trial, &tuning::Trial::name));
    }
    search.status = plan.status;
    if (api::hasEnded(plan.status.phase)) {
      break;
    }
  }
  return search;
}

std::vector<std::string> namesOf(const std::vector<api::TrialRecord>& records) {
  std::vector<std::string> names;
  names.reserve(records.size());
  for (const auto& record : records) {
    names.push_back(record.name);
  }
  return names;
}

tuning::Trial trialWith(json config) {
  tuning::Trial trial;
  trial.name = "z1_gas1_tmbspg2";
  trial.config = std::move(config);
  return trial;
}

MeasurementIdentity identityFor(const api::AutotuneJob& job, const RanOn& ranOn = kOnH100) {
  const json config = {{"train_micro_batch_size_per_gpu", 2},
                       {"zero_optimization", {{"stage", 1}}}};
  return identityOf(job.namespaceName(), job.spec, trialWith(config), ranOn);
}

// A kept trial's record as its run left it.
api::TrialRecord recordOf(const std::string& trial, api::Outcome outcome,
                          const std::string& startTime = "2026-11-26T10:00:00Z") {
  api::TrialRecord record;
  record.name = trial;
  record.outcome = outcome;
  record.startTime = startTime;
  return record;
}

// The one ConfigMap that keeps a single trial's measurement, if it is kept.
std::optional<json> measurementConfigMap(const MeasurementIdentity& identity,
                                         const api::TrialRecord& record,
                                         const std::optional<api::MeasuredModel>& model,
                                         const api::AutotuneJob& job) {
  auto writes = measurementConfigMaps({{identity, record, model}}, job);
  if (writes.configMaps.size() != 1) {
    return std::nullopt;
  }
  return writes.configMaps.front();
}

// Its one measurement, or why it cannot be used.
tl::expected<Measurement, std::string> onlyMeasurement(const MeasurementObject& object) {
  if (!object.measurements) {
    return tl::make_unexpected(object.measurements.error());
  }
  if (object.measurements->size() != 1) {
    return tl::make_unexpected("it holds " + std::to_string(object.measurements->size()));
  }
  return object.measurements->begin()->second;
}

std::string identityKeyOf(const MeasurementIdentity& identity) {
  return identity.name() + ".identity.json";
}

std::string resultKeyOf(const MeasurementIdentity& identity) {
  return identity.name() + ".result.json";
}

Lookup lookupOf(const std::string& trial, const std::string& space,
                api::Metric metric = api::Metric::kThroughput) {
  return {trial, space, metric, kReconcileTime, MeasurementLimits{}.maxAge};
}

TEST(Measurements, TwoTrialsShareAnIdentityOnlyWhenAllThatIsMeasuredIsTheSame) {
  const auto base = identityFor(jobOf("ml", "gpt2"));
  EXPECT_EQ(identityFor(jobOf("ml", "another-name")).name(), base.name());
  EXPECT_EQ(identityFor(jobOf("ml", "gpt2", "{search: {maxTrials: 7, metric: latency}}")).name(),
            base.name());
  EXPECT_EQ(identityFor(jobOf("ml", "gpt2", R"({template: {spec: {containers: [
      {name: trainer, image: registry.example/gpt2:1, command: [python, train.py, --deepspeed, x],
       env: [{name: DATA, value: /data}, {name: AUTOTUNE_TRIAL, value: z1}]}]}}})"))
                .name(),
            base.name())
      << "AUTOTUNE_* variables differ per trial";

  const std::map<std::string, MeasurementIdentity> differing = {
      {"namespace", identityFor(jobOf("team-b", "gpt2"))},
      {"GPU count", identityFor(jobOf("ml", "gpt2", "{resources: {gpusPerTrial: 16}}"))},
      {"nodes",
       identityFor(jobOf("ml", "gpt2", "{resources: {gpusPerTrial: 16, nodesPerTrial: 2}}"))},
      {"GPU product", identityFor(jobOf("ml", "gpt2"), {{"NVIDIA-A100-SXM4-80GB", kMemory}, ""})},
      {"GPU memory",
       identityFor(jobOf("ml", "gpt2"), {{"NVIDIA-H100-80GB-HBM3", 2 * kMemory}, ""})},
      {"image digest",
       identityFor(jobOf("ml", "gpt2"), {kOnH100.gpu, "sha256:" + std::string(64, 'a')})},
      {"image", identityFor(jobOf("ml", "gpt2", R"({template: {spec: {containers: [
          {name: trainer, image: registry.example/gpt2:2, command: [python, train.py, --deepspeed, x],
           env: [{name: DATA, value: /data}]}]}}})"))},
      {"environment", identityFor(jobOf("ml", "gpt2", R"({template: {spec: {containers: [
          {name: trainer, image: registry.example/gpt2:1, command: [python, train.py, --deepspeed, x],
           env: [{name: DATA, value: /data2}]}]}}})"))},
      {"argMappings",
       identityFor(jobOf("ml", "gpt2", "{argMappings: {train_micro_batch_size_per_gpu: --mbs}}"))},
  };
  for (const auto& [what, identity] : differing) {
    EXPECT_NE(identity.name(), base.name()) << what;
  }
  const json otherConfig = {{"train_micro_batch_size_per_gpu", 3},
                            {"zero_optimization", {{"stage", 1}}}};
  EXPECT_NE(identityOf("ml", jobOf("ml", "gpt2").spec, trialWith(otherConfig), kOnH100).name(),
            base.name());
  EXPECT_NE(
      identityFor(jobOf("ml", "gpt2", R"({deepspeedConfig: {train_micro_batch_size_per_gpu: [1],
                fp16: {enabled: true}, zero_optimization: {stage: 1},
                autotuning: {start_profile_step: 5, end_profile_step: 9}}})"))
          .name(),
      base.name())
      << "the profiled steps are part of what a trial measures";
  EXPECT_EQ(identityFor(jobOf("team-b", "gpt2")).environment(),
            identityFor(jobOf("team-b", "other")).environment());
}

TEST(Measurements, AnImageIsKnownByItsDigestWhereverOneIsGiven) {
  const std::string digest = "sha256:" + std::string(64, 'b');
  EXPECT_EQ(imageDigest("docker.io/library/gpt2@" + digest), digest);
  EXPECT_EQ(imageDigest("registry.example/gpt2:1"), "");
  const auto pinned = jobOf("ml", "gpt2",
                            R"({template: {spec: {containers: [
      {name: trainer, image: "registry.example/gpt2:1@)" +
                                digest + R"(", command: [python, train.py, --deepspeed, x],
       env: [{name: DATA, value: /data}]}]}}})");
  // The Pod's imageID names the same digest under another repository's name: the same image.
  EXPECT_EQ(identityFor(pinned).name(),
            identityFor(jobOf("ml", "gpt2"), {kOnH100.gpu, digest}).name());
  EXPECT_EQ(expectedRanOn(pinned.spec, kH100s)->imageDigest, digest);
}

TEST(Measurements, TheGpuATrialWouldGetIsKnownOnlyWhenEveryNodeThatFitsHasTheSame) {
  const api::Spec spec = jobOf("ml", "gpt2").spec;
  const auto same = expectedRanOn(spec, kH100s);
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->gpu, kOnH100.gpu);
  EXPECT_FALSE(
      expectedRanOn(spec, nodesWithProducts({"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"})));
  GpuCapacity withSmallNode = kH100s;
  withSmallNode.nodes.push_back({"small", 4, 0, 0, kMemory, "Tesla-T4"});
  EXPECT_TRUE(expectedRanOn(spec, withSmallNode)) << "a node too small for a trial does not count";
  EXPECT_FALSE(expectedRanOn(spec, GpuCapacity{}));
}

TEST(Measurements, AKeptMeasurementReadsBackAsTheTrialsResult) {
  const auto job = jobOf("ml", "gpt2");
  const auto identity = identityFor(job);
  api::TrialRecord record;
  record.name = "z1_gas1_tmbspg2";
  record.space = "z1";
  record.value = 20;
  record.metrics = {{"throughput", 20}, {"latency", 0.5}};
  record.startTime = "2026-11-26T10:00:00Z";
  record.durationSeconds = 42.5;
  const auto configMap = measurementConfigMap(identity, record, std::nullopt, job);
  ASSERT_TRUE(configMap.has_value());
  const std::string name = (*configMap)["metadata"]["name"];
  EXPECT_TRUE(name.starts_with(kMeasurementPrefix)) << name;
  EXPECT_EQ((*configMap)["data"].size(), 2U);
  EXPECT_TRUE((*configMap)["data"].contains(identityKeyOf(identity)));
  EXPECT_TRUE((*configMap)["data"].contains(resultKeyOf(identity)));
  EXPECT_FALSE((*configMap)["metadata"].contains("ownerReferences"));
  EXPECT_EQ((*configMap)["metadata"]["labels"][std::string(api::kEnvironmentLabel)],
            identity.environment());
  EXPECT_FALSE((*configMap)["metadata"]["annotations"].contains(std::string(api::kSealAnnotation)))
      << "sealed as it is written";
  const auto object = decodeSealed(*configMap);
  ASSERT_TRUE(object.has_value());
  const auto measurement = onlyMeasurement(*object);
  ASSERT_TRUE(measurement.has_value()) << measurement.error();
  EXPECT_TRUE(object->sealed);
  EXPECT_EQ(measurement->measuredBy, "ml/gpt2");
  EXPECT_EQ(object->identities, std::vector<std::string>{identity.name()});

  const auto reused =
      reusedRecord(*object, identity, lookupOf("z1_gas1_tmbspg2", "z1", api::Metric::kLatency));
  ASSERT_TRUE(reused.has_value()) << reused.error();
  EXPECT_EQ(reused->record.value, 0.5) << "the value of the reusing job's own metric";
  EXPECT_EQ(reused->record.durationSeconds, 42.5);
  EXPECT_EQ(reused->record.reusedFrom, name);
  EXPECT_FALSE(
      reusedRecord(*object, identity, lookupOf("z1_gas1_tmbspg2", "z1", api::Metric::kFlops))
          .has_value());
  EXPECT_FALSE(
      reusedRecord(*object, identityFor(jobOf("team-b", "gpt2")), lookupOf("z1_gas1_tmbspg2", "z1"))
          .has_value())
      << "an identity other than the one its name stands for";
}

TEST(Measurements, OnlyWhatTheOperatorSealedIsRead) {
  const auto job = jobOf("ml", "gpt2");
  api::TrialRecord record = recordOf("z1_gas1_tmbspg2", api::Outcome::kSucceeded);
  record.value = 20;
  record.metrics = {{"throughput", 20}};
  const json sealed =
      kSeal.sealed(*measurementConfigMap(identityFor(job), record, std::nullopt, job));
  ASSERT_TRUE(decodeMeasurementObject(sealed, kSeal)->sealed);

  json forged = sealed;
  forged["metadata"]["annotations"].erase(std::string(api::kSealAnnotation));
  json edited = sealed;
  edited["data"][resultKeyOf(identityFor(job))] =
      R"({"outcome": "Succeeded", "value": 9000, "metrics": {"throughput": 9000},
          "startTime": "2026-11-26T10:00:00Z"})";
  json moved = sealed;
  moved["metadata"]["namespace"] = "team-b";
  json claimed = sealed;
  claimed["metadata"]["annotations"][std::string(api::kMeasuredByAnnotation)] = "team-b/theirs";
  const std::map<std::string, std::pair<json, MeasurementSeal>> unsealed = {
      {"no seal", {forged, kSeal}},
      {"data edited", {edited, kSeal}},
      {"copied to another namespace", {moved, kSeal}},
      {"another job claimed", {claimed, kSeal}},
      {"another key", {sealed, MeasurementSeal("another key, of another operator")}},
  };
  for (const auto& [what, object] : unsealed) {
    const auto decoded = decodeMeasurementObject(object.first, object.second);
    ASSERT_TRUE(decoded.has_value()) << what;
    EXPECT_FALSE(decoded->sealed) << what;
    ASSERT_FALSE(decoded->measurements.has_value()) << what;
    EXPECT_NE(decoded->measurements.error().find("bears no seal"), std::string::npos) << what;
  }
  json annotated = sealed;
  annotated["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}";
  EXPECT_TRUE(decodeMeasurementObject(annotated, kSeal)->sealed)
      << "annotations the operator did not write are not sealed";
}

TEST(Measurements, AMeasurementOlderThanTrustedOrFromTheFutureIsMeasuredAgain) {
  const auto job = jobOf("ml", "gpt2");
  api::TrialRecord record = recordOf("z1_gas1_tmbspg2", api::Outcome::kOOM,
                                     formatTime(kReconcileTime - std::chrono::hours(24 * 31)));
  const auto old = decodeSealed(*measurementConfigMap(identityFor(job), record, std::nullopt, job));
  auto reused = reusedRecord(*old, identityFor(job), lookupOf(record.name, "z1"));
  ASSERT_FALSE(reused.has_value());
  EXPECT_NE(reused.error().find("longer ago than the 720h"), std::string::npos) << reused.error();
  Lookup longer = lookupOf(record.name, "z1");
  longer.maxAge = std::chrono::hours(24 * 40);
  EXPECT_TRUE(reusedRecord(*old, identityFor(job), longer).has_value());

  record.startTime = formatTime(kReconcileTime + std::chrono::hours(2));
  const auto future =
      decodeSealed(*measurementConfigMap(identityFor(job), record, std::nullopt, job));
  reused = reusedRecord(*future, identityFor(job), lookupOf(record.name, "z1"));
  ASSERT_FALSE(reused.has_value());
  EXPECT_NE(reused.error().find("a time still to come"), std::string::npos) << reused.error();
}

// The sealed measurement of the job's trial of micro-batch `microBatch`, started `age` ago.
json sealedMeasurementOf(const api::AutotuneJob& job, int microBatch, std::chrono::hours age) {
  const api::TrialRecord record = recordOf("z1_gas1_tmbspg" + std::to_string(microBatch),
                                           api::Outcome::kOOM, formatTime(kReconcileTime - age));
  return kSeal.sealed(*measurementConfigMap(
      identityOf("ml", job.spec, trialWith({{"train_micro_batch_size_per_gpu", microBatch}}),
                 kOnH100),
      record, std::nullopt, job));
}

TEST(Measurements, PastTheBoundTheOldestOfTheOperatorsOwnGo) {
  const auto job = jobOf("ml", "gpt2");
  std::vector<KeptMeasurement> inNamespace;
  for (int i = 0; i < 5; ++i) {
    json configMap = sealedMeasurementOf(job, i + 1, std::chrono::hours(10 - i));
    if (i == 0) {
      configMap["metadata"]["annotations"].erase(std::string(api::kSealAnnotation));  // a tenant's
    }
    inNamespace.push_back(
        std::make_shared<const MeasurementObject>(*decodeMeasurementObject(configMap, kSeal)));
  }
  EXPECT_TRUE(beyondBound(inNamespace, {std::chrono::hours(1), 4}).empty())
      << "the tenant's object is not the operator's to count";
  const auto beyond = beyondBound(inNamespace, {std::chrono::hours(1), 2});
  ASSERT_EQ(beyond.size(), 2U);
  EXPECT_EQ(beyond[0]->name, inNamespace[1]->name) << "the oldest sealed one first";
  EXPECT_EQ(beyond[1]->name, inNamespace[2]->name);
  const auto withJustKept = beyondBound(inNamespace, {std::chrono::hours(1), 2},
                                        {{"autotune-m-not-yet-in-the-cache", 1}});
  ASSERT_EQ(withJustKept.size(), 3U) << "what was just written counts as the newest";
  EXPECT_EQ(withJustKept[2]->name, inNamespace[3]->name);
}

// Measurements past the bound are claimed out of the cache: a reconcile of another job of the
// namespace, at once or before the watch reports the deletes, does not delete them again (each a
// DELETE answered 404 on a busy cluster). One whose delete failed goes back, to be claimed again.
TEST(Measurements, OneClaimedPastTheBoundIsNotClaimedAgainUnlessItsDeleteFailed) {
  const auto job = jobOf("ml", "gpt2");
  Cluster cluster({kSeal, {std::chrono::hours(24), 1}});
  const std::vector<json> kept{sealedMeasurementOf(job, 1, std::chrono::hours(2)),
                               sealedMeasurementOf(job, 2, std::chrono::hours(1))};
  cluster.addMeasurements("").replace(kept);
  auto claimed = cluster.claimMeasurementsBeyondBound("ml", {});
  ASSERT_EQ(claimed.size(), 1U);
  EXPECT_EQ(claimed[0]->name, kept[0]["metadata"]["name"]) << "the oldest";
  EXPECT_TRUE(cluster.claimMeasurementsBeyondBound("ml", {}).empty());
  EXPECT_EQ(cluster.measurementsBy("ml", job.uid()).size(), 1U);

  cluster.measurementNotDeleted(claimed[0]);
  EXPECT_EQ(cluster.claimMeasurementsBeyondBound("ml", {}).size(), 1U);
}

TEST(Measurements, TheProfilingTrialKeepsItsModel) {
  const auto job = jobOf("ml", "gpt2");
  api::TrialRecord record;
  record.name = std::string(tuning::kProfileTrialName);
  record.durationSeconds = 60;
  const api::MeasuredModel model{774000000, 123456};
  record.startTime = "2026-11-26T10:00:00Z";
  const auto object = decodeSealed(*measurementConfigMap(identityFor(job), record, model, job));
  const auto reused = reusedRecord(*object, identityFor(job), lookupOf(record.name, ""));
  ASSERT_TRUE(reused.has_value()) << reused.error();
  EXPECT_EQ(reused->measured, model);
}

// Sealed or not, a measurement is data: read only when it has the exact shape the operator writes.
TEST(Measurements, AnObjectEditedIntoSomethingElseIsReadAsWhyItCannotBeUsed) {
  const auto job = jobOf("ml", "gpt2");
  api::TrialRecord record;
  record.name = "z1_gas1_tmbspg4";
  record.outcome = api::Outcome::kOOM;
  record.startTime = "2026-11-26T10:00:00Z";
  const json good = *measurementConfigMap(identityFor(job), record, std::nullopt, job);
  const std::string identityKey = identityKeyOf(identityFor(job));
  const std::string resultKey = resultKeyOf(identityFor(job));
  const std::string layout =
      "data must hold <identity>.identity.json and <identity>.result.json for each measurement, "
      "and nothing else";
  const auto identityWith = [&](const std::function<void(json&)>& edit) {
    json identity = identityFor(job).document;
    edit(identity);
    return identity.dump();
  };
  std::string nested;
  for (int i = 0; i < 30000; ++i) {
    nested += R"({"a":)";
  }
  nested += "{}" + std::string(30000, '}');
  const std::vector<std::pair<std::string, std::function<void(json&)>>> edits = {
      {"data." + resultKey + " is not a JSON object",
       [&](json& cm) { cm["data"][resultKey] = "{oops"; }},
      {layout, [&](json& cm) { cm["data"].erase(identityKey); }},
      {"data." + resultKey + ": outcome is missing",
       [&](json& cm) { cm["data"][resultKey] = R"({"value": 3})"; }},
      {"data." + resultKey + ": outcome: must be a string",
       [&](json& cm) { cm["data"][resultKey] = R"({"outcome": 7})"; }},
      {"label autotune.io/measurement is \"v1\", not v3 or v2",
       [&](json& cm) { cm["metadata"]["labels"]["autotune.io/measurement"] = "v1"; }},
      {layout, [&](json& cm) { cm["data"] = json::array(); }},
      {layout,
       [&](json& cm) {
         cm["binaryData"] = {{"x", "eA=="}};
       }},
      {"data." + resultKey + ": durationSeconds: must be 0 to 2592000 seconds (720h)",
       [&](json& cm) { cm["data"][resultKey] = R"({"outcome": "OOM", "durationSeconds": -5})"; }},
      {"data." + resultKey + ": durationSeconds: must be 0 to 2592000 seconds (720h)",
       [&](json& cm) {
         cm["data"][resultKey] = R"({"outcome": "OOM", "durationSeconds": 1e308})";
       }},
      {"data." + resultKey + ": value: must be a positive number",
       [&](json& cm) {
         cm["data"][resultKey] =
             R"({"outcome": "Succeeded", "value": 0, "metrics": {"throughput": 0}})";
       }},
      {"data." + resultKey + ": metrics.made_up: must be throughput, latency or flops",
       [&](json& cm) {
         cm["data"][resultKey] = R"({"outcome": "Succeeded", "metrics": {"made_up": 1}})";
       }},
      {"data." + resultKey + ": outcome: Failed is no verdict on the config for another job",
       [&](json& cm) {
         cm["data"][resultKey] = R"({"outcome": "Failed", "reason": "ErrImagePull"})";
       }},
      {layout, [&](json& cm) { cm["data"]["padding"] = std::string(kMeasurementBytes, 'x'); }},
      {"data." + resultKey + ": model.numParameters",
       [&](json& cm) {
         cm["data"][resultKey] = R"({"outcome": "Succeeded", "model": {"numParameters": "x"}})";
       }},
      {"data." + resultKey + ": startTime: must be an RFC 3339 time",
       [&](json& cm) { cm["data"][resultKey] = R"({"outcome": "OOM", "startTime": "soon"})"; }},
      {"data." + resultKey + ": startTime: must be an RFC 3339 time",
       [&](json& cm) { cm["data"][resultKey] = R"({"outcome": "OOM"})"; }},
      {"bytes, more than the 8192 a measurement writes",
       [&](json& cm) {
         cm["data"][resultKey] =
             R"({"outcome": "OOM", "reason": ")" + std::string(9000 - 34, 'r') + R"("})";
       }},
      {"data." + identityKey + " nests deeper than 64 levels",
       [&](json& cm) { cm["data"][identityKey] = nested; }},
      {"data." + identityKey + ": must hold exactly namespace, deepspeedConfig",
       [&](json& cm) {
         cm["data"][identityKey] = identityWith([](json& id) { id["extra"] = 1; });
       }},
      {"data." + identityKey + ": namespace is not the ConfigMap's own",
       [&](json& cm) {
         cm["data"][identityKey] = identityWith([](json& id) { id["namespace"] = "team-b"; });
       }},
      {"data." + identityKey + ": container.image must be a string",
       [&](json& cm) {
         cm["data"][identityKey] =
             identityWith([](json& id) { id["container"]["image"] = json::object(); });
       }},
  };
  for (const auto& [why, edit] : edits) {
    json edited = good;
    edit(edited);
    const auto object = decodeSealed(edited);
    ASSERT_TRUE(object.has_value()) << why;
    ASSERT_FALSE(object->measurements.has_value()) << why;
    EXPECT_NE(object->measurements.error().find(why), std::string::npos)
        << why << " / " << object->measurements.error();
  }
  json wordy = good;
  wordy["data"][resultKey] =
      json{{"outcome", "OOM"}, {"reason", std::string(5000, 'r')}, {"startTime", record.startTime}}
          .dump();
  const auto cut = decodeSealed(wordy);
  const auto cutShort = onlyMeasurement(*cut);
  ASSERT_TRUE(cutShort.has_value()) << cutShort.error();
  EXPECT_LE(cutShort->record.reason.size(), 256U) << "cut as status.results keeps it";

  json renamed = good;
  renamed["data"][identityKey] =
      identityFor(job, {{"NVIDIA-A100-SXM4-80GB", kMemory}, ""}).document.dump();
  const auto reused =
      reusedRecord(*decodeSealed(renamed), identityFor(job), lookupOf(record.name, "z1"));
  ASSERT_FALSE(reused.has_value());
  EXPECT_NE(reused.error().find("not the identity its name stands for"), std::string::npos);
}

TEST(Measurements, EveryMeasurementOfAThousandTrialsIsKeptInConfigMapsWithinTheirBound) {
  const auto job = jobOf("ml", "gpt2");
  std::vector<ToKeep> measurements;
  for (int i = 0; i < 1000; ++i) {
    api::TrialRecord record;
    record.name = "z3_gas" + std::to_string(i) + "_tmbspg" + std::to_string(i);
    record.outcome = api::Outcome::kOOM;
    record.reason = tuning::boundedReason(std::string(4096, '"'));
    record.startTime = "2026-11-26T10:00:00Z";
    const json config = {{"train_micro_batch_size_per_gpu", i}, {"gradient_accumulation_steps", i}};
    measurements.push_back(
        {identityOf("ml", job.spec, trialWith(config), kOnH100), record, std::nullopt});
  }
  const auto writes = measurementConfigMaps(measurements, job);
  EXPECT_TRUE(writes.tooLarge.empty());
  EXPECT_GT(writes.configMaps.size(), 1U) << "more than one ConfigMap's worth";
  std::size_t largest = 0;
  std::size_t held = 0;
  std::set<std::string> names;
  for (const auto& configMap : writes.configMaps) {
    largest = std::max(largest, kSeal.sealed(configMap).dump().size());
    names.insert(configMap["metadata"]["name"].get<std::string>());
    const auto object = decodeSealed(configMap);
    ASSERT_TRUE(object.has_value());
    ASSERT_TRUE(object->measurements.has_value()) << object->measurements.error();
    held += object->measurements->size();
  }
  EXPECT_EQ(held, 1000U);
  EXPECT_EQ(names.size(), writes.configMaps.size());
  EXPECT_LT(largest, kMeasurementBytes);
  EXPECT_EQ(measurementConfigMaps(measurements, job).configMaps, writes.configMaps)
      << "written again after a crash, the same ConfigMaps under the same names";
  // A container whose environment alone passes the bound is not kept at all.
  auto huge = job;
  huge.spec.podTemplate["spec"]["containers"][0]["env"].push_back(
      {{"name", "BLOB"}, {"value", std::string(kMeasurementBytes, 'x')}});
  api::TrialRecord record;
  record.name = "z1_gas1_tmbspg1";
  const auto tooLarge = measurementConfigMaps({{identityFor(huge), record, std::nullopt}}, huge);
  EXPECT_TRUE(tooLarge.configMaps.empty());
  EXPECT_EQ(tooLarge.tooLarge, std::vector<std::string>{"z1_gas1_tmbspg1"});
}

// A ConfigMap the operator wrote before it kept several measurements in one is still read.
TEST(Measurements, AMeasurementKeptOneToAConfigMapIsStillRead) {
  const auto job = jobOf("ml", "gpt2");
  const auto identity = identityFor(job);
  api::TrialRecord record = recordOf("z1_gas1_tmbspg2", api::Outcome::kSucceeded);
  record.value = 20;
  record.metrics = {{"throughput", 20}};
  json single = *measurementConfigMap(identity, record, std::nullopt, job);
  single["metadata"]["name"] = identity.name();
  single["metadata"]["labels"][std::string(api::kMeasurementLabel)] = "v2";
  single["data"] = {{"identity.json", single["data"][identityKeyOf(identity)]},
                    {"result.json", single["data"][resultKeyOf(identity)]}};
  const auto object = decodeSealed(single);
  ASSERT_TRUE(object.has_value());
  EXPECT_EQ(object->identities, std::vector<std::string>{identity.name()});
  const auto reused = reusedRecord(*object, identity, lookupOf(record.name, "z1"));
  ASSERT_TRUE(reused.has_value()) << reused.error();
  EXPECT_EQ(reused->record.value, 20);
  EXPECT_EQ(reused->record.reusedFrom, identity.name());

  single["data"]["result.json"] = "{oops";
  const auto edited = reusedRecord(*decodeSealed(single), identity, lookupOf(record.name, "z1"));
  ASSERT_FALSE(edited.has_value());
  EXPECT_NE(edited.error().find("data.result.json is not a JSON object"), std::string::npos)
      << edited.error();
}

TEST(Reuse, AJobWhoseTrialsWereAllMeasuredLaunchesNothingAndEndsAtTheSameBest) {
  Kept kept;
  const Search first = runToEnd(jobOf("ml", "gpt2"), kH100s, kept);
  ASSERT_EQ(first.status.phase, api::Phase::kSucceeded);
  ASSERT_EQ(first.launched.size(), 4U);
  EXPECT_EQ(kept.size(), 4U);
  EXPECT_EQ(first.status.trials.reused, 0);
  EXPECT_DOUBLE_EQ(first.status.gpuHours.used, 0.2667) << "4 trials of 30 s on 8 GPUs";
  EXPECT_EQ(first.status.gpuHours.saved, 0);

  const Search again = runToEnd(jobOf("ml", "gpt2"), kH100s, kept);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  EXPECT_TRUE(again.launched.empty());
  ASSERT_TRUE(again.status.best.has_value());
  EXPECT_EQ(again.status.best->trial, first.status.best->trial);
  EXPECT_EQ(again.status.best->value, first.status.best->value);
  EXPECT_EQ(namesOf(again.status.results), namesOf(first.status.results));
  for (const auto& record : again.status.results) {
    EXPECT_TRUE(record.reusedFrom.starts_with(kMeasurementPrefix)) << record.name;
  }
  EXPECT_EQ(again.status.trials.launched, 0);
  EXPECT_EQ(again.status.trials.reused, 4);
  EXPECT_EQ(again.status.trials.oom, 1);
  EXPECT_EQ(again.status.gpuHours.used, 0);
  EXPECT_EQ(again.status.gpuHours.saved, first.status.gpuHours.used);
  EXPECT_NE(std::ranges::find(again.events, "TrialReused"), again.events.end());
}

// The cache finds a job's candidates by their environment label, which is not sealed: a label
// edited by hand hides that measurement alone, and its trial runs again.
TEST(Reuse, AMeasurementWhoseEnvironmentLabelWasEditedIsNotACandidate) {
  Kept kept;
  const Search first = runToEnd(jobOf("ml", "gpt2"), kH100s, kept);
  ASSERT_EQ(first.launched.size(), 4U);
  ASSERT_EQ(kept.size(), 4U);
  auto& hidden = kept.begin()->second;
  const auto hiddenMeasurement = onlyMeasurement(hidden);
  ASSERT_TRUE(hiddenMeasurement.has_value());
  const std::string hiddenTrial = hiddenMeasurement->record.name;
  hidden.environment = "edited";

  const Search again = runToEnd(jobOf("ml", "gpt2"), kH100s, kept);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  EXPECT_EQ(again.launched, std::vector<std::string>{hiddenTrial});
  EXPECT_EQ(again.status.trials.reused, 3);
}

TEST(Reuse, AJobWithoutAModelTakesItsProfilingTrialFromWhatWasMeasuredBefore) {
  const std::string noModel = "{model: null}";
  Kept kept;
  const Search first = runToEnd(jobOf("ml", "gpt2", noModel), kH100s, kept);
  ASSERT_EQ(first.status.phase, api::Phase::kSucceeded);
  ASSERT_FALSE(first.launched.empty());
  EXPECT_EQ(first.launched.front(), tuning::kProfileTrialName);

  const Search again = runToEnd(jobOf("ml", "gpt2", noModel), kH100s, kept);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  EXPECT_TRUE(again.launched.empty()) << "the profiling trial is reused like any other";
  ASSERT_TRUE(again.status.model.has_value());
  EXPECT_EQ(again.status.model, first.status.model);
  EXPECT_EQ(again.status.best->trial, first.status.best->trial);
}

TEST(Reuse, AJobOnAFullClusterStillTakesWhatWasMeasuredBefore) {
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept).status.phase, api::Phase::kSucceeded);
  GpuCapacity full = kH100s;
  for (auto& node : full.nodes) {
    node.used = node.allocatable;
  }
  const Search again = runToEnd(jobOf("ml", "gpt2"), full, kept);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  EXPECT_TRUE(again.launched.empty());
  EXPECT_EQ(again.status.trials.reused, 4);
}

// A trial measured again (its measurement too old, or spec.reuse Disabled) is kept beside the
// earlier measurement, in a ConfigMap of the job that measured it again: a lookup takes the
// newest, whichever ConfigMap holds it.
TEST(Reuse, AMeasurementTakenAgainIsTheNewestOfItsIdentity) {
  const auto job = jobOf("ml", "gpt2");
  const auto identity = identityFor(job);
  const auto measuredAt = [&](std::chrono::hours ago, double value) {
    api::TrialRecord record =
        recordOf("z1_gas1_tmbspg2", api::Outcome::kSucceeded, formatTime(kReconcileTime - ago));
    record.value = value;
    record.metrics = {{"throughput", value}};
    return record;
  };
  const auto old = measuredAt(std::chrono::hours(24 * 31), 20);
  const auto fresh = measuredAt(std::chrono::hours(1), 25);
  for (const bool freshByTheFirst : {true, false}) {
    Kept kept;
    keep(kept, *measurementConfigMap(identity, freshByTheFirst ? fresh : old, std::nullopt, job));
    keep(kept, *measurementConfigMap(identity, freshByTheFirst ? old : fresh, std::nullopt,
                                     jobOf("ml", "measured-again")));
    ASSERT_EQ(kept.size(), 2U);
    Snapshot snapshot;
    snapshot.now = kReconcileTime;
    snapshot.job = job;
    snapshot.capacity = kH100s;
    const auto recallable = recallableIn(kept, snapshot);
    ASSERT_TRUE(recallable.has_value());
    ASSERT_EQ(recallable->byName.size(), 1U);
    const auto reused = reusedRecord(*recallable->byName.at(identity.name()), identity,
                                     lookupOf("z1_gas1_tmbspg2", "z1"));
    ASSERT_TRUE(reused.has_value()) << reused.error();
    EXPECT_EQ(reused->record.value, 25) << "the fresh one, by the first job: " << freshByTheFirst;
  }
}

// While its trials in flight fill spec.parallelism, the engine wants no trial: the job gathers no
// candidates, and so hashes no environment, on such a reconcile.
TEST(Reuse, AJobWhoseTrialsInFlightFillItsParallelismGathersNoCandidates) {
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept).status.phase, api::Phase::kSucceeded);
  Snapshot snapshot;
  snapshot.now = kReconcileTime;
  snapshot.job = jobOf("ml", "gpt2", "{parallelism: 2}");
  snapshot.capacity = kH100s;
  snapshot.inFlight.resize(1);
  const auto withRoom = recallableIn(kept, snapshot);
  ASSERT_TRUE(withRoom.has_value());
  EXPECT_EQ(withRoom->byName.size(), 4U);

  snapshot.inFlight.resize(2);
  EXPECT_FALSE(recallableIn(kept, snapshot).has_value());
}

TEST(Reuse, AnImageByTagIsLookedUpByTheDigestTheJobsFirstTrialRan) {
  const RanOn digested{kOnH100.gpu, "sha256:" + std::string(64, 'c')};
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept, digested).status.phase,
            api::Phase::kSucceeded);
  const Search again = runToEnd(jobOf("ml", "again"), kH100s, kept, digested);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  EXPECT_EQ(again.launched.size(), 1U) << "the tag may have moved: one trial finds out";
  EXPECT_EQ(again.status.trials.reused, 3);

  const RanOn moved{kOnH100.gpu, "sha256:" + std::string(64, 'd')};
  const Search rebuilt = runToEnd(jobOf("ml", "rebuilt"), kH100s, kept, moved);
  EXPECT_EQ(rebuilt.launched.size(), 4U) << "the tag now names another image";
  EXPECT_EQ(rebuilt.status.trials.reused, 0);
}

TEST(Reuse, AWiderSearchLaunchesOnlyWhatWasNotMeasuredBefore) {
  Kept kept;
  const Search narrow =
      runToEnd(jobOf("ml", "first", "{deepspeedConfig: {train_micro_batch_size_per_gpu: [1, 2]}}"),
               kH100s, kept);
  ASSERT_EQ(narrow.status.phase, api::Phase::kSucceeded);
  const Search wide = runToEnd(jobOf("ml", "second"), kH100s, kept);
  EXPECT_EQ(wide.status.phase, api::Phase::kSucceeded);
  for (const auto& trial : wide.launched) {
    EXPECT_EQ(std::ranges::find(narrow.launched, trial), narrow.launched.end()) << trial;
  }
  EXPECT_EQ(wide.launched.size() + narrow.launched.size(), 4U);
  EXPECT_EQ(wide.status.trials.reused, static_cast<int>(narrow.launched.size()));
}

TEST(Reuse, NothingIsReusedAcrossNamespacesGpusOrImagesOrWhenTurnedOff) {
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept).status.phase, api::Phase::kSucceeded);
  const std::map<std::string, std::pair<api::AutotuneJob, GpuCapacity>> others = {
      {"another namespace", {jobOf("team-b", "gpt2"), kH100s}},
      {"other GPUs", {jobOf("ml", "gpt2"), nodesWithProducts({"NVIDIA-A100-SXM4-80GB"})}},
      {"GPUs the trial may or may not get",
       {jobOf("ml", "gpt2"),
        nodesWithProducts({"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"})}},
      {"more GPUs per trial", {jobOf("ml", "gpt2", "{resources: {gpusPerTrial: 16}}"), kH100s}},
      {"reuse Disabled", {jobOf("ml", "gpt2", "{reuse: Disabled}"), kH100s}},
  };
  for (const auto& [what, job] : others) {
    Kept copy = kept;
    const Search search = runToEnd(job.first, job.second, copy);
    EXPECT_EQ(search.launched.size(), 4U) << what;
    EXPECT_EQ(search.status.trials.reused, 0) << what;
  }
}

// On a cluster of two GPU models a job's trials may land on either, so nothing is looked up; a job
// of one model (spec.gpuModels) knows its GPU and takes what was measured on it.
TEST(Reuse, AJobOfOneGpuModelReusesOnAClusterOfSeveral) {
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept).status.phase, api::Phase::kSucceeded);
  const GpuCapacity mixed = nodesWithProducts({"NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"});
  const api::AutotuneJob pinned = jobOf("ml", "gpt2", "{gpuModels: [NVIDIA-H100-80GB-HBM3]}");
  const Search search = runToEnd(pinned, forJob(mixed, pinned.spec), kept);
  EXPECT_EQ(search.status.phase, api::Phase::kSucceeded);
  EXPECT_TRUE(search.launched.empty());
  EXPECT_EQ(search.status.trials.reused, 4);
}

TEST(Reuse, ABadKeptMeasurementIsIgnoredWithAWarningAndItsTrialRunsAndReplacesIt) {
  Kept kept;
  ASSERT_EQ(runToEnd(jobOf("ml", "gpt2"), kH100s, kept).status.phase, api::Phase::kSucceeded);
  auto& broken = kept.begin()->second;
  const std::string brokenName = broken.name;
  broken.measurements = tl::make_unexpected(std::string("data.x.result.json is not a JSON object"));

  const Search again = runToEnd(jobOf("ml", "gpt2"), kH100s, kept);
  EXPECT_EQ(again.status.phase, api::Phase::kSucceeded);
  ASSERT_EQ(again.launched.size(), 1U);
  EXPECT_EQ(std::ranges::count(again.events, "MeasurementIgnored"), 1);
  EXPECT_EQ(again.status.trials.reused, 3);
  ASSERT_TRUE(kept.at("ml/" + brokenName).measurements.has_value())
      << "the trial's new measurement takes the broken one's place";
}

}  // namespace
}  // namespace autotune::controller
