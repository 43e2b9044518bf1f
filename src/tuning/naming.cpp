#include "tuning/naming.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <system_error>

#include "api/deepspeed_keys.h"
#include "api/names.h"

namespace autotune::tuning {
namespace {

// A positive whole number spelled out in full, as trial names write them.
std::optional<int> positiveNumber(std::string_view text) {
  int value = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc() || parsed.ptr != text.data() + text.size() || value <= 0) {
    return std::nullopt;
  }
  return value;
}

std::vector<std::string_view> words(std::string_view name) {
  std::vector<std::string_view> parts;
  while (true) {
    const auto underscore = name.find('_');
    parts.push_back(name.substr(0, underscore));
    if (underscore == std::string_view::npos) {
      return parts;
    }
    name.remove_prefix(underscore + 1);
  }
}

constexpr std::size_t kHashDigits = 10;
constexpr std::size_t kValueHashDigits = 8;
// Trial and space names are file names in a local run and fill status.results up to 1,000 times.
constexpr std::size_t kMaxNameLength = 128;

// DeepSpeed's config_templates/template_zero<N>.json key order.
constexpr std::array<std::string_view, 2> kZero1TemplateOrder = {"reduce_bucket_size",
                                                                 "allgather_bucket_size"};
constexpr std::array<std::string_view, 12> kZero3TemplateOrder = {
    "allgather_partitions",
    "allgather_bucket_size",
    "overlap_comm",
    "reduce_scatter",
    "reduce_bucket_size",
    "contiguous_gradients",
    "stage3_max_live_parameters",
    "stage3_max_reuse_distance",
    "stage3_prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "stage3_gather_16bit_weights_on_model_save",
    "sub_group_size"};
// DeepSpeed's DEFAULT_TUNING_SPACE_ZERO_<N> key order.
constexpr std::array<std::string_view, 6> kZero3SpaceOrder = {
    "overlap_comm",         "reduce_scatter",        "reduce_bucket_size",
    "allgather_partitions", "allgather_bucket_size", "contiguous_gradients"};

std::span<const std::string_view> templateOrder(int stage) {
  if (stage == 1) {
    return kZero1TemplateOrder;
  }
  return kZero3TemplateOrder;
}

std::span<const std::string_view> spaceOrder(int stage) {
  if (stage == 1) {
    return kZero1TemplateOrder;
  }
  return kZero3SpaceOrder;
}

// The key of zero_optimization a dotted path names, if it names one.
std::optional<std::string_view> zeroKeyOf(std::string_view path) {
  const std::string_view zero = api::kZeroKey;
  if (path.size() <= zero.size() || !path.starts_with(zero) || path[zero.size()] != '.') {
    return std::nullopt;
  }
  return path.substr(zero.size() + 1);
}

// Rank of a path: ZeRO keys by the given order, then offload sections, then everything else.
std::vector<std::string> orderBy(std::span<const std::string_view> zeroOrder,
                                 std::vector<std::string> paths) {
  const auto rank = [&](const std::string& path) -> std::pair<std::size_t, std::string> {
    if (const auto key = zeroKeyOf(path)) {
      const auto found = std::find(zeroOrder.begin(), zeroOrder.end(), *key);
      if (found != zeroOrder.end()) {
        return {static_cast<std::size_t>(found - zeroOrder.begin()), ""};
      }
      return {zeroOrder.size(), path};
    }
    return {zeroOrder.size() + 1, path};
  };
  std::stable_sort(paths.begin(), paths.end(),
                   [&](const auto& left, const auto& right) { return rank(left) < rank(right); });
  return paths;
}

std::string lastKey(const std::string& path) {
  const auto dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The offload section a path lies in ("op" or "oo"), or nothing.
std::optional<std::string_view> offloadPrefix(const std::string& path) {
  if (path.find(api::kOffloadParamKey) != std::string::npos) {
    return "op";
  }
  if (path.find(api::kOffloadOptimizerKey) != std::string::npos) {
    return "oo";
  }
  return std::nullopt;
}

// The first `digits` hex digits of the FNV-1a hash of `text`.
std::string hashDigits(std::string_view text, std::size_t digits) {
  return fnv1aHex(text).substr(0, digits);
}

bool isAlphanumeric(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// `kept` cut so that `separator` and a hash of `whole` fit within `limit`, then shortened until it
// ends in a character `mayEnd` accepts, then those appended: distinct texts keep distinct results.
template <typename MayEnd>
std::string cutWithHash(std::string kept, std::string_view whole, std::size_t limit, char separator,
                        MayEnd mayEnd) {
  kept.resize(std::min(kept.size(), limit - kHashDigits - 1));
  while (!kept.empty() && !mayEnd(kept.back())) {
    kept.pop_back();
  }
  return (kept.empty() ? "" : kept + separator) + hashDigits(whole, kHashDigits);
}

// A name of at most kMaxNameLength characters: a longer one is cut and ends in '~' and a hash of
// the whole.
std::string capped(const std::string& name) {
  return name.size() <= kMaxNameLength
             ? name
             : cutWithHash(name, name, kMaxNameLength, '~', [](char) { return true; });
}

bool isNameCharacter(char c) {
  return isAlphanumeric(c) || c == '.' || c == '+' || c == '-' || c == ',' || c == '[' || c == ']';
}

// Whether a string value would read as another value's spelling: a number, T, F or None.
bool looksLikeOtherValue(std::string_view text) {
  if (text == "T" || text == "F" || text == "None") {
    return true;
  }
  double number = 0;
  const char* end = text.data() + text.size();
  const auto [stop, status] = std::from_chars(text.data(), end, number);
  return !text.empty() && stop == end && status == std::errc();
}

// A spelling safe in a trial name, which is also a file name and part of a Pod name: the text
// itself when it is made of letters, digits and . + - , [ ]; else those characters followed by a
// hash of the whole text, so that distinct values keep distinct names.
std::string safeSpelling(std::string_view text, bool mustDiffer) {
  if (!mustDiffer && !text.empty() && std::all_of(text.begin(), text.end(), isNameCharacter)) {
    return std::string(text);
  }
  std::string kept;
  std::copy_if(text.begin(), text.end(), std::back_inserter(kept), isNameCharacter);
  return kept + "~" + hashDigits(text, kValueHashDigits);
}

// DeepSpeed's "{:.1e}" when it spells the number exactly, else as few more digits as tell it
// apart: 5.0e+07 stays, 5.04e+07 is no longer also 5.0e+07.
std::string scientific(double value) {
  std::array<char, 40> text{};
  for (int digits = 1; digits <= std::numeric_limits<double>::max_digits10; ++digits) {
    std::snprintf(text.data(), text.size(), "%.*e", digits, value);
    if (std::strtod(text.data(), nullptr) == value) {
      break;
    }
  }
  return text.data();
}

}  // namespace

std::uint64_t fnv1a(std::string_view text, std::uint64_t basis) {
  std::uint64_t hash = basis;
  for (const char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ULL;
  }
  return hash;
}

std::string fnv1aHex(std::string_view text) {
  std::array<char, 17> hex{};
  std::snprintf(hex.data(), hex.size(), "%016llx", static_cast<unsigned long long>(fnv1a(text)));
  return hex.data();
}

std::string acronym(std::string_view key) {
  std::string result;
  bool atWordStart = true;
  for (const char c : key) {
    if (c == '_') {
      atWordStart = true;
    } else if (atWordStart) {
      result.push_back(c);
      atWordStart = false;
    }
  }
  return result;
}

std::string formatValue(const nlohmann::json& value) {
  if (value.is_boolean()) {
    return value.get<bool>() ? "T" : "F";
  }
  // Integers beyond 2^53 have no exact double; their digits keep them apart instead.
  constexpr double kExactIntegers = 9007199254740992.0;
  const bool exactAsDouble =
      value.is_number_float() || (value.is_number() && value.get<double>() < kExactIntegers);
  if (value.is_number() && value.get<double>() > 9000 && exactAsDouble) {
    return scientific(value.get<double>());
  }
  if (value.is_number_integer()) {
    return std::to_string(value.get<std::int64_t>());
  }
  if (value.is_number_float()) {
    std::array<char, 32> buffer{};
    auto* const end =
        std::to_chars(buffer.data(), buffer.data() + buffer.size(), value.get<double>()).ptr;
    std::string text(buffer.data(), end);
    if (text.find_first_of(".en") == std::string::npos) {
      text += ".0";  // Python prints integral floats as 1.0
    }
    return text;
  }
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    return safeSpelling(text, looksLikeOtherValue(text));
  }
  if (value.is_null()) {
    return "None";
  }
  return safeSpelling(value.dump(), false);
}

std::string fastTrialName(int stage, int gradientAccumulation, int microBatch) {
  return "z" + std::to_string(stage) + "_gas" + std::to_string(gradientAccumulation) + "_tmbspg" +
         std::to_string(microBatch);
}

std::string knobWord(const std::string& path, const nlohmann::json& value) {
  return acronym(lastKey(path)) + formatValue(value);
}

std::string knobTrialName(int stage, const std::vector<KnobValue>& knobs, int gradientAccumulation,
                          int microBatch, bool userConfigHasGradientAccumulation) {
  std::string name = "z" + std::to_string(stage) + "_";
  std::optional<std::string_view> openOffload;
  for (const auto& [path, value] : knobs) {
    const auto offload = offloadPrefix(path);
    if (offload && offload != openOffload) {
      name += std::string(*offload) + "_";
    }
    openOffload = offload;
    name += knobWord(path, value) + "_";
  }
  const std::string gas = "gas" + std::to_string(gradientAccumulation);
  const std::string mbs = "tmbspg" + std::to_string(microBatch);
  name += userConfigHasGradientAccumulation ? gas + "_" + mbs : mbs + "_" + gas;
  return capped(name);
}

std::string knobSpaceName(int stage, const std::vector<std::string>& knobPaths) {
  std::string name = "z" + std::to_string(stage) + "_";
  for (const auto& path : knobPaths) {
    name += acronym(lastKey(path)) + "_";
  }
  return capped(name + "tmbspg");
}

std::vector<std::string> orderForNaming(int stage, std::vector<std::string> paths) {
  return orderBy(templateOrder(stage), std::move(paths));
}

std::vector<std::string> orderForSpace(int stage, std::vector<std::string> paths) {
  return orderBy(spaceOrder(stage), std::move(paths));
}

std::string dnsSafe(std::string_view trialName) {
  std::string result;
  for (const char c : trialName) {
    if (c == '_' || c == '.' || c == '~') {
      result.push_back('-');
    } else if (isAlphanumeric(c) || c == '-') {
      result.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
  }
  while (!result.empty() && result.back() == '-') {
    result.pop_back();
  }
  // Only lower-case letters, digits and '_' map one to one; after any other character two
  // trials could share a name (a.b and a_b), so the name carries a hash of the trial's own.
  const bool lossless = std::all_of(trialName.begin(), trialName.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
  return lossless ? result : result + "-" + hashDigits(trialName, kHashDigits);
}

std::string podName(std::string_view jobName, std::string_view trialName) {
  return boundedName(std::string(jobName) + "-" + dnsSafe(trialName));
}

std::string trialLabel(std::string_view trialName) { return boundedName(dnsSafe(trialName)); }

std::string boundedName(std::string_view name, std::size_t maxLength, CutEnd cutEnd) {
  if (name.size() <= maxLength) {
    return std::string(name);
  }
  if (cutEnd == CutEnd::kAnyButHyphen) {
    return cutWithHash(std::string(name), name, maxLength, '-', [](char c) { return c != '-'; });
  }
  return cutWithHash(std::string(name), name, maxLength, '-', isAlphanumeric);
}

std::string labelValue(std::string_view text) {
  if (api::isLabelValue(text)) {
    return std::string(text);
  }
  std::string kept;
  for (const char c : text) {
    const bool allowed = isAlphanumeric(c) || c == '-' || c == '_' || c == '.';
    if (allowed && (isAlphanumeric(c) || !kept.empty())) {
      kept.push_back(c);
    }
  }
  return cutWithHash(std::move(kept), text, api::kMaxLabelValueLength, '-', isAlphanumeric);
}

std::optional<Coordinates> coordinatesFromName(std::string_view trialName) {
  const std::vector<std::string_view> parts = words(trialName);
  if (!parts.front().starts_with("z")) {
    return std::nullopt;
  }
  const std::string_view stageDigits = parts.front().substr(1);
  int stage = 0;
  const auto parsed =
      std::from_chars(stageDigits.data(), stageDigits.data() + stageDigits.size(), stage);
  if (stageDigits.empty() || parsed.ec != std::errc() ||
      parsed.ptr != stageDigits.data() + stageDigits.size()) {
    return std::nullopt;
  }
  Coordinates at{stage, 0, 1};
  for (const auto part : parts) {
    if (part.starts_with("tmbspg")) {
      at.microBatch = positiveNumber(part.substr(std::string_view("tmbspg").size())).value_or(0);
    } else if (part.starts_with("gas")) {
      at.gradientAccumulation =
          positiveNumber(part.substr(std::string_view("gas").size())).value_or(1);
    }
  }
  if (at.microBatch == 0) {
    return std::nullopt;
  }
  return at;
}

}  // namespace autotune::tuning
