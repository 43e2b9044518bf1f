// A property of the whole path from a user's document to the trials launched: for generated
// jobs, valid and not, decoding and validation never throw; a job that passes them is searched to
// its end without an exception, without launching a trial name or a config twice, with every
// launched config keeping a fixed global batch, and each launch's config and command built
// without an exception.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "api/codec.h"
#include "support/published_oracle.h"
#include "tuning/engine.h"
#include "tuning/protocol.h"

namespace autotune::tuning {
namespace {

using nlohmann::json;

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : random_(seed) {}

  json job() {
    json spec = {{"deepspeedConfig", config()},
                 {"resources", {{"gpusPerTrial", pick({1, 2, 4, 8, 16})}}},
                 {"search",
                  {{"strategy", pick({"deepspeed", "grid", "random", "model-based"})},
                   {"maxTrials", pick({1, 5, 20, 40})},
                   {"fast", pick({true, false})}}},
                 {"parallelism", pick({1, 2, 3})},
                 {"template",
                  {{"spec",
                    {{"containers",
                      {{{"name", "trainer"},
                        {"command", maybe(json{"train", "--deepspeed", "x"}, json{"train", 3})},
                        {"env", maybe(json::array({{{"name", "A"}, {"value", "${trial}"}}}),
                                      json::array({{{"name", "A"}, {"value", 1}}}))}}}}}}}}};
    if (chance(0.2)) {
      spec["resources"]["modelParallelSize"] = maybe(2, 3);
    }
    if (chance(0.7)) {
      spec["model"] = {{"numParameters", pick({1e8, 7.74e8, 1.5e9, 2e10})}};
      if (chance(0.8)) {
        spec["model"]["activationMemoryPerSample"] = pick({1e8, 2e9, 9.6e9});
      }
      spec["resources"]["gpuMemory"] = pick({"16Gi", "32Gi", "80Gi"});
    }
    return {{"apiVersion", "autotune.io/v1alpha1"},
            {"kind", "AutotuneJob"},
            {"metadata", {{"name", "generated"}, {"uid", "uid-1"}}},
            {"spec", spec}};
  }

 private:
  json config() {
    json config = json::object();
    set(config, "train_micro_batch_size_per_gpu", {"auto", 1, 2, 16.0, json{1, 2, 8}, json{4, 4}},
        {"big", 0, 2.5});
    set(config, "gradient_accumulation_steps", {"auto", 1, 2, json{1, 2}}, {-1});
    set(config, "train_batch_size", {"auto", 96, 128, 512, 1.024e3}, {100, "512", json{64}});
    json zero = json::object();
    set(zero, "stage", {0, 1, 2, 3, "all", json{0, 3}, 2.0}, {9, "x", json{1, 1}});
    set(zero, "reduce_bucket_size", {"auto", 5e8, json{5e7, 5.04e7, 500000000}, json{2e8, "auto"}},
        {"big", -1});
    set(zero, "overlap_comm", {true, json{true, false}}, {"yes"});
    set(zero, "offload_optimizer", {json{{"device", "cpu"}}, json{{"device", json{"none", "cpu"}}}},
        {json{{"device", "gpu"}}, json{{"device", 1}}, "cpu"});
    set(zero, "offload_param", {json{{"device", "nvme"}, {"nvme_path", "/local_nvme"}}}, {});
    set(zero, "sub_group_size", {1e9, json{1e9, 1e8}}, {});
    config["zero_optimization"] = chance(0.97) ? zero : pick({3, json::array({zero})});
    set(config, "fp16",
        {json{{"enabled", "auto"}}, json{{"enabled", true}},
         json::array({{{"enabled", true}}, {{"enabled", false}}})},
        {json{{"enabled", 1}}, true});
    set(config, "bf16", {json{{"enabled", "auto"}}, json{{"enabled", json{true, false}}}}, {});
    set(config, "optimizer",
        {json{{"type", "AdamW"}, {"params", {{"lr", "auto"}, {"betas", json{0.9, 0.999}}}}}},
        {"Adam"});
    set(config, "zero_force_ds_cpu_optimizer", {false}, {"false"});
    set(config, "gradient_clipping", {"auto", 1.0, json{0.5, 1.0}}, {});
    set(config, "autotuning",
        {json{{"fast", false}, {"tuner_type", "gridsearch"}, {"tuner_num_trials", 5}},
         json{{"arg_mappings", {{"gradient_accumulation_steps ", "--gas"}}}, {"mp_size", 2}},
         json{{"metric", "FLOPS"}},
         json{{"max_train_micro_batch_size_per_gpu", 8}, {"results_dir", "r"}}},
        {json{{"start_profile_step", 4}, {"end_profile_step", 2}}, "on"});
    return config;
  }

  // Sets `key` more often than not, now and then to a value validation must refuse.
  void set(json& object, const std::string& key, const std::vector<json>& good,
           const std::vector<json>& bad) {
    if (chance(0.6)) {
      object[key] = bad.empty() || chance(0.97) ? pick(good) : pick(bad);
    }
  }

  json pick(const std::vector<json>& choices) {
    return choices[std::uniform_int_distribution<std::size_t>(0, choices.size() - 1)(random_)];
  }

  json maybe(json usual, json odd) { return chance(0.97) ? std::move(usual) : std::move(odd); }

  bool chance(double probability) { return std::bernoulli_distribution(probability)(random_); }

  std::mt19937_64 random_;
};

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
    Generator generator(static_cast<std::uint64_t>(seed));
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
