// The engine against outcome oracles built from DeepSpeed's published results: where it ends,
// how many trials it launches, and that it behaves the same however trials are interleaved.

#include "tuning/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "support/published_oracle.h"
#include "tuning/memory_model.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::tuning {
namespace {

using oracle::drive;
using oracle::DriveOptions;
using oracle::Oracle;
using oracle::PublishedModel;
using oracle::publishedModels;
using oracle::publishedOracle;
using oracle::SearchRun;
using oracle::specFor;
using oracle::TrialOutcome;

// The processes DeepSpeed's own fast mode launched for each published model (reference
// deepspeed.md §5.4, its profiling run included: DeepSpeed cannot skip it, B6).
int deepSpeedLaunches(const std::string& model) {
  static const std::map<std::string, int> launches = {
      {"gpt2-large", 10}, {"gpt2-medium", 12}, {"gpt2-xl", 7}, {"deberta", 11}};
  return launches.at(model);
}

// Trials run `slots` at a time and finish in launch order (seed 0) or in a seeded random order.
DriveOptions parallel(int slots, std::uint64_t finishSeed) {
  DriveOptions options;
  options.slots = slots;
  options.finishSeed = finishSeed;
  return options;
}

std::string bestName(const SearchRun& run) {
  return run.last.best ? run.last.best->name : "<none>";
}

class PublishedModelTest : public ::testing::TestWithParam<PublishedModel> {};

TEST_P(PublishedModelTest, DeepSpeedStrategyEndsAtThePublishedBestWithoutRepeatingATrial) {
  const PublishedModel& model = GetParam();
  const SearchRun run = drive(specFor(model), publishedOracle(model));

  EXPECT_EQ(run.last.state, Decision::State::kSucceeded) << run.last.message;
  EXPECT_EQ(bestName(run), model.publishedBest);
  EXPECT_FALSE(run.launchedTwice);
  EXPECT_LE(static_cast<int>(run.launched.size()), deepSpeedLaunches(model.name))
      << ::testing::PrintToString(run.launched);
}

TEST_P(PublishedModelTest, ParallelTrialsFinishingOutOfOrderReachTheSameBest) {
  const PublishedModel& model = GetParam();
  for (const int slots : {2, 3, 4}) {
    for (const std::uint64_t seed : {1U, 2U, 3U, 4U, 5U}) {
      const SearchRun run = drive(specFor(model), publishedOracle(model), parallel(slots, seed));
      EXPECT_EQ(bestName(run), model.publishedBest) << "slots " << slots << " seed " << seed;
      EXPECT_FALSE(run.launchedTwice) << "slots " << slots << " seed " << seed;
      EXPECT_EQ(run.last.state, Decision::State::kSucceeded);
    }
  }
}

// Callers look up a finished trial's config in the decision, even for a speculative probe the
// plan walked past.
TEST_P(PublishedModelTest, EveryLaunchedTrialCanBeLookedUpInEveryDecision) {
  const PublishedModel& model = GetParam();
  for (const int slots : {1, 2, 4}) {
    const SearchRun run = drive(specFor(model), publishedOracle(model), parallel(slots, 3));
    for (const auto& name : run.launched) {
      const auto found =
          std::find_if(run.last.trials.begin(), run.last.trials.end(),
                       [&](const tuning::Trial& trial) { return trial.name == name; });
      ASSERT_NE(found, run.last.trials.end()) << name << " with " << slots << " slots";
      EXPECT_FALSE(found->config.empty()) << name;
    }
  }
}

TEST_P(PublishedModelTest, EveryStrategyFindsThePublishedBest) {
  const PublishedModel& model = GetParam();
  for (const auto strategy :
       {api::Strategy::kGrid, api::Strategy::kRandom, api::Strategy::kModelBased}) {
    api::Spec spec = specFor(model);
    spec.search.strategy = strategy;
    spec.search.earlyStopping = 0;
    const SearchRun run = drive(spec, publishedOracle(model), parallel(2, 7));
    EXPECT_EQ(bestName(run), model.publishedBest) << api::toString(strategy);
    EXPECT_FALSE(run.launchedTwice) << api::toString(strategy);
  }
}

INSTANTIATE_TEST_SUITE_P(Published, PublishedModelTest, ::testing::ValuesIn(publishedModels()),
                         [](const auto& info) {
                           std::string name = info.param.name;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

const PublishedModel& gpt2Large() { return publishedModels().front(); }

TEST(Engine, Gpt2LargeSearchScreensEveryFeasibleStageInOrder) {
  const SearchRun run = drive(specFor(gpt2Large()), publishedOracle(gpt2Large()));
  std::vector<int> firstSeen;
  for (const auto& name : run.launched) {
    const int stage = name[1] - '0';
    if (std::find(firstSeen.begin(), firstSeen.end(), stage) == firstSeen.end()) {
      firstSeen.push_back(stage);
    }
  }
  EXPECT_EQ(firstSeen, (std::vector<int>{0, 1, 2, 3}));
  // The memory model expects 2 per GPU to fit at ZeRO-0 (9.6 GB of activations per sample).
  EXPECT_EQ(run.launched.front(), "z0_gas1_tmbspg2");
}

// Parameters too many for 8 GPUs of 16 GiB: no stage fits, the engine says so at once with what
// would, and the advice holds.
TEST(Engine, ASearchWhereNothingFitsFailsAtOnceSayingWhatWould) {
  api::Spec spec = specFor(gpt2Large());
  spec.model.numParameters = 70'000'000'000;
  spec.resources.gpusPerTrial = 8;
  spec.resources.gpuMemory = api::Quantity::fromValue(16LL << 30);
  EngineInput input;
  input.spec = spec;
  input.freeSlots = 4;
  Decision decision = decide(input);
  EXPECT_EQ(decision.state, Decision::State::kFailed);
  EXPECT_TRUE(decision.launch.empty());
  for (const std::string_view text :
       {"nothing fits: no ZeRO stage of the search leaves room for a micro-batch of 1 in 16.00 GiB",
        "stage 0 needs ", "stage 3 needs ", "x)", "a smaller model"}) {
    EXPECT_NE(decision.message.find(text), std::string::npos) << text << " in " << decision.message;
  }
  constexpr std::string_view kMoreGpus = "ZeRO stage 3 on spec.resources.gpusPerTrial: ";
  const auto advised = decision.message.find(kMoreGpus);
  ASSERT_NE(advised, std::string::npos) << decision.message;
  const int gpus = std::stoi(decision.message.substr(advised + kMoreGpus.size()));
  spec.deepspeedConfig["zero_optimization"]["stage"] = 3;
  spec.resources.gpusPerTrial = gpus;
  input.spec = spec;
  EXPECT_EQ(decide(input).state, Decision::State::kContinue) << "on " << gpus << " GPUs a trial";
  spec.resources.gpusPerTrial = gpus / 2;
  input.spec = spec;
  EXPECT_EQ(decide(input).state, Decision::State::kFailed) << "the fewest GPUs that fit";

  // 13 billion: offloading the optimizer is enough.
  spec = specFor(gpt2Large());
  spec.model.numParameters = 13'000'000'000;
  spec.model.activationMemoryPerSample = 1'000'000'000;
  spec.resources.gpusPerTrial = 8;
  spec.resources.gpuMemory = api::Quantity::fromValue(16LL << 30);
  input.spec = spec;
  decision = decide(input);
  EXPECT_EQ(decision.state, Decision::State::kFailed);
  EXPECT_NE(decision.message.find("ZeRO stage 3 with zero_optimization.offload_optimizer: "
                                  "{device: cpu} and an optimizer section needs "),
            std::string::npos)
      << decision.message;
  spec.deepspeedConfig["zero_optimization"] = {{"stage", 3},
                                               {"offload_optimizer", {{"device", "cpu"}}}};
  spec.deepspeedConfig["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", 0.0001}}}};
  input.spec = spec;
  decision = decide(input);
  EXPECT_EQ(decision.state, Decision::State::kContinue) << decision.message;
  for (const auto& pruned : decision.pruned) {
    ADD_FAILURE() << pruned.name << ": " << pruned.reason;
  }
}

// A trial that ran another config than it was given measured nothing; a second one says the
// command does not apply the configs at all, and the search ends rather than mislead.
TEST(Engine, ASecondTrialThatDidNotRunItsConfigEndsTheSearch) {
  EngineInput input;
  input.spec = specFor(gpt2Large());
  input.freeSlots = 1;
  const auto notApplied = [](const std::string& name) {
    api::TrialRecord record;
    record.name = name;
    record.space = name.substr(0, 2);
    record.outcome = api::Outcome::kConfigNotApplied;
    record.reason = "the engine ran a global batch of 16, not the 32 the trial's config asks";
    return record;
  };
  const Decision first = decide(input);
  ASSERT_FALSE(first.launch.empty());
  input.finished.push_back(notApplied(first.launch.front().name));
  const Decision second = decide(input);
  EXPECT_EQ(second.state, Decision::State::kContinue) << "one may be the script's accident";
  ASSERT_FALSE(second.launch.empty());
  EXPECT_FALSE(second.best.has_value());
  input.finished.push_back(notApplied(second.launch.front().name));
  const Decision third = decide(input);
  EXPECT_EQ(third.state, Decision::State::kFailed);
  EXPECT_NE(
      third.message.find("2 trials did not run the config they were given (the last, " +
                         second.launch.front().name + ": the engine ran a global batch of 16"),
      std::string::npos)
      << third.message;
  EXPECT_TRUE(third.message.ends_with("); " + howTheConfigIsPassed(input.spec))) << third.message;
}

// A search that ends without a best says why in the words of its last trial: "no trial
// succeeded" alone leaves the user to read every result.
TEST(Engine, ASearchEndingWithoutABestNamesItsLastTrialsReason) {
  EngineInput input;
  input.spec = specFor(gpt2Large());
  input.spec.deepspeedConfig["zero_optimization"]["stage"] = 1;
  input.spec.deepspeedConfig["train_micro_batch_size_per_gpu"] = 2;
  input.spec.search.strategy = api::Strategy::kGrid;
  input.spec.maxFailedTrials = 5;
  input.freeSlots = 1;
  const Decision first = decide(input);
  ASSERT_EQ(first.launch.size(), 1U);
  api::TrialRecord lost;
  lost.name = first.launch.front().name;
  lost.space = lost.name.substr(0, 2);
  lost.outcome = api::Outcome::kFailed;
  lost.reason = "lost on 3 attempts, last: WorkloadEvictedDueToPodsReadyTimeout";
  input.finished.push_back(lost);
  const Decision ended = decide(input);
  EXPECT_EQ(ended.state, Decision::State::kFailed);
  EXPECT_EQ(ended.message, "no trial succeeded: search complete (the last, " + lost.name +
                               ": lost on 3 attempts, last: WorkloadEvictedDueToPodsReadyTimeout)");

  input.spec.maxFailedTrials = 1;
  EXPECT_EQ(decide(input).message, "1 trials failed (spec.maxFailedTrials is 1; the last, " +
                                       lost.name +
                                       ": lost on 3 attempts, last: "
                                       "WorkloadEvictedDueToPodsReadyTimeout)");
}

TEST(Engine, LatencyIsMinimisedNotMaximised) {
  api::Spec spec = specFor(gpt2Large());
  spec.search.metric = api::Metric::kLatency;
  spec.search.strategy = api::Strategy::kGrid;
  spec.search.earlyStopping = 0;
  const Oracle throughput = publishedOracle(gpt2Large());
  const Oracle latency = [&](const Trial& trial) -> TrialOutcome {
    TrialOutcome outcome = throughput(trial);
    if (outcome.value) {
      outcome.value = 1e6 * trial.microBatch * trial.gradientAccumulation * 16 / *outcome.value;
    }
    return outcome;
  };
  const SearchRun run = drive(spec, latency);
  ASSERT_TRUE(run.last.best);
  double lowest = 1e300;
  for (const auto& record : run.records) {
    if (record.value) {
      lowest = std::min(lowest, *record.value);
    }
  }
  EXPECT_DOUBLE_EQ(*run.last.bestValue, lowest);
}

TEST(Engine, GridOrderIsTheSameOnEveryRun) {
  api::Spec spec = specFor(gpt2Large());
  spec.search.strategy = api::Strategy::kGrid;
  spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = {500000000, 50000000};
  const SearchRun first = drive(spec, publishedOracle(gpt2Large()));
  const SearchRun second = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_EQ(first.launched, second.launched);
  ASSERT_FALSE(first.launched.empty());
  EXPECT_EQ(first.launched.front(), "z0_rbs5.0e+08_gas1_tmbspg1");
}

TEST(Engine, RandomOrderDependsOnTheSeedAndOnNothingElse) {
  api::Spec spec = specFor(gpt2Large());
  spec.search.strategy = api::Strategy::kRandom;
  spec.search.earlyStopping = 0;
  spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = {500000000, 50000000};
  const SearchRun first = drive(spec, publishedOracle(gpt2Large()));
  const SearchRun again = drive(spec, publishedOracle(gpt2Large()));
  spec.search.seed = 2;
  const SearchRun reseeded = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_EQ(first.launched, again.launched);
  EXPECT_NE(first.launched, reseeded.launched);
}

// The engine's whole memory is the spec plus the finished results: asked again from any point of
// its own history, by a fresh caller, it makes the same choices.
TEST(Engine, RestartedFromAnyPrefixOfItsHistoryMakesTheSameNextChoices) {
  for (const auto strategy : {api::Strategy::kDeepSpeed, api::Strategy::kGrid,
                              api::Strategy::kRandom, api::Strategy::kModelBased}) {
    api::Spec spec = specFor(gpt2Large());
    spec.search.strategy = strategy;
    const SearchRun run = drive(spec, publishedOracle(gpt2Large()), parallel(2, 3));
    ASSERT_EQ(run.inputs.size(), run.decisions.size());
    for (std::size_t step = 0; step < run.inputs.size(); ++step) {
      const Decision again = decide(run.inputs[step]);
      EXPECT_EQ(namesOf(run.decisions[step].launch), namesOf(again.launch))
          << api::toString(strategy) << " step " << step;
      EXPECT_EQ(run.decisions[step].state, again.state);
    }
  }
}

// Decision::wanted, asked beside `launch`, is exactly what a decision with that room free would
// launch, at every step of every strategy's search: one question stands for the two.
TEST(Engine, WhatItWantsWithRoomIsWhatItWouldLaunchWereThatRoomFree) {
  for (const auto strategy : {api::Strategy::kDeepSpeed, api::Strategy::kGrid,
                              api::Strategy::kRandom, api::Strategy::kModelBased}) {
    api::Spec spec = specFor(gpt2Large());
    spec.search.strategy = strategy;
    const SearchRun run = drive(spec, publishedOracle(gpt2Large()), parallel(3, 5));
    int steps = 0;
    for (std::size_t step = 0; step < run.inputs.size(); ++step) {
      for (const int free : {0, 1}) {
        EngineInput asked = run.inputs[step];
        asked.freeSlots = free;
        asked.roomSlots = 3;
        EngineInput roomy = run.inputs[step];
        roomy.freeSlots = 3;
        const Decision decision = decide(asked);
        EXPECT_EQ(namesOf(decision.wanted), namesOf(decide(roomy).launch))
            << api::toString(strategy) << " step " << step << " free " << free;
        EngineInput plain = asked;
        plain.roomSlots = 0;
        EXPECT_EQ(namesOf(decision.launch), namesOf(decide(plain).launch))
            << "room changes nothing launched";
        EXPECT_EQ(decision.state, decide(plain).state);
        steps += decision.wanted.size() > decision.launch.size() ? 1 : 0;
      }
    }
    EXPECT_GT(steps, 0) << api::toString(strategy) << ": room never wanted more than was free";
  }
}

// An operator killed at any point comes back with nothing but the spec and status.results, every
// trial Pod gone: it goes on to the same best and never runs a recorded trial again.
TEST(Engine, RestartedWithOnlyItsRecordedResultsItNeverRerunsAFinishedTrial) {
  for (const auto strategy : {api::Strategy::kDeepSpeed, api::Strategy::kGrid,
                              api::Strategy::kRandom, api::Strategy::kModelBased}) {
    api::Spec spec = specFor(gpt2Large());
    spec.search.strategy = strategy;
    spec.search.earlyStopping = 0;
    const SearchRun uninterrupted = drive(spec, publishedOracle(gpt2Large()), parallel(2, 0));
    for (std::size_t kept = 0; kept <= uninterrupted.records.size(); ++kept) {
      DriveOptions restart = parallel(2, 0);
      restart.alreadyFinished.assign(
          uninterrupted.records.begin(),
          uninterrupted.records.begin() + static_cast<std::ptrdiff_t>(kept));
      const SearchRun resumed = drive(spec, publishedOracle(gpt2Large()), restart);
      EXPECT_FALSE(resumed.launchedTwice) << api::toString(strategy) << " after " << kept;
      EXPECT_EQ(bestName(resumed), bestName(uninterrupted))
          << api::toString(strategy) << " after " << kept;
    }
  }
}

// Near the memory limit the allocator thrashes: the best micro-batch lies below the largest one
// that fits, and the search must find it rather than assume the edge.
TEST(Engine, FindsAnInteriorOptimumBelowTheMemoryBoundary) {
  api::Spec spec = specFor(gpt2Large(), 1);
  spec.model.activationMemoryPerSample = 1'000'000'000;  // the estimate: ~29 per GPU
  const int boundary = 24;
  const int peak = 17;
  const Oracle thrashing = [&](const Trial& trial) -> TrialOutcome {
    if (trial.microBatch > boundary) {
      return {api::Outcome::kOOM, std::nullopt};
    }
    const double distance = std::abs(trial.microBatch - peak) / static_cast<double>(peak);
    return {api::Outcome::kSucceeded, 100 * (1 - distance * distance)};
  };
  const SearchRun run = drive(spec, thrashing);
  ASSERT_TRUE(run.last.best);
  EXPECT_NEAR(run.last.best->microBatch, peak, 1) << ::testing::PrintToString(run.launched);
  EXPECT_GT(*run.last.bestValue, 99.0);
  EXPECT_LE(run.launched.size(), 12U) << ::testing::PrintToString(run.launched);
  EXPECT_FALSE(run.launchedTwice);
}

// The memory model's largest micro-batch of each stage the spec allows.
std::map<int, int> estimates(const api::Spec& spec) {
  const TuningSpace space = describeSpace(spec);
  const ModelSize model{*spec.model.numParameters, spec.model.activationMemoryPerSample};
  std::map<int, int> largest;
  for (const int stage : space.stages) {
    const Trial trial = makeFastTrial(space, stage, 1, 1);
    largest[stage] = *largestMicroBatch(estimateMemory(model, trial.config, space.parallelism),
                                        spec.resources.gpuMemory->value());
  }
  return largest;
}

// A profile of our own: each stage runs up to `boundaries`, and its throughput, `scale` times a
// curve of the micro-batch's share of that boundary, rises to a peak at `peakShare` and falls
// past it (allocator pressure).
Oracle curveOracle(const std::map<int, int>& boundaries, const std::map<int, double>& scale,
                   double peakShare) {
  return [=](const Trial& trial) -> TrialOutcome {
    const int boundary = boundaries.at(trial.stage);
    if (trial.microBatch > boundary) {
      return {api::Outcome::kOOM, std::nullopt};
    }
    const double share = static_cast<double>(trial.microBatch) / boundary;
    const double distance = (share - peakShare) / peakShare;
    return {api::Outcome::kSucceeded, scale.at(trial.stage) * (1 - distance * distance)};
  };
}

int launchesOfStage(const SearchRun& run, int stage) {
  return static_cast<int>(std::count_if(run.launched.begin(), run.launched.end(), [&](auto& name) {
    return name.starts_with("z" + std::to_string(stage) + "_");
  }));
}

int outOfMemory(const SearchRun& run) {
  return static_cast<int>(std::count_if(run.records.begin(), run.records.end(), [](auto& record) {
    return record.outcome == api::Outcome::kOOM;
  }));
}

api::Spec smallActivations() {
  api::Spec spec = specFor(gpt2Large());
  spec.model.activationMemoryPerSample = 1'000'000'000;  // estimates of 20 to 29 per GPU
  return spec;
}

// One screen at the memory model's estimate ranks a stage: those more than a few percent behind
// the best are never tried again. The memory model is right here, and the peak is the boundary.
TEST(Engine, StagesClearlyBehindAreRuledOutByOneScreen) {
  const api::Spec spec = smallActivations();
  const std::map<int, int> boundaries = estimates(spec);
  ASSERT_EQ(boundaries.size(), 4U);
  const SearchRun run =
      drive(spec, curveOracle(boundaries, {{0, 85}, {1, 100}, {2, 90}, {3, 80}}, 1));
  EXPECT_EQ(bestName(run), "z1_gas1_tmbspg" + std::to_string(boundaries.at(1)))
      << ::testing::PrintToString(run.launched);
  for (const int stage : {0, 2, 3}) {
    EXPECT_EQ(launchesOfStage(run, stage), 1) << ::testing::PrintToString(run.launched);
  }
  // The best ran at the largest micro-batch so far: one probe above proves the boundary.
  EXPECT_EQ(outOfMemory(run), 1) << ::testing::PrintToString(run.launched);
  EXPECT_LE(run.launched.size(), 8U) << ::testing::PrintToString(run.launched);
}

// spec.search.plateauThreshold is how far behind a screen may be and its stage still get a probe
// at the best's memory use; one that probe leaves more than 1% behind is not searched.
TEST(Engine, StagesWithinThePlateauThresholdGetOneMoreProbe) {
  api::Spec spec = smallActivations();
  const std::map<int, int> boundaries = estimates(spec);
  const Oracle oracle = curveOracle(boundaries, {{0, 85}, {1, 100}, {2, 90}, {3, 80}}, 0.8);
  const SearchRun ruledOut = drive(spec, oracle);
  spec.search.plateauThreshold = 0.12;
  const SearchRun probed = drive(spec, oracle);
  for (const auto* run : {&ruledOut, &probed}) {
    EXPECT_EQ(bestName(*run).substr(0, 3), "z1_") << ::testing::PrintToString(run->launched);
  }
  EXPECT_EQ(launchesOfStage(ruledOut, 2), 1) << ::testing::PrintToString(ruledOut.launched);
  EXPECT_EQ(launchesOfStage(probed, 2), 2) << ::testing::PrintToString(probed.launched);
  EXPECT_EQ(launchesOfStage(probed, 0), 1) << ::testing::PrintToString(probed.launched);
}

// A peak well below the memory boundary is bracketed from above: no trial runs out of memory,
// since the best is never the largest micro-batch that ran.
TEST(Engine, AnInteriorOptimumIsFoundWithoutProbingTheBoundary) {
  api::Spec spec = smallActivations();
  spec.deepspeedConfig["zero_optimization"]["stage"] = 1;
  const std::map<int, int> boundaries = estimates(spec);
  const int boundary = boundaries.at(1);
  const SearchRun run = drive(spec, curveOracle(boundaries, {{1, 100}}, 0.6));
  ASSERT_TRUE(run.last.best);
  EXPECT_NEAR(run.last.best->microBatch, 0.6 * boundary, 1)
      << ::testing::PrintToString(run.launched);
  EXPECT_GT(*run.last.bestValue, 99.5);
  EXPECT_EQ(outOfMemory(run), 0) << ::testing::PrintToString(run.launched);
  EXPECT_LE(run.launched.size(), 8U) << ::testing::PrintToString(run.launched);
}

// Wherever the memory boundary falls around the estimate (a model optimistic by a third, or
// pessimistic by half) and wherever the peak lies below it, any number of slots and any finishing
// order reach the peak, and a search that ran out of memory climbing halves its way back rather
// than stepping down one micro-batch at a time.
TEST(Engine, AnyNumberOfSlotsReachesThePeakWhereverTheBoundaryFalls) {
  api::Spec spec = smallActivations();
  spec.deepspeedConfig["zero_optimization"]["stage"] = 1;
  const int estimate = estimates(spec).at(1);
  for (const int boundary :
       {2 * estimate / 3, estimate - 3, estimate, estimate + 3, 2 * estimate}) {
    for (const double peakShare : {0.8, 0.95, 1.0}) {
      const Oracle oracle = curveOracle({{1, boundary}}, {{1, 100}}, peakShare);
      for (const int slots : {1, 2, 4}) {
        for (const std::uint64_t finishSeed : {0, 5}) {
          const SearchRun run = drive(spec, oracle, parallel(slots, finishSeed));
          const std::string context = "boundary " + std::to_string(boundary) + ", peak at " +
                                      std::to_string(peakShare) + ", " + std::to_string(slots) +
                                      " slots, finish order " + std::to_string(finishSeed) + ": " +
                                      ::testing::PrintToString(run.launched);
          ASSERT_TRUE(run.last.best) << context;
          EXPECT_GT(*run.last.bestValue, 99.5) << context;
          EXPECT_LE(outOfMemory(run), 4) << context;
          EXPECT_FALSE(run.launchedTwice) << context;
        }
      }
    }
  }
}

TEST(Engine, UserZeroStageListIsHonoured) {
  const SearchRun run = drive(specFor(gpt2Large(), {1, 2}), publishedOracle(gpt2Large()));
  for (const auto& name : run.launched) {
    EXPECT_TRUE(name.starts_with("z1_") || name.starts_with("z2_")) << name;
  }
  EXPECT_EQ(bestName(run), "z1_gas1_tmbspg3");
}

TEST(Engine, UserListsOfOtherZeroKeysAreTunedAtTheBestMicroBatch) {
  api::Spec spec = specFor(gpt2Large());
  spec.deepspeedConfig["zero_optimization"]["reduce_bucket_size"] = {50000000, 500000000};
  const SearchRun run = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_NE(std::find(run.launched.begin(), run.launched.end(), "z1_rbs5.0e+08_gas1_tmbspg3"),
            run.launched.end())
      << ::testing::PrintToString(run.launched);
  for (const auto& trial : run.last.trials) {
    if (trial.name == "z1_rbs5.0e+08_gas1_tmbspg3") {
      EXPECT_EQ(trial.config["zero_optimization"]["reduce_bucket_size"], 500000000);
    }
  }
}

TEST(Engine, FullModeTunesZeroKnobsOfTheBestStageWithEarlyStopping) {
  const PublishedModel& deberta = publishedModels().back();
  api::Spec spec = specFor(deberta);
  spec.search.fast = false;
  const SearchRun run = drive(spec, publishedOracle(deberta));
  const auto knobTrials = std::count_if(run.launched.begin(), run.launched.end(),
                                        [](auto& n) { return n.starts_with("z1_rbs"); });
  EXPECT_EQ(knobTrials, spec.search.earlyStopping) << ::testing::PrintToString(run.launched);
  EXPECT_NE(
      std::find(run.launched.begin(), run.launched.end(), "z1_rbs5.0e+07_abs5.0e+07_gas1_tmbspg11"),
      run.launched.end());
  const auto spaces = summarizeSpaces(run.records, api::Metric::kThroughput);
  EXPECT_TRUE(std::any_of(spaces.begin(), spaces.end(),
                          [](const auto& s) { return s.name == "z1_rbs_abs_tmbspg"; }));
}

TEST(Engine, NeverLaunchesMoreThanMaxTrials) {
  for (const auto strategy : {api::Strategy::kDeepSpeed, api::Strategy::kGrid}) {
    api::Spec spec = specFor(gpt2Large());
    spec.search.strategy = strategy;
    spec.search.maxTrials = 3;
    const SearchRun run = drive(spec, publishedOracle(gpt2Large()), parallel(2, 1));
    EXPECT_EQ(run.launched.size(), 3U);
    EXPECT_EQ(run.last.state, Decision::State::kSucceeded);
    EXPECT_NE(run.last.message.find("maxTrials"), std::string::npos) << run.last.message;
  }
}

TEST(Engine, GridStopsEarlyAfterTrialsWithoutImprovement) {
  api::Spec spec = specFor(gpt2Large());
  spec.search.strategy = api::Strategy::kGrid;
  spec.search.earlyStopping = 2;
  spec.deepspeedConfig["zero_optimization"]["stage"] = {3, 1};
  // ZeRO-1 first in grid order: its largest micro-batch is best; two ZeRO-3 failures then stop.
  const SearchRun run = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_NE(run.last.message.find("early stopping"), std::string::npos) << run.last.message;
  EXPECT_LT(run.launched.size(), run.last.trials.size());
}

TEST(Engine, ProfilesTheModelFirstWhenItsSizeIsUnknown) {
  api::Spec spec = specFor(gpt2Large());
  spec.model = {};
  DriveOptions options;
  options.profileMeasures = api::MeasuredModel{774'000'000, 9'600'000'000};
  const Oracle oracle = [&](const Trial& trial) -> TrialOutcome {
    if (trial.profile) {
      return {api::Outcome::kSucceeded, std::nullopt};
    }
    return publishedOracle(gpt2Large())(trial);
  };
  const SearchRun run = drive(spec, oracle, options);
  ASSERT_FALSE(run.launched.empty());
  EXPECT_EQ(run.launched.front(), "profile_model_info");
  EXPECT_EQ(bestName(run), "z1_gas1_tmbspg3");
}

// DeepSpeed aborts all tuning when the profiling run fails (its issues #4759, #7269); here the
// search goes on without a memory model and still finds the best.
TEST(Engine, AFailedProfileDoesNotStopTheSearch) {
  api::Spec spec = specFor(gpt2Large());
  spec.model = {};
  const Oracle oracle = [&](const Trial& trial) -> TrialOutcome {
    if (trial.profile) {
      return {api::Outcome::kFailed, std::nullopt};
    }
    return publishedOracle(gpt2Large())(trial);
  };
  const SearchRun run = drive(spec, oracle);
  EXPECT_EQ(bestName(run), "z1_gas1_tmbspg3");
  EXPECT_FALSE(run.launchedTwice);
}

// DeepSpeed crashes when the user gives the parameter count but not the activation memory (B6).
TEST(Engine, ParameterCountWithoutActivationMemoryStillSearches) {
  api::Spec spec = specFor(gpt2Large());
  spec.model.activationMemoryPerSample.reset();
  const SearchRun run = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_EQ(bestName(run), "z1_gas1_tmbspg3");
  EXPECT_FALSE(run.launchedTwice);
}

TEST(Engine, FailuresCountAgainstMaxFailedTrialsButOutOfMemoryDoesNot) {
  api::Spec spec = specFor(gpt2Large());
  spec.maxFailedTrials = 2;
  const SearchRun ooms = drive(spec, publishedOracle(gpt2Large()));
  EXPECT_EQ(ooms.last.state, Decision::State::kSucceeded);

  const Oracle broken = [](const Trial&) -> TrialOutcome {
    return {api::Outcome::kFailed, std::nullopt};
  };
  spec.deepspeedConfig["zero_optimization"]["stage"] = {0, 1, 2, 3};
  const SearchRun failing = drive(spec, broken);
  EXPECT_EQ(failing.last.state, Decision::State::kFailed);
  EXPECT_EQ(failing.launched.size(), 2U);
  EXPECT_NE(failing.last.message.find("maxFailedTrials"), std::string::npos);
}

// A failure that is not out of memory (a config DeepSpeed rejects) says nothing of the memory
// boundary: no back-off through the sizes below, one launch at the smallest, then the stage is
// dropped. A failure of larger micro-batches alone still leaves the smaller ones to search.
TEST(Engine, AScreenThatFailsForAnotherReasonIsTriedOnceAtTheSmallestMicroBatch) {
  api::Spec spec = smallActivations();
  spec.deepspeedConfig["zero_optimization"]["stage"] = 1;
  spec.maxFailedTrials = 50;
  const auto failingAbove = [](int largest) -> Oracle {
    return [largest](const Trial& trial) -> TrialOutcome {
      if (trial.microBatch > largest) {
        return {api::Outcome::kFailed, std::nullopt};
      }
      return {api::Outcome::kSucceeded, 10.0 * trial.microBatch};
    };
  };
  const SearchRun rejected = drive(spec, failingAbove(0));
  EXPECT_EQ(rejected.last.state, Decision::State::kFailed);
  ASSERT_EQ(rejected.launched.size(), 2U) << ::testing::PrintToString(rejected.launched);
  EXPECT_EQ(rejected.launched.back(), "z1_gas1_tmbspg1");

  const SearchRun smallOnly = drive(spec, failingAbove(2));
  EXPECT_EQ(smallOnly.last.state, Decision::State::kSucceeded);
  EXPECT_EQ(bestName(smallOnly), "z1_gas1_tmbspg2") << ::testing::PrintToString(smallOnly.launched);
  EXPECT_EQ(smallOnly.launched.at(1), "z1_gas1_tmbspg1");
}

TEST(Engine, MemoryModelPrunesWhatCannotFitAndSaysWhy) {
  const PublishedModel& xl = publishedModels()[2];
  api::Spec spec = specFor(xl);
  spec.search.strategy = api::Strategy::kGrid;
  const Decision first = decide({spec, "uid", std::nullopt, std::nullopt, {}, {}, 1});
  ASSERT_FALSE(first.pruned.empty());
  const bool zeroZeroPruned =
      std::any_of(first.pruned.begin(), first.pruned.end(), [](const PrunedTrial& p) {
        return p.name.starts_with("z0_") && p.reason.find("per GPU") != std::string::npos;
      });
  EXPECT_TRUE(zeroZeroPruned);
  for (const auto& trial : first.trials) {
    EXPECT_NE(trial.stage, 0) << trial.name;
  }
}

TEST(Engine, EveryTrialConfigHasAConsistentTrainBatchSize) {
  const SearchRun run = drive(specFor(gpt2Large()), publishedOracle(gpt2Large()));
  for (const auto& trial : run.last.trials) {
    EXPECT_EQ(trial.config["train_batch_size"], trial.microBatch * trial.gradientAccumulation * 16);
    EXPECT_EQ(trial.config["train_micro_batch_size_per_gpu"], trial.microBatch);
    EXPECT_FALSE(trial.config.contains("autotuning"));
  }
}

// A fixed global batch: train_batch_size 192 on 16 GPUs is 12 per rank, so every trial runs a
// micro-batch of 1, 2, 3, 4, 6 or 12 with the gradient accumulation that completes it.
TEST(FixedTrainBatch, EveryStrategyKeepsItAndEndsAtTheBestDivisorThatFits) {
  const PublishedModel& gpt2Large =
      *std::find_if(publishedModels().begin(), publishedModels().end(),
                    [](const PublishedModel& model) { return model.name == "gpt2-large"; });
  for (const auto strategy : {api::Strategy::kDeepSpeed, api::Strategy::kGrid,
                              api::Strategy::kRandom, api::Strategy::kModelBased}) {
    for (const int slots : {1, 2}) {
      api::Spec spec = specFor(gpt2Large, {0, 1, 2});
      spec.deepspeedConfig["train_batch_size"] = 192;
      spec.deepspeedConfig["gradient_accumulation_steps"] = "auto";
      spec.search.strategy = strategy;
      const SearchRun run = drive(spec, publishedOracle(gpt2Large), parallel(slots, 7));
      const std::string context =
          std::string(api::toString(strategy)) + ", " + std::to_string(slots) + " slots";
      EXPECT_EQ(run.last.state, Decision::State::kSucceeded) << context << run.last.message;
      EXPECT_EQ(bestName(run), "z1_gas4_tmbspg3") << context;
      EXPECT_FALSE(run.launchedTwice) << context;
      for (const Decision& decision : run.decisions) {
        for (const Trial& trial : decision.launch) {
          EXPECT_EQ(trial.microBatch * trial.gradientAccumulation * 16, 192)
              << context << ": " << trial.name;
          EXPECT_EQ(trial.config["train_batch_size"], 192) << context << ": " << trial.name;
        }
      }
    }
  }
}

TEST(Engine, FreeSlotsAreWhatBothParallelismAndGpusAllowAndNeverNegative) {
  EXPECT_EQ(freeSlots(2, 5), 2);
  EXPECT_EQ(freeSlots(4, 1), 1);
  EXPECT_EQ(freeSlots(-1, 3), 0);
  EXPECT_EQ(freeSlots(3, -2), 0);
}

}  // namespace
}  // namespace autotune::tuning
