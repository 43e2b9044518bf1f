#pragma once
// The tuning space of a job: what the DeepSpeed config leaves open (ZeRO stages, micro-batch
// size, gradient accumulation, any other list-valued key), and the concrete trials drawn from it.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "api/tuning_syntax.h"
#include "tuning/memory_model.h"
#include "tuning/naming.h"

namespace autotune::tuning {

// Another list-valued key of the config: a dimension of the search.
struct Dimension {
  std::string path;  // dotted, e.g. zero_optimization.reduce_bucket_size
  std::vector<nlohmann::json> values;
};

// The micro-batch sizes a trial may take within [lowest, highest]: every one while the global
// batch is free; with a fixed train_batch_size, only the divisors of the batch per data-parallel
// rank, each with the gradient accumulation that completes it.
class MicroBatchLadder {
 public:
  MicroBatchLadder() = default;
  MicroBatchLadder(int lowest, int highest, std::optional<int> batchPerReplica);

  bool empty() const;
  std::optional<int> atMost(int microBatch) const;   // the largest allowed <= microBatch
  std::optional<int> atLeast(int microBatch) const;  // the smallest allowed >= microBatch
  // The allowed size strictly between low and high that is closest to target (the smaller of
  // two as close).
  std::optional<int> closestBetween(int low, int high, int target) const;
  // Every allowed size in [low, high]; the caller keeps the range small when the batch is free.
  std::vector<int> between(int low, int high) const;
  std::optional<int> batchPerReplica() const { return batchPerReplica_; }
  // The gradient accumulation of a trial at this micro-batch: what completes the fixed batch,
  // else `freeChoice`.
  int gradientAccumulationFor(int microBatch, int freeChoice) const;

 private:
  int lowest_ = 1;
  int highest_ = 0;
  std::optional<int> batchPerReplica_;
  std::vector<int> divisors_;  // ascending, within [lowest, highest]; only with a fixed batch
};

struct TuningSpace {
  // The user's config with every dimension at its first value and without the keys a trial sets
  // itself (stage, micro-batch, gradient accumulation, train_batch_size, autotuning).
  nlohmann::json base;
  // The config's tuning syntax, as api::TuningSyntax decodes it.
  std::vector<int> stages;  // ascending, distinct
  api::BatchChoice microBatch;
  api::BatchChoice gradientAccumulation;
  bool userSetGradientAccumulation = false;
  std::optional<int> fixedTrainBatch;
  bool trainBatchAuto = false;
  MicroBatchLadder microBatches;
  std::vector<Dimension> dimensions;  // by path
  Parallelism parallelism;
  api::Search search;
};

TuningSpace describeSpace(const api::Spec& spec);

// One concrete configuration to run.
struct Trial {
  std::string name;   // canonical, e.g. z1_gas1_tmbspg3
  std::string space;  // e.g. z1
  int stage = 0;
  int microBatch = 1;
  int gradientAccumulation = 1;
  std::vector<KnobValue> knobs;  // other tuned keys, in naming order
  bool profile = false;
  nlohmann::json config;  // the DeepSpeed config the trial runs with
};

// A trial of the micro-batch search: z<stage>_gas<gas>_tmbspg<mbs> in space z<stage>.
Trial makeFastTrial(const TuningSpace& space, int stage, int microBatch, int gradientAccumulation);

// The micro-batch trial a name like z1_gas1_tmbspg3 stands for, if it is one.
std::optional<Trial> fastTrialNamed(const TuningSpace& space, std::string_view name);

// A trial that also sets other keys; named with them, in the given space.
Trial makeKnobTrial(const TuningSpace& space, int stage, int microBatch, int gradientAccumulation,
                    std::vector<KnobValue> knobs, std::string spaceName);

// The profiling trial: ZeRO-3, micro-batch 1, asking the engine to write model info.
Trial makeProfileTrial(const TuningSpace& space);

// Why DeepSpeed would reject the trial's config before running it, if it would.
std::optional<std::string> inconsistency(const TuningSpace& space, const Trial& trial);

// Every combination of the dimensions' values, with the dimensions taken in `order` (paths) and
// the last one varying fastest.
std::vector<std::vector<KnobValue>> combinations(const std::vector<Dimension>& dimensions,
                                                 const std::vector<std::string>& order);

std::vector<std::string> pathsOf(const std::vector<Dimension>& dimensions);
std::vector<std::string> namesOf(const std::vector<Trial>& trials);

// The data-parallel train batch of a trial: micro-batch x gradient accumulation x DP degree.
int trainBatchSize(const TuningSpace& space, int microBatch, int gradientAccumulation);

}  // namespace autotune::tuning
