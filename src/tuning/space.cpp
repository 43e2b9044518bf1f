#include "tuning/space.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <optional>
#include <set>

namespace autotune::tuning {
namespace {

constexpr std::string_view kMicroBatchKey = "train_micro_batch_size_per_gpu";
constexpr std::string_view kGradientAccumulationKey = "gradient_accumulation_steps";
constexpr std::string_view kTrainBatchKey = "train_batch_size";
constexpr std::string_view kAutotuningKey = "autotuning";
constexpr int kAllStages = 4;

std::vector<int> stagesOf(const nlohmann::json& config) {
  const auto zero = config.find("zero_optimization");
  if (zero == config.end() || !zero->is_object() || !zero->contains("stage")) {
    return {0};  // as DeepSpeed: no stage given means ZeRO disabled, not tuned
  }
  const nlohmann::json& stage = zero->at("stage");
  if (stage.is_string()) {
    std::vector<int> all(kAllStages);
    for (int s = 0; s < kAllStages; ++s) {
      all[static_cast<std::size_t>(s)] = s;
    }
    return all;
  }
  if (stage.is_number_integer()) {
    return {stage.get<int>()};
  }
  std::set<int> distinct;
  for (const auto& value : stage) {
    distinct.insert(value.get<int>());
  }
  return {distinct.begin(), distinct.end()};
}

BatchChoice batchChoiceOf(const nlohmann::json& config, std::string_view key) {
  const auto found = config.find(key);
  if (found == config.end() || found->is_string()) {
    return {};
  }
  if (found->is_number_integer()) {
    return {BatchChoice::Kind::kStart, {found->get<int>()}};
  }
  BatchChoice choice{BatchChoice::Kind::kList, {}};
  for (const auto& value : *found) {
    if (std::find(choice.values.begin(), choice.values.end(), value.get<int>()) ==
        choice.values.end()) {
      choice.values.push_back(value.get<int>());
    }
  }
  return choice;
}

// A flat list of numbers under optimizer.params or scheduler.params (Adam's betas) is a value.
bool isPlainValue(const std::string& path, const nlohmann::json& list) {
  const bool underParams =
      path.starts_with("optimizer.params.") || path.starts_with("scheduler.params.");
  return underParams &&
         std::all_of(list.begin(), list.end(), [](const auto& v) { return v.is_number(); });
}

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
    } else if (value.is_array() && !value.empty() && !isPlainValue(path, value)) {
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
  setPath(trial.config, "zero_optimization.stage", stage);
  for (const auto& [path, value] : knobs) {
    setPath(trial.config, path, value);
  }
  trial.config[kMicroBatchKey] = microBatch;
  trial.config[kGradientAccumulationKey] = gradientAccumulation;
  trial.config[kTrainBatchKey] =
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
  TuningSpace space;
  const nlohmann::json& config = spec.deepspeedConfig;
  space.stages = stagesOf(config);
  space.microBatch = batchChoiceOf(config, kMicroBatchKey);
  space.gradientAccumulation = batchChoiceOf(config, kGradientAccumulationKey);
  space.userSetGradientAccumulation = config.contains(kGradientAccumulationKey);
  space.parallelism = {spec.resources.gpusPerTrial, spec.resources.modelParallelSize};
  space.search = spec.search;
  const auto trainBatch = config.find(kTrainBatchKey);
  if (trainBatch != config.end() && trainBatch->is_number_integer()) {
    space.fixedTrainBatch = trainBatch->get<int>();
  }
  space.trainBatchAuto = trainBatch != config.end() && trainBatch->is_string();
  std::optional<int> batchPerReplica;
  if (space.fixedTrainBatch) {
    batchPerReplica = *space.fixedTrainBatch / space.parallelism.dataParallel();
  }
  space.microBatches = MicroBatchLadder(spec.search.minMicroBatchSize,
                                        spec.search.maxMicroBatchSize, batchPerReplica);

  space.base = config;
  for (const auto key :
       {kMicroBatchKey, kGradientAccumulationKey, kTrainBatchKey, kAutotuningKey}) {
    space.base.erase(std::string(key));
  }
  if (space.base.contains("zero_optimization")) {
    space.base["zero_optimization"].erase("stage");
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
  // NOLINTNEXTLINE(cert-err34-c): the round trip below rejects anything sscanf misread
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
  trial.config[kAutotuningKey] = {{"model_info", {{"profile", true}}}};
  return trial;
}

std::optional<std::string> inconsistency(const TuningSpace& space, const Trial& trial) {
  const nlohmann::json zero = trial.config.value("zero_optimization", nlohmann::json::object());
  if (offloads(zero, "offload_param") && trial.stage != 3) {
    return "offload_param needs ZeRO stage 3";
  }
  if (offloads(zero, "offload_optimizer")) {
    if (trial.stage == 0) {
      return "offload_optimizer needs ZeRO stage 1 or higher";
    }
    if (!trial.config.contains("optimizer") &&
        trial.config.value("zero_force_ds_cpu_optimizer", true)) {
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
