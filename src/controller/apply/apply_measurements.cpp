// Apply's part in keeping measurements (measurements.h): each sealed and written, and those past
// the namespace's bound deleted.
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "api/labels.h"
#include "controller/apply/apply.h"
#include "controller/decision/events.h"
#include "controller/objects/output.h"
#include "k8s/resources.h"
#include "object/read.h"
#include "tuning/results.h"

namespace autotune::controller {
namespace {

using nlohmann::json;

// A merge patch that makes a kept measurement's ConfigMap the measurement `configMap`: its labels
// and annotations set, and its data exactly the measurement's, whatever keys were added by hand.
json measurementOver(const json& existing, const json& configMap) {
  const json& data = object::member(existing, "data");
  const json& metadata = object::metadataOf(configMap);
  return {{"metadata",
           {{"labels", object::member(metadata, "labels")},
            {"annotations", object::member(metadata, "annotations")}}},
          {"data", tuning::mergePatch(data.is_object() ? data : json::object(),
                                      object::member(configMap, "data"))},
          {"binaryData", nullptr}};
}

// Why a ConfigMap at a measurement's name is not the operator's to write over, if it is not.
std::optional<NotOurs> notOurs(const json& existing, const MeasurementSeal& seal) {
  if (object::text(object::member(object::metadataOf(existing), "labels"), api::kMeasurementLabel)
          .empty()) {
    return NotOurs::kNotAMeasurement;
  }
  if (!seal.holds(existing)) {
    return NotOurs::kUnsealed;
  }
  return std::nullopt;
}

}  // namespace

bool Apply::keepMeasurement(const json& unsealed) {
  const MeasurementSeal& seal = cluster_.measurementPolicy().seal;
  const json configMap = seal.sealed(unsealed);
  const json& metadata = object::metadataOf(configMap);
  const std::string name = object::text(metadata, "name");
  const std::vector<std::string> trials = trialsIn(configMap);
  auto written = writeKept(configMap);
  if (!written && written.error().kind == k8s::ErrorKind::kAlreadyExists) {
    auto existing = client_.get(k8s::kConfigMaps, namespace_, name);
    if (existing) {
      if (auto why = notOurs(*existing, seal)) {
        report({measurementNameTaken(trials, name, *why, holderOf(*existing))});
        return false;
      }
    }
    written = existing ? client_.patch(k8s::kConfigMaps, namespace_, name, k8s::PatchType::kMerge,
                                       measurementOver(*existing, configMap))
                       : existing;
  }
  if (!written) {
    context_.log.warn("could not keep a measurement",
                      {{"configMap", name}, {"error", k8s::describe(written.error())}});
    report({measurementNotWritten(trials, name, k8s::describe(written.error()))});
  }
  return written.has_value();
}

// One request where the cache knows the name: a measurement it holds sealed is patched over at
// the version it holds (the seal covers its data, so it has exactly the keys the measurement sets
// and the patch need not read them), any other name created. A stale cache (a Conflict, or the
// ConfigMap gone) falls back to the create, whose AlreadyExists the caller resolves by reading the
// ConfigMap.
k8s::Result<json> Apply::writeKept(const json& configMap) {
  const std::string name = object::text(object::metadataOf(configMap), "name");
  if (const auto cached = cluster_.measurement(namespace_, name); cached && cached->sealed) {
    json over = measurementOver(json::object(), configMap);
    over["metadata"]["resourceVersion"] = cached->resourceVersion;
    auto patched = client_.patch(k8s::kConfigMaps, namespace_, name, k8s::PatchType::kMerge, over);
    if (patched || (patched.error().kind != k8s::ErrorKind::kConflict &&
                    patched.error().kind != k8s::ErrorKind::kNotFound)) {
      return patched;
    }
  }
  return client_.create(k8s::kConfigMaps, namespace_, configMap);
}

// The namespace's measurements past the operator's bound, its own only, deleted oldest first; each
// DELETE carries the UID it was decided on.
void Apply::forgetBeyondBound(const JustKept& justKept) {
  for (auto& kept : cluster_.claimMeasurementsBeyondBound(namespace_, justKept)) {
    auto removed = client_.remove(k8s::kConfigMaps, namespace_, kept->name,
                                  k8s::Propagation::kBackground, std::nullopt, kept->uid);
    if (!removed && removed.error().kind != k8s::ErrorKind::kNotFound &&
        removed.error().kind != k8s::ErrorKind::kConflict) {
      context_.log.warn("could not delete a measurement past the bound",
                        {{"configMap", kept->name}, {"error", k8s::describe(removed.error())}});
      cluster_.measurementNotDeleted(std::move(kept));
    }
  }
}

}  // namespace autotune::controller
