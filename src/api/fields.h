#pragma once
// Internal to the api library: reading typed fields out of JSON with every problem recorded as a
// FieldError with its path, nothing thrown. Shared by the codec and the reader of DeepSpeed's
// autotuning section.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/codec.h"
#include "api/job.h"
#include "api/units.h"

namespace autotune::api::fields {

using nlohmann::json;

std::string fieldPath(std::string_view parent, std::string_view key);
std::string itemPath(std::string_view parent, std::size_t index);

// The member `key` of `value`, or nullptr when value is no object or lacks it.
const json* findMember(const json& value, std::string_view key);

// "must be an integer", or "must be an integer, not a list" for a user who tried to give several.
std::string mustBe(std::string_view what, const json& value);

// Converters: the value at `path` as a T, or nothing after recording why it is not one. Integers
// may be written as floats without a fraction (YAML reads 7.74e8 as a float).
std::optional<std::int64_t> asInt64(const json& value, const std::string& path,
                                    FieldErrors& errors);
std::optional<int> asInt(const json& value, const std::string& path, FieldErrors& errors);
std::optional<double> asDouble(const json& value, const std::string& path, FieldErrors& errors);
std::optional<bool> asBool(const json& value, const std::string& path, FieldErrors& errors);
std::optional<std::string> asString(const json& value, const std::string& path,
                                    FieldErrors& errors);
std::optional<json> asObject(const json& value, const std::string& path, FieldErrors& errors);
std::optional<json> asAny(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Quantity> asQuantity(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Duration> asDuration(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Strategy> asStrategy(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Metric> asMetric(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Cleanup> asCleanup(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Reuse> asReuse(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Phase> asPhase(const json& value, const std::string& path, FieldErrors& errors);
std::optional<Outcome> asOutcome(const json& value, const std::string& path, FieldErrors& errors);
std::optional<std::map<std::string, std::string>> asStringMap(const json& value,
                                                              const std::string& path,
                                                              FieldErrors& errors);
std::optional<std::map<std::string, double>> asNumberMap(const json& value, const std::string& path,
                                                         FieldErrors& errors);
std::optional<std::vector<std::string>> asStringList(const json& value, const std::string& path,
                                                     FieldErrors& errors);

// Reads one JSON object field by field and remembers which keys it asked for, so that whatever
// remains can be reported as an unknown field (most often a typo).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, FieldErrors& errors)
      : object_(object), path_(std::move(path)), errors_(errors) {}

  // nullptr when the key is absent or null: Kubernetes treats an explicit null as unset.
  const json* get(std::string_view key) {
    known_.emplace(key);
    const auto found = object_.find(key);
    return found == object_.end() || found->is_null() ? nullptr : &*found;
  }

  std::string pathOf(std::string_view key) const { return fieldPath(path_, key); }

  void fail(std::string_view key, std::string reason) {
    errors_.push_back({pathOf(key), std::move(reason)});
  }

  template <typename T, typename Convert>
  void read(std::string_view key, T& out, Convert convert) {
    if (const json* value = get(key)) {
      if (auto decoded = convert(*value, pathOf(key), errors_)) {
        out = std::move(*decoded);
      }
    }
  }

  // Decodes a nested object with decodeFields(ObjectReader&); false when the key is absent.
  template <typename DecodeFields>
  bool readSection(std::string_view key, DecodeFields decodeFields);

  // Decodes a list of objects, each with decodeItem(ObjectReader&, T&).
  template <typename T, typename DecodeItem>
  void readList(std::string_view key, std::vector<T>& out, DecodeItem decodeItem);

  void rejectUnknown() const {
    for (const auto& [key, value] : object_.items()) {
      if (!known_.contains(key)) {
        errors_.push_back({pathOf(key), "unknown field"});
      }
    }
  }

 private:
  const json& object_;
  std::string path_;
  FieldErrors& errors_;
  std::set<std::string, std::less<>> known_;
};

template <typename DecodeFields>
void readObject(const json& value, const std::string& path, FieldErrors& errors,
                DecodeFields decodeFields) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return;
  }
  ObjectReader reader(value, path, errors);
  decodeFields(reader);
  reader.rejectUnknown();
}

template <typename DecodeFields>
bool ObjectReader::readSection(std::string_view key, DecodeFields decodeFields) {
  const json* value = get(key);
  if (value == nullptr) {
    return false;
  }
  readObject(*value, pathOf(key), errors_, decodeFields);
  return true;
}

template <typename T, typename DecodeItem>
void ObjectReader::readList(std::string_view key, std::vector<T>& out, DecodeItem decodeItem) {
  const json* value = get(key);
  if (value == nullptr) {
    return;
  }
  if (!value->is_array()) {
    errors_.push_back({pathOf(key), "must be a list"});
    return;
  }
  for (std::size_t i = 0; i < value->size(); ++i) {
    T item;
    readObject((*value)[i], itemPath(pathOf(key), i), errors_,
               [&](ObjectReader& reader) { decodeItem(reader, item); });
    out.push_back(std::move(item));
  }
}

}  // namespace autotune::api::fields
