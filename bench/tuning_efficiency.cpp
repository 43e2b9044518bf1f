// Tuning efficiency: trials launched and wall time (in trial durations) to reach the best
// configuration for DeepSpeed's published models, against the processes DeepSpeed's own
// autotuner launched for the same models. Prints a Markdown table; see BENCHMARKS.md.

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "support/published_oracle.h"
#include "tuning/engine.h"

namespace {

using autotune::oracle::PublishedModel;

// reference/deepspeed.md §5.4: processes launched, the profiling run included.
const std::map<std::string, int> kDeepSpeedLaunches = {
    {"gpt2-large", 10}, {"gpt2-medium", 12}, {"gpt2-xl", 7}, {"deberta", 11}};

struct Result {
  int launches = 0;
  int makespan = 0;  // in trial durations, every trial taking one
  std::string best;
};

// Runs the engine with `slots` trials at once, each taking one unit of time.
Result measure(const PublishedModel& model, int slots) {
  const autotune::oracle::Oracle oracle = autotune::oracle::publishedOracle(model);
  autotune::tuning::EngineInput input;
  input.spec = autotune::oracle::specFor(model);
  input.spec.parallelism = slots;
  input.jobUid = "bench";
  std::vector<std::pair<int, autotune::tuning::Trial>> running;  // finish time, trial
  Result result;
  int now = 0;
  for (int step = 0; step < 10000; ++step) {
    input.inFlight.clear();
    for (const auto& [finish, trial] : running) {
      input.inFlight.push_back(trial.name);
    }
    input.freeSlots = slots - static_cast<int>(running.size());
    const autotune::tuning::Decision decision = autotune::tuning::decide(input);
    for (const auto& trial : decision.launch) {
      running.emplace_back(now + 1, trial);
      ++result.launches;
    }
    if (decision.state != autotune::tuning::Decision::State::kContinue || running.empty()) {
      result.best = decision.best ? decision.best->name : "none";
      result.makespan = now;
      return result;
    }
    std::sort(running.begin(), running.end(),
              [](const auto& l, const auto& r) { return l.first < r.first; });
    const auto [finish, trial] = running.front();
    running.erase(running.begin());
    now = finish;
    const auto outcome = oracle(trial);
    input.finished.push_back(
        {trial.name, trial.space, outcome.outcome, outcome.value, "", "", 0, {}});
  }
  return result;
}

}  // namespace

int main() {
  std::printf(
      "| model | DeepSpeed launches | slots | launches | launches / DeepSpeed | wall time "
      "(trials) | best | published best |\n");
  std::printf("| --- | --: | --: | --: | --: | --: | --- | --- |\n");
  for (const auto& model : autotune::oracle::publishedModels()) {
    const int deepSpeed = kDeepSpeedLaunches.at(model.name);
    for (const int slots : {1, 2, 4}) {
      const Result result = measure(model, slots);
      std::printf("| %s | %d | %d | %d | %.2f | %d | %s | %s |\n", model.name.c_str(), deepSpeed,
                  slots, result.launches, static_cast<double>(result.launches) / deepSpeed,
                  result.makespan, result.best.c_str(),
                  result.best == model.publishedBest ? "yes" : "NO");
    }
  }
  return 0;
}
