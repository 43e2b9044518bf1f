#include "api/deepspeed_config_keys.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <string_view>
#include <utility>

#include "api/fields.h"
#include "api/tuning_syntax.h"
#include "api/validation_checks.h"
#include "deepspeed_config_keys_json.h"

namespace autotune::api {
namespace {

using fields::fieldPath;
using fields::itemPath;
using nlohmann::json;

struct Section {
  std::vector<std::string> keys;  // in the table's order, which settles ties between suggestions
  bool refuses = false;  // DeepSpeed validates the section and refuses a config with another key
};

// Sections by dotted name, "" for the top level; a section missing here is free-form.
using KeyTable = std::map<std::string, Section, std::less<>>;

KeyTable readTable() {
  try {
    const json data = json::parse(kDeepSpeedConfigKeysJson);
    KeyTable table;
    for (const auto& [name, section] : data.at("sections").items()) {
      table.emplace(name, Section{section.at("keys").get<std::vector<std::string>>(),
                                  section.value("refuses", false)});
    }
    return table;
  } catch (const json::exception&) {
    // CMake checks the file's shape and the unit tests its contents; were it unreadable all the
    // same, checking no key is better than refusing every job.
    return {};
  }
}

const KeyTable& keyTable() {
  static const KeyTable table = readTable();
  return table;
}

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// The insertions, deletions, substitutions and swaps of neighbours that turn `from` into `to`,
// none editing a part twice (the optimal string alignment distance), letter case aside: a key
// written in capitals is still the key meant.
std::size_t editDistance(std::string_view from, std::string_view to) {
  std::vector<std::size_t> twoBack(to.size() + 1);
  std::vector<std::size_t> previous(to.size() + 1);
  std::vector<std::size_t> current(to.size() + 1);
  std::iota(previous.begin(), previous.end(), std::size_t{0});
  for (std::size_t i = 1; i <= from.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= to.size(); ++j) {
      const std::size_t substitution = lower(from[i - 1]) == lower(to[j - 1]) ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + substitution});
      if (i > 1 && j > 1 && lower(from[i - 1]) == lower(to[j - 2]) &&
          lower(from[i - 2]) == lower(to[j - 1])) {
        current[j] = std::min(current[j], twoBack[j - 2] + 1);
      }
    }
    std::swap(twoBack, previous);
    std::swap(previous, current);
  }
  return previous[to.size()];
}

// The key nearest `typed` when it is close enough to be the one meant: a third of the typed
// length at most, and one edit for the shortest keys, where two would reach unrelated ones.
std::optional<std::string> nearestKey(std::string_view typed,
                                      const std::vector<std::string>& keys) {
  std::optional<std::string> nearest;
  std::size_t best = std::max<std::size_t>(1, typed.size() / 3) + 1;
  for (const std::string& key : keys) {
    // The distance is at least the difference in length, which spares comparing a long key.
    const std::size_t lengths =
        std::max(key.size(), typed.size()) - std::min(key.size(), typed.size());
    if (lengths >= best) {
      continue;
    }
    if (const std::size_t distance = editDistance(typed, key); distance < best) {
      best = distance;
      nearest = key;
    }
  }
  return nearest;
}

std::string reasonFor(std::string_view key, const std::string& sectionName,
                      const Section& section) {
  const std::string deepspeed = "DeepSpeed " + std::string(kNewestDeepSpeed);
  std::string reason = sectionName.empty()
                           ? std::string("is not a DeepSpeed config key")
                           : "is not a key of DeepSpeed's " + sectionName + " section";
  reason += section.refuses ? " (" + deepspeed + " refuses a config with it)"
                            : " (" + deepspeed + " ignores it)";
  if (const std::optional<std::string> nearest = nearestKey(key, section.keys)) {
    reason += "; did you mean " + *nearest + "?";
  }
  return reason;
}

// Whether `value`, at the dotted key path `keyPath`, holds what the search tunes: "auto", or a list
// that is not a single value (isValueList).
bool holdsTuningSyntax(const json& value, const std::string& keyPath) {
  if (checks::isAuto(value)) {
    return true;
  }
  if (value.is_array()) {
    return !isValueList(keyPath, value);
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      if (holdsTuningSyntax(child, fieldPath(keyPath, key))) {
        return true;
      }
    }
  }
  return false;
}

// `value` is the section `sectionName` at the field path `path`, or a list of candidates for it.
void collect(const json& value, const std::string& sectionName, const std::string& path,
             std::vector<UnknownConfigKey>& unknown) {
  const auto section = keyTable().find(sectionName);
  if (section == keyTable().end()) {
    return;
  }
  if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) {
      collect(value[i], sectionName, itemPath(path, i), unknown);
    }
    return;
  }
  if (!value.is_object()) {
    return;
  }
  const std::vector<std::string>& keys = section->second.keys;
  for (const auto& [key, child] : value.items()) {
    const std::string keyPath = fieldPath(sectionName, key);
    if (std::find(keys.begin(), keys.end(), key) != keys.end()) {
      collect(child, keyPath, fieldPath(path, key), unknown);
    } else {
      unknown.push_back({fieldPath(path, key), reasonFor(key, sectionName, section->second),
                         holdsTuningSyntax(child, keyPath)});
    }
  }
}

}  // namespace

std::vector<UnknownConfigKey> unknownConfigKeys(const json& deepspeedConfig) {
  std::vector<UnknownConfigKey> unknown;
  if (deepspeedConfig.is_object()) {
    collect(deepspeedConfig, "", std::string(checks::kConfigPath), unknown);
  }
  return unknown;
}

}  // namespace autotune::api
