#pragma once
// Trial and space names exactly as DeepSpeed's autotuner forms them (z1_gas1_tmbspg3,
// z1_rbs5.0e+07_abs1.0e+09_gas1_tmbspg11, z1_rbs_abs_tmbspg), and their Kubernetes-safe forms.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/names.h"

namespace autotune::tuning {

inline constexpr std::string_view kProfileTrialName = "profile_model_info";

// A tuned key (dotted path in the DeepSpeed config) and its value in one trial.
using KnobValue = std::pair<std::string, nlohmann::json>;

// First letter of each '_'-separated word: reduce_bucket_size -> rbs.
std::string acronym(std::string_view key);

// DeepSpeed's value spelling: numbers over 9000 as 5.0e+07, booleans as T/F, the rest as Python
// prints them.
std::string formatValue(const nlohmann::json& value);

// How a trial's name spells one tuned key's value: acronym of its last key, then formatValue
// (zero_optimization.reduce_bucket_size = 5e7 -> rbs5.0e+07).
std::string knobWord(const std::string& path, const nlohmann::json& value);

// The fast-mode name: z<stage>_gas<gas>_tmbspg<micro-batch>.
std::string fastTrialName(int stage, int gradientAccumulation, int microBatch);

// What a trial's name says of it (z1_gas1_tmbspg3, z1_rbs5.0e+07_gas1_tmbspg11): its ZeRO stage,
// micro-batch and gradient accumulation (1 where the name gives none). Nothing for a name of no
// such trial (profile_model_info) or one cut short.
struct Coordinates {
  int stage = 0;
  int microBatch = 0;
  int gradientAccumulation = 1;

  bool operator==(const Coordinates&) const = default;
};
std::optional<Coordinates> coordinatesFromName(std::string_view trialName);

// The name of a trial that also tunes other keys. `knobs` must already be in naming order
// (orderForNaming). DeepSpeed places gas after tmbspg when the user's config lacks the key.
// Names, these and space names, longer than 128 characters are cut and end in '~' and a hash of
// the whole.
std::string knobTrialName(int stage, const std::vector<KnobValue>& knobs, int gradientAccumulation,
                          int microBatch, bool userConfigHasGradientAccumulation);

// The space name of a knob search: z1_rbs_abs_tmbspg. Knob paths in space order
// (orderForSpace).
std::string knobSpaceName(int stage, const std::vector<std::string>& knobPaths);

// DeepSpeed orders ZeRO keys by its per-stage config template in trial names, and by its default
// tuning space in space names; other keys follow alphabetically.
std::vector<std::string> orderForNaming(int stage, std::vector<std::string> paths);
std::vector<std::string> orderForSpace(int stage, std::vector<std::string> paths);

inline constexpr std::uint64_t kFnvOffsetBasis = 14695981039346656037ULL;

// 64-bit FNV-1a: a stable hash for name suffixes, seeds and identities, the same on every
// platform and run.
std::uint64_t fnv1a(std::string_view text, std::uint64_t basis = kFnvOffsetBasis);

// fnv1a(text) as 16 lowercase hex digits.
std::string fnv1aHex(std::string_view text);

// A trial name as a DNS-1123 label fragment: lower case, '_' and '.' to '-', '+' dropped.
std::string dnsSafe(std::string_view trialName);

// "<job>-<trial>" as a Pod name of at most 63 characters, through boundedName.
std::string podName(std::string_view jobName, std::string_view trialName);

// The trial's value for the autotune.io/trial label (also at most 63 characters).
std::string trialLabel(std::string_view trialName);

// What the start of a cut name may end in, before the '-' that follows it.
enum class CutEnd {
  kAlphanumeric,  // as every DNS name and label value needs
  kAnyButHyphen,  // a '.' stays: the names of multi-node trials' Jobs have always been cut so
};

// A name of at most maxLength characters: `name` itself when it fits; else its start, shortened
// to end as `cutEnd` says, then '-' and a 10-digit hash of the whole name, so that distinct names
// keep distinct results. At 63 characters a name can become a label value (a batch/v1 Job's).
std::string boundedName(std::string_view name, std::size_t maxLength = api::kMaxDnsLabelLength,
                        CutEnd cutEnd = CutEnd::kAlphanumeric);

// Any text as a label value: kept when it is one, else its valid characters cut to fit and a hash
// of the whole text, so that distinct texts keep distinct values.
std::string labelValue(std::string_view text);

}  // namespace autotune::tuning
