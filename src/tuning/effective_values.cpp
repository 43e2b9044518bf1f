#include "tuning/effective_values.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "api/deepspeed_keys.h"
#include "api/tuning_syntax.h"
#include "tuning/naming.h"

namespace autotune::tuning {
namespace {

// A report longer than this is read no further: no DeepSpeed config has so many keys worth
// checking.
constexpr int kMostKeysRead = 64;

bool sameValue(const nlohmann::json& ran, const nlohmann::json& asked) {
  if (ran.is_number() && asked.is_number()) {
    const double left = ran.get<double>();
    const double right = asked.get<double>();
    return std::abs(left - right) <= 1e-9 * std::max({1.0, std::abs(left), std::abs(right)});
  }
  return ran == asked;
}

std::string ranNot(const std::string& key, const nlohmann::json& ran, const std::string& asked) {
  return "the engine ran " + key + " = " + ran.dump() + ", not " + asked + ": " +
         std::string(kNotAppliedAdvice);
}

std::vector<std::string> wordsOf(std::string_view name) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= name.size()) {
    const std::size_t end = std::min(name.find('_', start), name.size());
    words.emplace_back(name.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

// What the trial asks of one key, and how to name it, if the key says anything of the trial:
// nothing for a key the spec leaves to DeepSpeed or the script ("auto", absent, a section), or a
// tuned key whose value the trial's name does not spell (a name cut short).
struct Asked {
  std::function<bool(const nlohmann::json&)> agrees;
  std::string text;
};

std::optional<Asked> askedOf(const api::Spec& spec, std::string_view trialName,
                             const Coordinates& named, const std::string& key) {
  const auto number = [](std::int64_t value) {
    return Asked{[value](const nlohmann::json& ran) { return sameValue(ran, value); },
                 "the " + std::to_string(value) + " the trial's config asks"};
  };
  if (key == api::kMicroBatchKey) {
    return number(named.microBatch);
  }
  if (key == api::kGradientAccumulationKey) {
    return number(named.gradientAccumulation);
  }
  if (key == api::kZeroStagePath) {
    return number(named.stage);
  }
  if (key == kDataParallelKey) {
    const auto ranks = spec.resources.dataParallelRanks();
    return ranks ? std::optional(number(*ranks)) : std::nullopt;
  }
  const nlohmann::json* given = atDottedPath(spec.deepspeedConfig, key);
  if (given == nullptr || *given == "auto" || given->is_object()) {
    return std::nullopt;
  }
  if (given->is_array() && !api::isValueList(key, *given)) {
    // A tuned key: the candidate whose spelling the trial's name holds (knobTrialName).
    const std::vector<std::string> words = wordsOf(trialName);
    const auto candidate = std::ranges::find_if(*given, [&](const nlohmann::json& value) {
      return std::ranges::find(words, knobWord(key, value)) != words.end();
    });
    if (candidate == given->end()) {
      return std::nullopt;
    }
    given = &*candidate;
  }
  return Asked{[given](const nlohmann::json& ran) { return sameValue(ran, *given); },
               "the " + given->dump() + " the trial's config asks"};
}

}  // namespace

const nlohmann::json* atDottedPath(const nlohmann::json& config, std::string_view path) {
  const nlohmann::json* node = &config;
  while (true) {
    const std::size_t dot = path.find('.');
    if (!node->is_object()) {
      return nullptr;
    }
    const auto found = node->find(path.substr(0, dot));
    if (found == node->end()) {
      return nullptr;
    }
    node = &*found;
    if (dot == std::string_view::npos) {
      return node;
    }
    path.remove_prefix(dot + 1);
  }
}

EffectiveCheck checkEffective(const api::Spec& spec, std::string_view trialName,
                              const nlohmann::json& effective) {
  EffectiveCheck check;
  const auto named = coordinatesFromName(trialName);
  if (!named || !effective.is_object()) {
    return check;
  }
  int read = 0;
  for (const auto& [key, ran] : effective.items()) {
    if (++read > kMostKeysRead) {
      break;
    }
    if (!ran.is_primitive() || ran.is_null()) {
      continue;
    }
    const auto asked = askedOf(spec, trialName, *named, key);
    if (!asked) {
      continue;
    }
    ++check.checked;
    if (!asked->agrees(ran)) {
      check.contradiction = ranNot(key, ran, asked->text);
      return check;
    }
  }
  return check;
}

}  // namespace autotune::tuning
