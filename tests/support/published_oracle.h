#pragma once
// Test support: outcome oracles built from DeepSpeed's published autotuning tables
// (DeepSpeedExamples, training/autotuning/hf), and a driver that runs the engine to the end the way
// an operator would: asking, launching, and feeding results back in whatever order they finish.

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api/job.h"
#include "tuning/engine.h"

namespace autotune::oracle {

inline constexpr std::int64_t kV100Memory = 32LL * 1024 * 1024 * 1024;

struct TrialOutcome {
  api::Outcome outcome = api::Outcome::kSucceeded;
  std::optional<double> value;
};
using Oracle = std::function<TrialOutcome(const tuning::Trial&)>;

// A published model on 16 V100-32GB: the true largest micro-batch per ZeRO stage (0 = does not
// run at all) and the published best throughput per stage at that micro-batch.
struct PublishedModel {
  std::string name;
  std::int64_t numParameters;
  std::int64_t activationBytesPerSample;
  std::array<int, 4> largestMicroBatch;
  std::array<double, 4> bestThroughput;
  std::string publishedBest;
};

inline void PrintTo(const PublishedModel& model, std::ostream* out) { *out << model.name; }

inline const std::vector<PublishedModel>& publishedModels() {
  static const std::vector<PublishedModel> models = {
      {"gpt2-large",
       774'000'000,
       9'600'000'000,
       {2, 3, 3, 0},
       {59.0229, 87.3017, 77.8338, 0},
       "z1_gas1_tmbspg3"},
      {"gpt2-medium",
       345'000'000,
       5'000'000'000,
       {5, 6, 6, 0},
       {167.688, 175.46, 161.619, 0},
       "z1_gas1_tmbspg6"},
      {"gpt2-xl",
       1'500'000'000,
       17'000'000'000,
       {0, 1, 1, 1},
       {0, 40.1749, 33.0472, 12.8604},
       "z1_gas1_tmbspg1"},
      {"deberta",
       1'500'000'000,
       2'260'000'000,
       {0, 11, 14, 0},
       {0, 177.843, 154.002, 0},
       "z1_gas1_tmbspg11"},
  };
  return models;
}

// Throughput grows with the micro-batch and saturates; a little gradient accumulation helps
// (fewer optimizer steps per sample), never enough to beat a larger micro-batch.
inline Oracle publishedOracle(const PublishedModel& model) {
  return [model](const tuning::Trial& trial) -> TrialOutcome {
    const auto stage = static_cast<std::size_t>(trial.stage);
    const int largest = model.largestMicroBatch.at(stage);
    if (largest == 0 || trial.microBatch > largest) {
      return {api::Outcome::kOOM, std::nullopt};
    }
    const double saturation = std::sqrt(static_cast<double>(trial.microBatch) / largest);
    const double accumulation = 1 + 0.04 * (1 - 1.0 / trial.gradientAccumulation);
    return {api::Outcome::kSucceeded, model.bestThroughput.at(stage) * saturation * accumulation};
  };
}

inline api::Spec specFor(const PublishedModel& model, nlohmann::json stages = "all") {
  api::Spec spec;
  spec.deepspeedConfig = {{"train_micro_batch_size_per_gpu", "auto"},
                          {"gradient_accumulation_steps", 1},
                          {"fp16", {{"enabled", true}}},
                          {"zero_optimization", {{"stage", std::move(stages)}}}};
  spec.model.numParameters = model.numParameters;
  spec.model.activationMemoryPerSample = model.activationBytesPerSample;
  spec.resources.gpusPerTrial = 16;
  spec.resources.gpuMemory = api::Quantity::fromValue(kV100Memory);
  spec.podTemplate = {{"spec", {{"containers", {{{"name", "trainer"}}}}}}};
  return spec;
}

struct SearchRun {
  std::vector<std::string> launched;  // in launch order
  std::vector<api::TrialRecord> records;
  std::vector<tuning::EngineInput> inputs;  // every question asked, in order
  std::vector<tuning::Decision> decisions;
  tuning::Decision last;
  bool launchedTwice = false;
};

struct DriveOptions {
  int slots = 1;
  std::uint64_t finishSeed = 0;  // 0: trials finish in launch order; else in a random order
  std::optional<api::MeasuredModel> profileMeasures;
  int maxSteps = 2000;
  std::vector<api::TrialRecord> alreadyFinished;  // results recorded before a restart
};

// Runs the engine to its end against the oracle.
inline SearchRun drive(const api::Spec& spec, const Oracle& oracle,
                       const DriveOptions& options = {}) {
  SearchRun run;
  run.records = options.alreadyFinished;
  for (const auto& record : run.records) {
    run.launched.push_back(record.name);
  }
  std::vector<tuning::Trial> inFlight;
  std::optional<api::MeasuredModel> measured;
  std::mt19937_64 random(options.finishSeed);
  std::set<std::string> seen(run.launched.begin(), run.launched.end());
  for (int step = 0; step < options.maxSteps; ++step) {
    tuning::EngineInput input;
    input.spec = spec;
    input.jobUid = "uid-1";
    input.measured = measured;
    input.finished = run.records;
    for (const auto& trial : inFlight) {
      input.inFlight.push_back(trial.name);
    }
    input.freeSlots = options.slots - static_cast<int>(inFlight.size());
    run.inputs.push_back(input);
    run.last = tuning::decide(input);
    run.decisions.push_back(run.last);
    for (const auto& trial : run.last.launch) {
      run.launchedTwice |= !seen.insert(trial.name).second;
      run.launched.push_back(trial.name);
      inFlight.push_back(trial);
    }
    if (run.last.state != tuning::Decision::State::kContinue || inFlight.empty()) {
      return run;
    }
    const std::size_t index = options.finishSeed == 0 ? 0 : random() % inFlight.size();
    const tuning::Trial finished = inFlight[index];
    inFlight.erase(inFlight.begin() + static_cast<std::ptrdiff_t>(index));
    const TrialOutcome outcome = oracle(finished);
    if (finished.profile && outcome.outcome == api::Outcome::kSucceeded) {
      measured = options.profileMeasures;
    }
    // Records are kept in launch order, as status.results is, whatever order trials finish in.
    api::TrialRecord record;
    record.name = finished.name;
    record.space = finished.space;
    record.outcome = outcome.outcome;
    record.value = outcome.value;
    const auto launchIndex = [&](const std::string& name) {
      return std::find(run.launched.begin(), run.launched.end(), name) - run.launched.begin();
    };
    const auto position = std::find_if(run.records.begin(), run.records.end(), [&](const auto& r) {
      return launchIndex(r.name) > launchIndex(record.name);
    });
    run.records.insert(position, record);
  }
  return run;
}

}  // namespace autotune::oracle
