// The engine on generated jobs and generated histories. The input chooses the job (among the
// shapes users write, tests/support/job_generator.h), the outcome of every trial the engine
// launches and the order in which trials finish. For every job validation accepts, decide never
// throws, never launches a trial name or a config twice, and ends the search.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "api/codec.h"
#include "fuzz/check.h"
#include "support/job_generator.h"
#include "support/published_oracle.h"
#include "tuning/engine.h"

namespace {

using autotune::fuzz::check;
namespace api = autotune::api;
namespace oracle = autotune::oracle;
namespace tuning = autotune::tuning;

constexpr std::array kOutcomes = {api::Outcome::kSucceeded,
                                  api::Outcome::kSucceeded,
                                  api::Outcome::kSucceeded,
                                  api::Outcome::kOOM,
                                  api::Outcome::kFailed,
                                  api::Outcome::kTimedOut,
                                  api::Outcome::kMetricsUnavailable,
                                  api::Outcome::kUnschedulable};

// Each trial's outcome as the input says; once the input is used up, every trial succeeds.
oracle::Oracle inputOracle(FuzzedDataProvider& input) {
  return [&input](const tuning::Trial& trial) -> oracle::TrialOutcome {
    const api::Outcome outcome = input.PickValueInArray(kOutcomes);
    if (outcome != api::Outcome::kSucceeded || trial.profile) {
      return {outcome, std::nullopt};
    }
    return {outcome, input.ConsumeFloatingPointInRange(1e-3, 1e9)};
  };
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  autotune::testing::JobGenerator generator([&input](std::size_t count) {
    return input.ConsumeIntegralInRange<std::size_t>(0, count - 1);
  });
  const auto decoded = api::decode(generator.job());
  if (!decoded) {
    return 0;
  }
  const api::Spec& spec = decoded->job.spec;
  oracle::DriveOptions options;
  options.slots = input.ConsumeIntegralInRange(1, 8);
  options.finishSeed = input.ConsumeIntegral<std::uint64_t>();
  options.profileMeasures =
      api::MeasuredModel{input.ConsumeIntegralInRange<std::int64_t>(1, 200'000'000'000),
                         input.ConsumeIntegralInRange<std::int64_t>(0, 100'000'000'000)};
  const oracle::SearchRun run = oracle::drive(spec, inputOracle(input), options);
  check(!run.launchedTwice, "no trial name is launched twice");
  check(run.last.state != tuning::Decision::State::kContinue, "the search ends");
  std::set<std::string> configs;
  for (const tuning::Decision& decision : run.decisions) {
    for (const tuning::Trial& trial : decision.launch) {
      check(configs.insert(trial.config.dump()).second, "no config is launched twice");
    }
  }
  return 0;
}
