// A property of the whole path from a user's document to the trials launched: for generated
// jobs, valid and not, decoding and validation never throw; a job that passes them is searched to
// its end without an exception, without launching a trial name or a config twice, with every
// launched config keeping a fixed global batch, and each launch's config and command built
// without an exception.

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "support/job_generator.h"
#include "support/published_oracle.h"
#include "tuning/engine.h"
#include "tuning/protocol.h"

namespace autotune::tuning {
namespace {

using nlohmann::json;

// Outcomes as trials give them: most succeed with a value that depends on the config, some run
// out of memory or fail.
oracle::Oracle noisyOracle() {
  return [](const Trial& trial) -> oracle::TrialOutcome {
    const std::uint64_t hash = fnv1a(trial.config.dump());
    if (hash % 7 == 0) {
      return {api::Outcome::kOOM, std::nullopt};
    }
    if (hash % 11 == 0) {
      return {api::Outcome::kFailed, std::nullopt};
    }
    if (trial.profile) {
      return {api::Outcome::kSucceeded, std::nullopt};
    }
    return {api::Outcome::kSucceeded, static_cast<double>(hash % 1000) + trial.microBatch};
  };
}

TEST(GeneratedSpecs, DecodeValidateAndDecideNeverThrowNorLaunchAConfigTwice) {
  constexpr int kJobs = 1500;
  int searched = 0;
  for (int seed = 1; seed <= kJobs; ++seed) {
    testing::JobGenerator generator(testing::seededChoice(static_cast<std::uint64_t>(seed)));
    const json document = generator.job();
    SCOPED_TRACE("seed " + std::to_string(seed) + ": " + document["spec"].dump());
    tl::expected<api::Decoded, api::FieldErrors> decoded;
    ASSERT_NO_THROW(decoded = api::decode(document));
    if (!decoded) {
      continue;
    }
    ++searched;
    const api::Spec& spec = decoded->job.spec;
    oracle::DriveOptions options;
    options.slots = spec.parallelism;
    options.finishSeed = static_cast<std::uint64_t>(seed);
    options.profileMeasures = api::MeasuredModel{774'000'000, 2'000'000'000};
    oracle::SearchRun run;
    ASSERT_NO_THROW(run = oracle::drive(spec, noisyOracle(), options));
    EXPECT_FALSE(run.launchedTwice);
    EXPECT_NE(run.last.state, Decision::State::kContinue) << "the search did not end";
    std::set<std::string> configs;
    const auto& fixedBatch = spec.deepspeedConfig.find("train_batch_size");
    for (const Decision& decision : run.decisions) {
      for (const Trial& trial : decision.launch) {
        EXPECT_TRUE(configs.insert(trial.config.dump()).second) << trial.name;
        EXPECT_NO_THROW(launchConfig(spec, trial, {"/etc/autotune/ds_config.json", "/m.json"}));
        EXPECT_NO_THROW(trialCommand(spec, "generated", trial, "/etc/autotune/ds_config.json"));
        if (fixedBatch != spec.deepspeedConfig.end() && fixedBatch->is_number_integer() &&
            !trial.profile) {
          EXPECT_EQ(trial.config["train_batch_size"], *fixedBatch) << trial.name;
        }
      }
    }
  }
  // The generator must reach the search often enough for the property to mean something.
  EXPECT_GT(searched, kJobs / 5);
}

}  // namespace
}  // namespace autotune::tuning
