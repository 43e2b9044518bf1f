// Search efficiency: each strategy of the engine, at 1, 2 and 4 slots, searching simulated
// model/GPU profiles whose launches trial-sim's model answers, beside DeepSpeed's own autotuner
// on the same profiles (its results read from the JSON lines bench/tuning/deepspeed_fast.py
// printed). Prints a Markdown table; see BENCHMARKS.md. bench/tuning/run runs both.
//
// With --reuse: the GPU-hours of a re-run and of a widened search on each profile, with and
// without the results an earlier job measured in the same environment.
//
//   bench_tuning PROFILES_JSON [DEEPSPEED_RESULTS_JSONL]
//   bench_tuning --deepspeed-arguments PROFILES_JSON   (a line per profile: name, tab, the
//                                                       arguments deepspeed_fast.py takes for it)
//   bench_tuning --reuse PROFILES_JSON

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "options.h"
#include "profile.h"
#include "simulation.h"
#include "tuning/engine.h"
#include "tuning/results.h"

namespace {

namespace api = autotune::api;
namespace sim = autotune::trialsim;
namespace tuning = autotune::tuning;

struct BenchProfile {
  sim::Profile profile;
  std::string simulatorArguments;  // --profile NAME or --profile-file PATH
  double launchMinutes = 1;
  std::optional<int> maxTrainBatchSize;
  std::optional<std::string> publishedBest;
  std::uint64_t noiseSeed = 0;  // trial-sim's AUTOTUNE_SIM_SEED
};

// What one search ended with.
struct SearchResult {
  int launches = 0;
  int wall = 0;  // in launches: every trial takes one unit of time
  std::optional<std::string> best;
  std::optional<double> bestValue;
  int reused = 0;                         // results taken from earlier jobs instead of launched
  std::vector<api::TrialRecord> records;  // every result, each launch taking launchMinutes
};

struct Optimum {
  std::string name;
  double value = 0;
};

struct Outcome {
  api::Outcome outcome = api::Outcome::kFailed;
  std::optional<double> value;
  std::optional<api::MeasuredModel> measured;
};

[[noreturn]] void fail(const std::string& message) { throw std::runtime_error(message); }

nlohmann::json readJson(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    fail("cannot read " + path.string());
  }
  return nlohmann::json::parse(in);
}

// The seed of the measurement noise, read as trial-sim reads it (AUTOTUNE_SIM_SEED), so that both
// searches measure the same numbers.
std::uint64_t noiseSeed() {
  const char* text = std::getenv("AUTOTUNE_SIM_SEED");  // NOLINT(concurrency-mt-unsafe): no threads
  sim::Environment environment;
  if (text != nullptr) {
    environment.seed = text;
  }
  const auto seed = sim::environmentSeed(environment);
  if (!seed) {
    fail(seed.error());
  }
  return *seed;
}

std::vector<BenchProfile> readProfiles(const std::filesystem::path& manifest) {
  const std::uint64_t seed = noiseSeed();
  std::vector<BenchProfile> profiles;
  const nlohmann::json document = readJson(manifest);
  for (const auto& entry : document.at("profiles")) {
    BenchProfile bench;
    const bool builtIn = entry.contains("profile");
    const std::filesystem::path file =
        builtIn ? std::filesystem::path()
                : std::filesystem::absolute(manifest.parent_path() /
                                            entry.at("profileFile").get<std::string>());
    const auto profile = builtIn ? sim::builtInProfile(entry.at("profile").get<std::string>())
                                 : sim::profileFromJson(readJson(file));
    bench.simulatorArguments = builtIn ? "--profile " + entry.at("profile").get<std::string>()
                                       : "--profile-file " + file.string();
    if (!profile) {
      fail(profile.error());
    }
    bench.profile = *profile;
    bench.noiseSeed = seed;
    bench.launchMinutes = entry.at("launchMinutes").get<double>();
    if (entry.contains("maxTrainBatchSize")) {
      bench.maxTrainBatchSize = entry.at("maxTrainBatchSize").get<int>();
    }
    if (entry.contains("publishedBest")) {
      bench.publishedBest = entry.at("publishedBest").get<std::string>();
    }
    profiles.push_back(std::move(bench));
  }
  return profiles;
}

// The config a user writes to have every ZeRO stage and micro-batch tuned, in the profile's
// precision; no model numbers, so the search starts with a profiling launch as DeepSpeed's does.
api::Spec specFor(const BenchProfile& bench, api::Strategy strategy, int slots) {
  api::Spec spec;
  spec.deepspeedConfig = {{"train_micro_batch_size_per_gpu", "auto"},
                          {"gradient_accumulation_steps", 1},
                          {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-4}}}}},
                          {"zero_optimization", {{"stage", "all"}}}};
  if (bench.profile.precision != sim::Precision::kFp32) {
    spec.deepspeedConfig[std::string(sim::precisionName(bench.profile.precision))] = {
        {"enabled", true}};
  }
  spec.resources.gpusPerTrial = bench.profile.gpus;
  spec.resources.gpuMemory =
      api::Quantity::fromValue(static_cast<std::int64_t>(bench.profile.gpuMemoryBytes));
  spec.search.strategy = strategy;
  spec.search.maxTrainBatchSize = bench.maxTrainBatchSize;
  spec.parallelism = slots;
  spec.maxFailedTrials = 1000;  // out-of-memory launches are part of the search, not failures
  return spec;
}

Outcome launch(const BenchProfile& bench, const tuning::Trial& trial) {
  const auto config = sim::checkConfig(trial.config, {bench.profile.gpus, 1});
  if (!config) {
    return {};
  }
  const sim::LaunchResult result = sim::simulate(bench.profile, *config, bench.noiseSeed);
  if (const auto* report = std::get_if<sim::ModelReport>(&result)) {
    return {api::Outcome::kSucceeded, std::nullopt,
            api::MeasuredModel{report->numParameters,
                               static_cast<std::int64_t>(report->activationBytesPerGpu)}};
  }
  if (std::holds_alternative<sim::OutOfMemory>(result)) {
    return {api::Outcome::kOOM, std::nullopt, std::nullopt};
  }
  return {api::Outcome::kSucceeded, std::get<sim::Measurement>(result).throughput, std::nullopt};
}

// What earlier jobs measured in one environment (a profile), by the trial's DeepSpeed config
// dumped canonically (nlohmann::json keeps an object's keys sorted): the outcome and the
// launch's duration, with the job and trial that measured it.
struct Measurement {
  Outcome outcome;
  double durationSeconds = 0;
  std::string source;
};
using MeasurementStore = std::map<std::string, Measurement>;

const Measurement* measurementOf(const MeasurementStore* store, const tuning::Trial& trial) {
  if (store == nullptr) {
    return nullptr;
  }
  const auto found = store->find(trial.config.dump());
  return found == store->end() ? nullptr : &found->second;
}

// Runs the engine to its end with `slots` trials at once, each taking one unit of time. With a
// store, a trial whose config an earlier job measured is not launched: its result is taken from
// the store (reusedFrom names where it came from) and the engine decides from it as if it had
// run. What this search launched is added to `measured`, under `jobName`.
SearchResult search(const BenchProfile& bench, const api::Spec& spec, int slots,
                    const MeasurementStore* earlier = nullptr, MeasurementStore* measured = nullptr,
                    const std::string& jobName = "") {
  tuning::EngineInput input;
  input.spec = spec;
  input.jobUid = "bench";
  const double launchSeconds = bench.launchMinutes * 60;
  std::vector<std::pair<int, tuning::Trial>> running;  // finish time, trial
  SearchResult result;
  int now = 0;
  const auto record = [&](const tuning::Trial& trial, const Outcome& outcome, double seconds,
                          const std::string& reusedFrom) {
    if (outcome.measured) {
      input.measured = outcome.measured;
    }
    api::TrialRecord finished;
    finished.name = trial.name;
    finished.space = trial.space;
    finished.outcome = outcome.outcome;
    finished.value = outcome.value;
    finished.durationSeconds = seconds;
    finished.reusedFrom = reusedFrom;
    input.finished.push_back(finished);
  };
  for (int step = 0; step < 100000; ++step) {
    input.inFlight.clear();
    for (const auto& [finish, trial] : running) {
      input.inFlight.push_back(trial.name);
    }
    input.freeSlots = slots - static_cast<int>(running.size());
    const tuning::Decision decision = tuning::decide(input);
    bool reusedAny = false;
    for (const auto& trial : decision.launch) {
      if (const Measurement* earlierOne = measurementOf(earlier, trial)) {
        record(trial, earlierOne->outcome, earlierOne->durationSeconds, earlierOne->source);
        ++result.reused;
        reusedAny = true;
        continue;
      }
      running.emplace_back(now + 1, trial);
      ++result.launches;
    }
    if (reusedAny) {
      continue;  // the engine decides again from the reused results, at the same time
    }
    if (decision.state != tuning::Decision::State::kContinue || running.empty()) {
      if (decision.best) {
        result.best = decision.best->name;
        result.bestValue = decision.bestValue;
      }
      result.wall = now;
      result.records = input.finished;
      return result;
    }
    std::stable_sort(running.begin(), running.end(),
                     [](const auto& l, const auto& r) { return l.first < r.first; });
    const auto [finish, trial] = running.front();
    running.erase(running.begin());
    now = finish;
    const Outcome outcome = launch(bench, trial);
    record(trial, outcome, launchSeconds, "");
    if (measured != nullptr) {
      measured->emplace(trial.config.dump(),
                        Measurement{outcome, launchSeconds, jobName + "/" + trial.name});
    }
  }
  fail("the search of " + bench.profile.name + " did not end");
}

SearchResult search(const BenchProfile& bench, api::Strategy strategy, int slots) {
  return search(bench, specFor(bench, strategy, slots), slots);
}

// The best of every stage and micro-batch the searches may launch (gradient accumulation 1),
// each measured as a trial would be.
Optimum exhaustiveOptimum(const BenchProfile& bench) {
  const api::Spec spec = specFor(bench, api::Strategy::kDeepSpeed, 1);
  const tuning::TuningSpace space = tuning::describeSpace(spec);
  int cap = spec.search.maxMicroBatchSize;
  if (bench.maxTrainBatchSize) {
    cap = std::min(cap, *bench.maxTrainBatchSize / bench.profile.gpus);
  }
  Optimum best;
  for (const int stage : space.stages) {
    for (int microBatch = 1; microBatch <= cap; ++microBatch) {
      const tuning::Trial trial = tuning::makeFastTrial(space, stage, microBatch, 1);
      const Outcome outcome = launch(bench, trial);
      if (!outcome.value) {
        break;
      }
      if (*outcome.value > best.value) {
        best = {trial.name, *outcome.value};
      }
    }
  }
  return best;
}

// DeepSpeed's autotuner on the same profile, by profile name and slots.
std::map<std::pair<std::string, int>, SearchResult> readDeepSpeedResults(
    const std::filesystem::path& path) {
  std::map<std::pair<std::string, int>, SearchResult> results;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      continue;
    }
    const auto entry = nlohmann::json::parse(line);
    SearchResult result;
    const auto& run = entry.at("result");
    result.launches = run.at("launches").get<int>();
    result.wall = run.at("wall").get<int>();
    if (const auto& best = run.at("best"); !best.is_null()) {
      result.best = "z" + std::to_string(best.at("stage").get<int>()) + "_gas" +
                    std::to_string(best.at("gradientAccumulation").get<int>()) + "_tmbspg" +
                    std::to_string(best.at("microBatch").get<int>());
      result.bestValue = best.at("throughput").get<double>();
    }
    results[{entry.at("profile").get<std::string>(), entry.at("slots").get<int>()}] = result;
  }
  return results;
}

double gpuHoursOf(const SearchResult& result, const BenchProfile& bench) {
  return result.launches * bench.launchMinutes / 60 * bench.profile.gpus;
}

std::string cells(const SearchResult& result, const BenchProfile& bench, const Optimum& optimum) {
  std::array<char, 256> text{};
  std::snprintf(text.data(), text.size(), "%d | %.1f | %d | %s | %.2f%%", result.launches,
                gpuHoursOf(result, bench), result.wall, result.best.value_or("none").c_str(),
                100 * result.bestValue.value_or(0) / optimum.value);
  return text.data();
}

// One searcher's sums over the profiles, at one strategy and slot count.
struct Totals {
  int runs = 0;
  int launches = 0;
  double gpuHours = 0;
  int wall = 0;
  double worstRatio = 1;

  void add(const SearchResult& result, const BenchProfile& bench, const Optimum& optimum) {
    ++runs;
    launches += result.launches;
    gpuHours += gpuHoursOf(result, bench);
    wall += result.wall;
    worstRatio = std::min(worstRatio, result.bestValue.value_or(0) / optimum.value);
  }
};

// The search a user widens after a first one: the same config with gradient accumulation 2 and 4
// to try beside 1 (the `deepspeed` strategy tries a list of them at the best micro-batch once its
// micro-batch search is done, so the widened job starts with the first job's trials).
api::Spec widened(api::Spec spec) {
  spec.deepspeedConfig["gradient_accumulation_steps"] = {1, 2, 4};
  return spec;
}

// One profile's figures in the reuse table, or their sums over the profiles. GPU-hours as
// tuning::gpuHoursOf counts them from the records, every launch taking the profile's launchMinutes.
struct ReuseRow {
  int firstLaunches = 0;
  double first = 0;  // GPU-hours of the first job
  double rerun = 0;  // the same job again, without reuse
  api::GpuHours rerunReusing;
  int rerunLaunched = 0;
  int rerunReused = 0;
  int wideLaunches = 0;
  double wide = 0;  // the widened job, without reuse
  api::GpuHours wideReusing;
  int wideLaunched = 0;
  int wideReused = 0;
  int sameBest = 0;  // profiles where both jobs end at the same best with reuse as without

  void add(const ReuseRow& other) {
    firstLaunches += other.firstLaunches;
    first += other.first;
    rerun += other.rerun;
    rerunReusing.used += other.rerunReusing.used;
    rerunReusing.saved += other.rerunReusing.saved;
    rerunLaunched += other.rerunLaunched;
    rerunReused += other.rerunReused;
    wideLaunches += other.wideLaunches;
    wide += other.wide;
    wideReusing.used += other.wideReusing.used;
    wideReusing.saved += other.wideReusing.saved;
    wideLaunched += other.wideLaunched;
    wideReused += other.wideReused;
    sameBest += other.sameBest;
  }
};

// Per profile, the `deepspeed` strategy one trial at a time: a first job, the same job again, then
// the widened job; each of the last two on its own and with what the jobs before it measured in
// the profile's environment.
ReuseRow reuseRow(const BenchProfile& bench) {
  const api::Spec spec = specFor(bench, api::Strategy::kDeepSpeed, 1);
  const auto used = [&](const SearchResult& result) {
    return tuning::gpuHoursOf(result.records, bench.profile.gpus).used;
  };
  MeasurementStore store;
  const SearchResult first = search(bench, spec, 1, nullptr, &store, "first");
  const SearchResult rerun = search(bench, spec, 1);
  const SearchResult rerunReusing = search(bench, spec, 1, &store, &store, "rerun");
  const SearchResult wide = search(bench, widened(spec), 1);
  const SearchResult wideReusing = search(bench, widened(spec), 1, &store, &store, "widened");
  ReuseRow row;
  row.firstLaunches = first.launches;
  row.first = used(first);
  row.rerun = used(rerun);
  row.rerunReusing = tuning::gpuHoursOf(rerunReusing.records, bench.profile.gpus);
  row.rerunLaunched = rerunReusing.launches;
  row.rerunReused = rerunReusing.reused;
  row.wideLaunches = wide.launches;
  row.wide = used(wide);
  row.wideReusing = tuning::gpuHoursOf(wideReusing.records, bench.profile.gpus);
  row.wideLaunched = wideReusing.launches;
  row.wideReused = wideReusing.reused;
  row.sameBest = rerunReusing.best == rerun.best && wideReusing.best == wide.best ? 1 : 0;
  return row;
}

void printReuseRow(const std::string& name, const ReuseRow& row, const std::string& sameBest) {
  std::printf(
      "| %s | %d | %.1f | %.1f | %.1f | %.1f | %d / %d | %d | %.1f | %.1f | %.1f | %d / %d | %.2f "
      "| %s |\n",
      name.c_str(), row.firstLaunches, row.first, row.rerun, row.rerunReusing.used,
      row.rerunReusing.saved, row.rerunLaunched, row.rerunReused, row.wideLaunches, row.wide,
      row.wideReusing.used, row.wideReusing.saved, row.wideLaunched, row.wideReused,
      row.wide > 0 ? row.wideReusing.used / row.wide : 0, sameBest.c_str());
}

int printReuse(const std::vector<BenchProfile>& profiles) {
  std::printf(
      "| profile | first job: launches | GPU-hours | re-run: GPU-hours | with reuse: used | saved "
      "| launched / reused | widened: launches | GPU-hours | with reuse: used | saved | launched "
      "/ reused | used with / without reuse | same best |\n"
      "| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --- |\n");
  ReuseRow total;
  for (const auto& bench : profiles) {
    const ReuseRow row = reuseRow(bench);
    printReuseRow(bench.profile.name, row, row.sameBest == 1 ? "yes" : "NO");
    total.add(row);
  }
  printReuseRow("all " + std::to_string(profiles.size()), total,
                std::to_string(total.sameBest) + " of " + std::to_string(profiles.size()));
  return 0;
}

void printDeepSpeedArguments(const std::vector<BenchProfile>& profiles) {
  for (const auto& bench : profiles) {
    std::printf("%s\t%s --gpus %d --gpu-memory %.0f --precision %s", bench.profile.name.c_str(),
                bench.simulatorArguments.c_str(), bench.profile.gpus, bench.profile.gpuMemoryBytes,
                std::string(sim::precisionName(bench.profile.precision)).c_str());
    if (bench.maxTrainBatchSize) {
      std::printf(" --max-train-batch-size %d", *bench.maxTrainBatchSize);
    }
    std::printf("\n");
  }
}

int run(const std::vector<std::string>& arguments) {
  if (arguments.size() == 2 && arguments[0] == "--deepspeed-arguments") {
    printDeepSpeedArguments(readProfiles(arguments[1]));
    return 0;
  }
  if (arguments.size() == 2 && arguments[0] == "--reuse") {
    return printReuse(readProfiles(arguments[1]));
  }
  if (arguments.empty() || arguments.size() > 2) {
    fail("usage: bench_tuning PROFILES_JSON [DEEPSPEED_RESULTS_JSONL] | --reuse PROFILES_JSON");
  }
  const std::vector<BenchProfile> profiles = readProfiles(arguments[0]);
  const auto deepSpeed = arguments.size() == 2
                             ? readDeepSpeedResults(arguments[1])
                             : std::map<std::pair<std::string, int>, SearchResult>{};
  const std::vector<api::Strategy> strategies = {api::Strategy::kDeepSpeed, api::Strategy::kGrid,
                                                 api::Strategy::kRandom,
                                                 api::Strategy::kModelBased};
  std::printf(
      "| profile | optimum | strategy | slots | launches | GPU-hours | wall | best | of optimum "
      "| DeepSpeed launches | GPU-hours | wall | best | of optimum |\n");
  std::printf(
      "| --- | --- | --- | --: | --: | --: | --: | --- | --: | --: | --: | --: | --- | --: |\n");
  std::map<std::pair<api::Strategy, int>, std::pair<Totals, Totals>> totals;  // ours, DeepSpeed's
  for (const auto& bench : profiles) {
    const Optimum optimum = exhaustiveOptimum(bench);
    for (const auto strategy : strategies) {
      for (const int slots : {1, 2, 4}) {
        const SearchResult ours = search(bench, strategy, slots);
        const auto theirs = deepSpeed.find({bench.profile.name, slots});
        std::string published;
        if (bench.publishedBest) {
          published = ours.best == bench.publishedBest ? " (published)" : " (NOT published)";
        }
        std::printf("| %s | %s | %s | %d | %s%s | %s |\n", bench.profile.name.c_str(),
                    optimum.name.c_str(), std::string(api::toString(strategy)).c_str(), slots,
                    cells(ours, bench, optimum).c_str(), published.c_str(),
                    theirs == deepSpeed.end() ? "- | - | - | - | -"
                                              : cells(theirs->second, bench, optimum).c_str());
        auto& [ourTotal, theirTotal] = totals[{strategy, slots}];
        ourTotal.add(ours, bench, optimum);
        if (theirs != deepSpeed.end()) {
          theirTotal.add(theirs->second, bench, optimum);
        }
      }
    }
  }
  std::printf(
      "\n| strategy | slots | launches | DeepSpeed launches | ratio | GPU-hours | DeepSpeed "
      "GPU-hours | wall | DeepSpeed wall | worst of optimum | DeepSpeed's worst |\n"
      "| --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n");
  for (const auto& [key, sums] : totals) {
    const auto& [ours, theirs] = sums;
    std::printf("| %s | %d | %d | ", std::string(api::toString(key.first)).c_str(), key.second,
                ours.launches);
    if (theirs.runs == 0) {
      std::printf("- | - | %.0f | - | %d | - | %.2f%% | - |\n", ours.gpuHours, ours.wall,
                  100 * ours.worstRatio);
      continue;
    }
    std::printf("%d | %.2f | %.0f | %.0f | %d | %d | %.2f%% | %.2f%% |\n", theirs.launches,
                static_cast<double>(ours.launches) / theirs.launches, ours.gpuHours,
                theirs.gpuHours, ours.wall, theirs.wall, 100 * ours.worstRatio,
                100 * theirs.worstRatio);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run({argv + 1, argv + argc});
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_tuning: %s\n", error.what());
    return 2;
  }
}
