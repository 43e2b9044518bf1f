#include "tuning/space.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <optional>
#include <set>

#include "api/deepspeed_keys.h"

namespace autotune::tuning {
namespace {

// Replaces every dimension in `node` by its first value and records it.
void extractDimensions(nlohmann::json& node, const std::string& prefix,
                       std::vector<Dimension>& dimensions) {
  for (const auto& [key, value] : node.items()) {
    std::string path = prefix;
    if (!path.empty()) {
      path += '.';
    }
    path += key;
    if (value.is_object()) {
      extractDimensions(value, path, dimensions);
    } else if (value.is_array() && !value.empty() && !api::isValueList(path, value)) {
      Dimension dimension{path, {}};
      for (const auto& candidate : value) {
        if (std::find(dimension.values.begin(), dimension.values.end(), candidate) ==
            dimension.values.end()) {
          dimension.values.push_back(candidate);
        }
      }
      value = dimension.values.front();
      dimensions.push_back(std::move(dimension));
    }
  }
}

void setPath(nlohmann::json& config, const std::string& dottedPath, const nlohmann::json& value) {
  nlohmann::json* node = &config;
  std::size_t start = 0;
  for (auto dot = dottedPath.find('.'); dot != std::string::npos;
       dot = dottedPath.find('.', start)) {
    node = &(*node)[dottedPath.substr(start, dot - start)];
    start = dot + 1;
  }
  (*node)[dottedPath.substr(start)] = value;
}

Trial makeTrial(const TuningSpace& space, int stage, int microBatch, int gradientAccumulation,
                std::vector<KnobValue> knobs) {
  Trial trial;
  trial.stage = stage;
  trial.microBatch = microBatch;
  trial.gradientAccumulation = gradientAccumulation;
  trial.config = space.base;
  setPath(trial.config, std::string(api::kZeroStagePath), stage);
  for (const auto& [path, value] : knobs) {
    setPath(trial.config, path, value);
  }
  trial.config[api::kMicroBatchKey] = microBatch;
  trial.config[api::kGradientAccumulationKey] = gradientAccumulation;
  trial.config[api::kTrainBatchKey] =
      space.trainBatchAuto
          ? nlohmann::json("auto")
          : nlohmann::json(trainBatchSize(space, microBatch, gradientAccumulation));
  trial.knobs = std::move(knobs);
  return trial;
}

}  // namespace

MicroBatchLadder::MicroBatchLadder(int lowest, int highest, std::optional<int> batchPerReplica)
    : lowest_(std::max(1, lowest)), highest_(highest), batchPerReplica_(batchPerReplica) {
  if (!batchPerReplica_) {
    return;
  }
  highest_ = std::min(highest_, *batchPerReplica_);
  std::vector<int> large;
  for (int small = 1; small <= *batchPerReplica_ / small; ++small) {
    if (*batchPerReplica_ % small == 0) {
      divisors_.push_back(small);
      if (small != *batchPerReplica_ / small) {
        large.push_back(*batchPerReplica_ / small);
      }
    }
  }
  divisors_.insert(divisors_.end(), large.rbegin(), large.rend());
  std::erase_if(divisors_, [&](int divisor) { return divisor < lowest_ || divisor > highest_; });
}

bool MicroBatchLadder::empty() const {
  return batchPerReplica_ ? divisors_.empty() : lowest_ > highest_;
}

std::optional<int> MicroBatchLadder::atMost(int microBatch) const {
  if (!batchPerReplica_) {
    return microBatch < lowest_ || empty() ? std::nullopt
                                           : std::optional<int>(std::min(microBatch, highest_));
  }
  const auto above = std::upper_bound(divisors_.begin(), divisors_.end(), microBatch);
  return above == divisors_.begin() ? std::nullopt : std::optional<int>(*std::prev(above));
}

std::optional<int> MicroBatchLadder::atLeast(int microBatch) const {
  if (!batchPerReplica_) {
    return microBatch > highest_ || empty() ? std::nullopt
                                            : std::optional<int>(std::max(microBatch, lowest_));
  }
  const auto found = std::lower_bound(divisors_.begin(), divisors_.end(), microBatch);
  return found == divisors_.end() ? std::nullopt : std::optional<int>(*found);
}

std::optional<int> MicroBatchLadder::closestBetween(int low, int high, int target) const {
  const std::optional<int> below = atMost(std::min(target, high - 1));
  const std::optional<int> above = atLeast(std::max(target, low + 1));
  const bool belowFits = below && *below > low;
  const bool aboveFits = above && *above < high;
  if (belowFits && aboveFits) {
    return target - *below <= *above - target ? below : above;
  }
  return belowFits ? below : (aboveFits ? above : std::nullopt);
}

std::vector<int> MicroBatchLadder::between(int low, int high) const {
  std::vector<int> sizes;
  for (std::optional<int> size = atLeast(low); size && *size <= high;
       size = *size >= high ? std::nullopt : atLeast(*size + 1)) {
    sizes.push_back(*size);
  }
  return sizes;
}

int MicroBatchLadder::gradientAccumulationFor(int microBatch, int freeChoice) const {
  return batchPerReplica_ ? *batchPerReplica_ / microBatch : freeChoice;
}

TuningSpace describeSpace(const api::Spec& spec) {
  const api::TuningSyntax syntax = api::tuningSyntaxOf(spec.deepspeedConfig);
  TuningSpace space;
  space.stages = syntax.stages;
  space.microBatch = syntax.microBatch;
  space.gradientAccumulation = syntax.gradientAccumulation;
  space.userSetGradientAccumulation = syntax.gradientAccumulationSet;
  space.fixedTrainBatch = syntax.trainBatch.fixed;
  space.trainBatchAuto = syntax.trainBatch.automatic;
  space.parallelism = {spec.resources.gpusPerTrial, spec.resources.modelParallelSize};
  space.search = spec.search;
  std::optional<int> batchPerReplica;
  if (space.fixedTrainBatch) {
    batchPerReplica = *space.fixedTrainBatch / space.parallelism.dataParallel();
  }
  space.microBatches = MicroBatchLadder(spec.search.minMicroBatchSize,
                                        spec.search.maxMicroBatchSize, batchPerReplica);

  space.base = spec.deepspeedConfig;
  for (const auto key : {api::kMicroBatchKey, api::kGradientAccumulationKey, api::kTrainBatchKey,
                         api::kAutotuningKey}) {
    space.base.erase(std::string(key));
  }
  if (space.base.contains(api::kZeroKey)) {
    space.base[api::kZeroKey].erase(std::string(api::kStageKey));
  }
  extractDimensions(space.base, "", space.dimensions);
  std::sort(space.dimensions.begin(), space.dimensions.end(),
            [](const auto& left, const auto& right) { return left.path < right.path; });
  return space;
}

std::vector<std::vector<KnobValue>> combinations(const std::vector<Dimension>& dimensions,
                                                 const std::vector<std::string>& order) {
  std::vector<std::vector<KnobValue>> result = {{}};
  for (const auto& path : order) {
    const auto dimension = std::find_if(dimensions.begin(), dimensions.end(),
                                        [&](const Dimension& d) { return d.path == path; });
    std::vector<std::vector<KnobValue>> extended;
    extended.reserve(result.size() * dimension->values.size());
    for (const auto& prefix : result) {
      for (const auto& value : dimension->values) {
        extended.push_back(prefix);
        extended.back().emplace_back(path, value);
      }
    }
    result = std::move(extended);
  }
  return result;
}

std::vector<std::string> pathsOf(const std::vector<Dimension>& dimensions) {
  std::vector<std::string> paths;
  paths.reserve(dimensions.size());
  for (const auto& dimension : dimensions) {
    paths.push_back(dimension.path);
  }
  return paths;
}

std::vector<std::string> namesOf(const std::vector<Trial>& trials) {
  std::vector<std::string> names;
  names.reserve(trials.size());
  for (const auto& trial : trials) {
    names.push_back(trial.name);
  }
  return names;
}

int trainBatchSize(const TuningSpace& space, int microBatch, int gradientAccumulation) {
  return microBatch * gradientAccumulation * space.parallelism.dataParallel();
}

Trial makeFastTrial(const TuningSpace& space, int stage, int microBatch, int gradientAccumulation) {
  Trial trial = makeTrial(space, stage, microBatch, gradientAccumulation, {});
  trial.name = fastTrialName(stage, gradientAccumulation, microBatch);
  trial.space = "z" + std::to_string(stage);
  return trial;
}

std::optional<Trial> fastTrialNamed(const TuningSpace& space, std::string_view name) {
  int stage = 0;
  int gradientAccumulation = 0;
  int microBatch = 0;
  const std::string text(name);
  // The round trip below rejects anything sscanf misread.
  // NOLINTNEXTLINE(bugprone-unchecked-string-to-number-conversion)
  if (std::sscanf(text.c_str(), "z%d_gas%d_tmbspg%d", &stage, &gradientAccumulation, &microBatch) !=
          3 ||
      fastTrialName(stage, gradientAccumulation, microBatch) != text) {
    return std::nullopt;
  }
  return makeFastTrial(space, stage, microBatch, gradientAccumulation);
}

Trial makeKnobTrial(const TuningSpace& space, int stage, int microBatch, int gradientAccumulation,
                    std::vector<KnobValue> knobs, std::string spaceName) {
  std::vector<std::string> paths;
  paths.reserve(knobs.size());
  for (const auto& knob : knobs) {
    paths.push_back(knob.first);
  }
  std::vector<KnobValue> ordered;
  ordered.reserve(knobs.size());
  for (const auto& path : orderForNaming(stage, paths)) {
    ordered.push_back(*std::find_if(knobs.begin(), knobs.end(),
                                    [&](const auto& knob) { return knob.first == path; }));
  }
  Trial trial = makeTrial(space, stage, microBatch, gradientAccumulation, std::move(ordered));
  trial.name = knobTrialName(stage, trial.knobs, gradientAccumulation, microBatch,
                             space.userSetGradientAccumulation);
  trial.space = std::move(spaceName);
  return trial;
}

Trial makeProfileTrial(const TuningSpace& space) {
  Trial trial = makeTrial(space, 3, 1, 1, {});
  trial.name = std::string(kProfileTrialName);
  trial.space = std::string(kProfileTrialName);
  trial.profile = true;
  trial.config[api::kAutotuningKey] = {{api::kModelInfoKey, {{"profile", true}}}};
  return trial;
}

std::optional<std::string> inconsistency(const TuningSpace& space, const Trial& trial) {
  const nlohmann::json zero = trial.config.value(api::kZeroKey, nlohmann::json::object());
  if (offloads(zero, api::kOffloadParamKey) && trial.stage != 3) {
    return "offload_param needs ZeRO stage 3";
  }
  if (offloads(zero, api::kOffloadOptimizerKey)) {
    if (trial.stage == 0) {
      return "offload_optimizer needs ZeRO stage 1 or higher";
    }
    if (!trial.config.contains(api::kOptimizerKey) &&
        trial.config.value(api::kForceDeepSpeedCpuOptimizerKey, true)) {
      return "offload_optimizer needs DeepSpeed's own optimizer (an optimizer section); a client "
             "optimizer cannot be offloaded";
    }
  }
  const api::Search& search = space.search;
  if (trial.microBatch < search.minMicroBatchSize || trial.microBatch > search.maxMicroBatchSize) {
    return "micro-batch " + std::to_string(trial.microBatch) + " is outside spec.search bounds [" +
           std::to_string(search.minMicroBatchSize) + ", " +
           std::to_string(search.maxMicroBatchSize) + "]";
  }
  const int batch = trainBatchSize(space, trial.microBatch, trial.gradientAccumulation);
  if (search.maxTrainBatchSize && batch > *search.maxTrainBatchSize) {
    return "train batch " + std::to_string(batch) + " exceeds spec.search.maxTrainBatchSize " +
           std::to_string(*search.maxTrainBatchSize);
  }
  return std::nullopt;
}

}  // namespace autotune::tuning
