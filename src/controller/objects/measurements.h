#pragma once
// Trial results kept beyond the job that measured them, so that no job pays twice for a
// measurement. They are ConfigMaps in the job's namespace, each holding the measurements one
// reconcile of a job recorded in one environment (GPU, image, container: so that a job's trials
// cost one write per reconcile that records, not one each), under the identity of each (what
// makes two trials measure the same thing); labelled so that the operator watches them and
// kubectl lists them, and owned by no job: deleting a job keeps them. A new job looks a trial up
// by its identity before launching it, and takes a hit as the trial's result (recall.h).

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "api/job.h"
#include "controller/objects/gpu_capacity.h"
#include "tuning/protocol.h"

namespace autotune::controller {

// kMeasurementLabel's value on what the operator writes: several measurements in a ConfigMap,
// data.<identity name>.identity.json and data.<identity name>.result.json for each.
inline constexpr std::string_view kMeasurementVersion = "v3";
// What it wrote before, and still reads: one measurement in a ConfigMap named after its identity,
// data.identity.json and data.result.json.
inline constexpr std::string_view kSingleMeasurementVersion = "v2";
inline constexpr std::string_view kMeasurementPrefix = "autotune-m-";
// Past this a measurement ConfigMap is not written (its measurements go into more than one): well
// under etcd's 1.5 MiB per object.
inline constexpr std::size_t kMeasurementBytes = std::size_t{256} * 1024;

// What proves that a measurement ConfigMap is the operator's own, as written: an HMAC-SHA256 of
// its namespace, name, annotations and data under a key that only the operator reads (a Secret in
// its own namespace). Anyone who may write ConfigMaps in a namespace may write our label; nobody
// without the key can seal. Unsealed objects are never read, reused or deleted.
class MeasurementSeal {
 public:
  explicit MeasurementSeal(std::string key) : key_(std::move(key)) {}

  // kSealAnnotation's value for `configMap`, its other annotations and data set.
  std::string of(const nlohmann::json& configMap) const;
  // `configMap` with kSealAnnotation set to its seal.
  nlohmann::json sealed(nlohmann::json configMap) const;
  // Whether `configMap` carries its own seal under this key.
  bool holds(const nlohmann::json& configMap) const;

 private:
  std::string key_;
};

// How much of what was kept the operator trusts: measurements older than maxAge are measured
// again, and past perNamespace the oldest of a namespace are deleted.
struct MeasurementLimits {
  std::chrono::seconds maxAge = std::chrono::hours(24 * 30);
  std::size_t perNamespace = 1000;
};

// How the operator keeps measurements: under its seal, within its limits.
struct MeasurementPolicy {
  MeasurementSeal seal{""};
  MeasurementLimits limits;
};

// What a trial ran on, beyond its spec: the GPU, and the image by digest (sha256:...) where the
// runtime reported one.
struct RanOn {
  GpuModel gpu;
  std::string imageDigest;
};

struct MeasurementObject;

// What makes two trials measure the same thing (docs/api.md, "Reuse"): the namespace, the
// DeepSpeed config as the trial gets it (its profiled steps included), GPUs and nodes per trial,
// the GPU model and memory, and the primary container as it runs (the image by digest where known,
// else as written; command; args; environment less AUTOTUNE_*; the argument mappings that add to
// its command line).
struct MeasurementIdentity {
  nlohmann::json document;  // canonical: nlohmann keeps object keys sorted

  // What its measurement is kept under: the prefix and 40 hex digits of SHA-256.
  std::string name() const;
  // kEnvironmentLabel's value.
  std::string environment() const;
};

MeasurementIdentity identityOf(const std::string& ns, const api::Spec& spec,
                               const tuning::Trial& trial, const RanOn& ranOn);
// The environment (MeasurementIdentity::environment) of every trial of a job in `ns` of `spec`
// that runs on `ranOn`.
std::string environmentOf(const std::string& ns, const api::Spec& spec, const RanOn& ranOn);

// The digest an image reference or a runtime's imageID pins ("sha256:..."), if it pins one.
std::string imageDigest(std::string_view image);
// The image digest a kept measurement was made with, if its identity has one.
std::string imageDigestOf(const MeasurementObject& kept);

// What a job's trials will run on, as far as it can be told before they run: the GPU model when
// every node that could hold a trial has the same one, the image's digest when the template pins
// it. Nothing when the nodes differ: a trial cannot be matched to results of GPUs it may not get.
std::optional<RanOn> expectedRanOn(const api::Spec& spec, const GpuCapacity& capacity);

// SHA-256 of `text`, 64 hex digits.
std::string sha256Hex(std::string_view text);
// Its first 40 (160 bits, as git's object names): what names measurements and environments.
std::string measurementHash(std::string_view text);

// A kept measurement, as read back. Its identity is held as the digest of its text, never as a
// tree: what matters is only whether it is the identity a trial would run with.
struct Measurement {
  std::string identityKey;     // the data key of its identity, for messages
  std::string identityDigest;  // SHA-256 of that key's text, 64 hex digits
  std::string imageDigest;     // the image its trial ran, where known by digest ("sha256:...")
  api::TrialRecord record;
  std::optional<api::MeasuredModel> model;           // the profiling trial's
  std::string measuredBy;                            // the job, namespace/name
  std::chrono::system_clock::time_point measuredAt;  // record.startTime
};

// A measurement ConfigMap as the cache holds it: read once when the watch delivers it.
struct MeasurementObject {
  std::string key;  // namespace/name
  std::string ns;
  std::string name;
  std::string resourceVersion;
  std::string uid;
  std::string measuredByUid;  // api::kMeasuredByUidAnnotation
  // api::kEnvironmentLabel, by which the cache finds a job's candidates: not sealed, so a label
  // edited by hand hides a measurement, and never makes another one stand for a trial.
  std::string environment;
  bool sealed = false;  // by this operator's key: only then read, reused or deleted
  // The identities (MeasurementIdentity::name) its data keys name, whether or not it can be used:
  // what a job finds it by, and so is told why it cannot.
  std::vector<std::string> identities;
  // Its measurements by identity, or why none can be used, naming the key and field: not sealed,
  // edited by hand, cut short, another layout.
  tl::expected<std::map<std::string, Measurement>, std::string> measurements;

  // When its measurement of `identity` was made; the earliest time when it has none it can use.
  std::chrono::system_clock::time_point measuredAt(const std::string& identity) const;
  // When its newest measurement was made: the bound deletes the oldest ConfigMaps first, the
  // unusable before all.
  std::chrono::system_clock::time_point newest() const;
  // How many measurements it counts for against the bound: one when none can be used.
  std::size_t count() const;
};

std::optional<MeasurementObject> decodeMeasurementObject(const nlohmann::json& object,
                                                         const MeasurementSeal& seal);

// Of the measurement ConfigMaps of one namespace, those the operator deletes: its own (sealed),
// oldest first (the unreadable before all), until what is left holds at most
// `limits.perNamespace` measurements. Those in `justKept` (name: measurements it holds) are the
// newest, whether the cache holds them yet or not.
using KeptMeasurement = std::shared_ptr<const MeasurementObject>;
using JustKept = std::map<std::string, std::size_t>;
std::vector<KeptMeasurement> beyondBound(std::vector<KeptMeasurement> inNamespace,
                                         const MeasurementLimits& limits,
                                         const JustKept& justKept = {});

// Whether a trial that ended so says something of its config that holds for another job: it
// Succeeded, or ran out of memory. A failure (a registry outage, a bad node, an NCCL error) or
// missing metrics says nothing of the config, and is neither kept nor reused.
bool isVerdict(api::Outcome outcome);

// A trial's result to keep (and the profiling trial's model), under the identity it ran with.
struct ToKeep {
  MeasurementIdentity identity;
  api::TrialRecord record;
  std::optional<api::MeasuredModel> model;
};

struct MeasurementWrites {
  // The ConfigMaps that keep them, measured by `job`, to be sealed as they are written: one per
  // environment, more where one would pass kMeasurementBytes. Each is named after the job and
  // the identities it holds, so that a write made again after a crash finds its own.
  std::vector<nlohmann::json> configMaps;
  std::vector<std::string> tooLarge;  // trials whose measurement alone would pass it
};
MeasurementWrites measurementConfigMaps(const std::vector<ToKeep>& measurements,
                                        const api::AutotuneJob& job);

// The trials a measurement ConfigMap of this operator's holds, for messages.
std::vector<std::string> trialsIn(const nlohmann::json& configMap);

// What a kept measurement is asked to stand for: `trial` in `space` of a job searching for
// `metric`, looked up at `now`.
struct Lookup {
  std::string trial;
  std::string space;
  api::Metric metric = api::Metric::kThroughput;
  std::chrono::system_clock::time_point now;
  std::chrono::seconds maxAge = MeasurementLimits{}.maxAge;
};

// A kept measurement as the result of a trial: its outcome, its value of the lookup's metric,
// where it came from (the ConfigMap), and the profiling trial's model. An error when it cannot
// stand for the trial: unreadable, none of that identity, another identity under that name, older
// than maxAge, or a success without that metric.
tl::expected<tuning::RecordedExit, std::string> reusedRecord(const MeasurementObject& object,
                                                             const MeasurementIdentity& identity,
                                                             const Lookup& lookup);

}  // namespace autotune::controller
