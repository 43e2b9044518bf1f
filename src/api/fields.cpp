#include "api/fields.h"

#include <cmath>
#include <limits>

namespace autotune::api::fields {
namespace {

constexpr std::string_view kStrategyChoices = "must be one of deepspeed, grid, random, model-based";
constexpr std::string_view kMetricChoices = "must be one of throughput, latency, flops";
constexpr std::string_view kCleanupChoices = "must be one of DeleteFinished, Keep";
constexpr std::string_view kReuseChoices = "must be one of Enabled, Disabled";
constexpr std::string_view kPhaseChoices =
    "must be one of Pending, Profiling, Running, Succeeded, Failed";
constexpr std::string_view kOutcomeChoices =
    "must be one of Succeeded, MetricsUnavailable, OOM, Failed, TimedOut, Unschedulable, "
    "ConfigNotApplied";

// Units are written as strings ("32Gi", "30m"); a plain number is also a quantity (of bytes), but
// never a duration, whose unit must be explicit. Anything else gets the unit's own explanation.
template <typename Unit>
std::optional<Unit> asUnit(const json& value, const std::string& path, FieldErrors& errors,
                           bool acceptNumbers) {
  std::string text;
  if (value.is_string()) {
    text = value.get<std::string>();
  } else if (acceptNumbers && value.is_number()) {
    text = value.dump();
  }
  tl::expected<Unit, std::string> parsed = Unit::parse(text);
  if (!parsed) {
    errors.push_back({path, value.is_array() ? parsed.error() + ", not a list" : parsed.error()});
    return std::nullopt;
  }
  return *parsed;
}

template <typename Enum>
std::optional<Enum> asEnum(const json& value, const std::string& path, FieldErrors& errors,
                           std::optional<Enum> (*parse)(std::string_view),
                           std::string_view choices) {
  if (!value.is_string()) {
    errors.push_back({path, mustBe("a string", value)});
    return std::nullopt;
  }
  std::optional<Enum> parsed = parse(value.get_ref<const std::string&>());
  if (!parsed) {
    errors.push_back({path, std::string(choices)});
  }
  return parsed;
}

}  // namespace

std::string fieldPath(std::string_view parent, std::string_view key) {
  std::string path(parent);
  if (!path.empty()) {
    path += '.';
  }
  return path += key;
}

std::string itemPath(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

const json* findMember(const json& value, std::string_view key) {
  if (!value.is_object()) {
    return nullptr;
  }
  const auto found = value.find(key);
  return found == value.end() ? nullptr : &*found;
}

// "must be an integer", or "must be an integer, not a list" for a user who tried to give several.
std::string mustBe(std::string_view what, const json& value) {
  std::string reason = "must be " + std::string(what);
  if (value.is_array()) {
    reason += ", not a list";
  }
  return reason;
}

std::optional<std::int64_t> asInt64(const json& value, const std::string& path,
                                    FieldErrors& errors) {
  if (value.is_number_unsigned() &&
      value.get<std::uint64_t>() >
          static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    errors.push_back({path, "is out of range"});
    return std::nullopt;
  }
  if (value.is_number_integer()) {
    return value.get<std::int64_t>();
  }
  // YAML reads 7.74e8 as a float; a whole number written that way is still meant as an integer.
  if (value.is_number_float()) {
    const double number = value.get<double>();
    constexpr double kLimit = 9223372036854775808.0;  // 2^63
    if (number >= -kLimit && number < kLimit && number == std::trunc(number)) {
      return static_cast<std::int64_t>(number);
    }
  }
  errors.push_back({path, mustBe("an integer", value)});
  return std::nullopt;
}

std::optional<int> asInt(const json& value, const std::string& path, FieldErrors& errors) {
  const std::optional<std::int64_t> wide = asInt64(value, path, errors);
  if (!wide) {
    return std::nullopt;
  }
  if (*wide < std::numeric_limits<int>::min() || *wide > std::numeric_limits<int>::max()) {
    errors.push_back({path, "is out of range"});
    return std::nullopt;
  }
  return static_cast<int>(*wide);
}

std::optional<double> asDouble(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_number()) {
    errors.push_back({path, mustBe("a number", value)});
    return std::nullopt;
  }
  return value.get<double>();
}

std::optional<bool> asBool(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_boolean()) {
    errors.push_back({path, mustBe("a boolean", value)});
    return std::nullopt;
  }
  return value.get<bool>();
}

std::optional<std::string> asString(const json& value, const std::string& path,
                                    FieldErrors& errors) {
  if (!value.is_string()) {
    errors.push_back({path, mustBe("a string", value)});
    return std::nullopt;
  }
  return value.get<std::string>();
}

std::optional<json> asObject(const json& value, const std::string& path, FieldErrors& errors) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return std::nullopt;
  }
  return value;
}

// Free-form values (deepspeedConfig, template) are checked by validation, which knows their rules.
std::optional<json> asAny(const json& value, const std::string& /*path*/, FieldErrors& /*errors*/) {
  return value;
}

std::optional<Quantity> asQuantity(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asUnit<Quantity>(value, path, errors, true);
}

std::optional<Duration> asDuration(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asUnit<Duration>(value, path, errors, false);
}

std::optional<Strategy> asStrategy(const json& value, const std::string& path,
                                   FieldErrors& errors) {
  return asEnum(value, path, errors, parseStrategy, kStrategyChoices);
}

std::optional<Metric> asMetric(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseMetric, kMetricChoices);
}

std::optional<Cleanup> asCleanup(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseCleanup, kCleanupChoices);
}

std::optional<Reuse> asReuse(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseReuse, kReuseChoices);
}

std::optional<Phase> asPhase(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parsePhase, kPhaseChoices);
}

std::optional<Outcome> asOutcome(const json& value, const std::string& path, FieldErrors& errors) {
  return asEnum(value, path, errors, parseOutcome, kOutcomeChoices);
}

namespace {

// An object as a map of what `convert` reads from each value; the values it refuses are left out.
template <typename T, typename Convert>
std::optional<std::map<std::string, T>> asMap(const json& value, const std::string& path,
                                              FieldErrors& errors, Convert convert) {
  if (!value.is_object()) {
    errors.push_back({path, mustBe("an object", value)});
    return std::nullopt;
  }
  std::map<std::string, T> result;
  for (const auto& [key, item] : value.items()) {
    if (std::optional<T> read = convert(item, fieldPath(path, key), errors)) {
      result.emplace(key, std::move(*read));
    }
  }
  return result;
}

}  // namespace

std::optional<std::map<std::string, std::string>> asStringMap(const json& value,
                                                              const std::string& path,
                                                              FieldErrors& errors) {
  return asMap<std::string>(value, path, errors, asString);
}

std::optional<std::map<std::string, double>> asNumberMap(const json& value, const std::string& path,
                                                         FieldErrors& errors) {
  return asMap<double>(value, path, errors, asDouble);
}

std::optional<std::vector<std::string>> asStringList(const json& value, const std::string& path,
                                                     FieldErrors& errors) {
  if (!value.is_array()) {
    errors.push_back({path, mustBe("a list", value)});
    return std::nullopt;
  }
  std::vector<std::string> result;
  for (std::size_t index = 0; index < value.size(); ++index) {
    if (auto read = asString(value[index], itemPath(path, index), errors)) {
      result.push_back(std::move(*read));
    }
  }
  return result;
}

}  // namespace autotune::api::fields
