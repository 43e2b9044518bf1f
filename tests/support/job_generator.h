#pragma once
// Test support: AutotuneJob documents shaped like the ones users write (Hugging Face and DeepSpeed
// configs with "auto", candidate lists, DeepSpeed's autotuning section, Pod templates), now and
// then with a value validation must refuse. Every choice is asked of a Choose function, so a
// seeded random generator (property tests) and a fuzzer's input (tests/fuzz) explore the same
// shapes.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace autotune::testing {

// An index in [0, count); count is at least 1.
using Choose = std::function<std::size_t(std::size_t count)>;

// Uniform choices from a generator seeded with `seed`.
inline Choose seededChoice(std::uint64_t seed) {
  auto random = std::make_shared<std::mt19937_64>(seed);
  return [random](std::size_t count) {
    return std::uniform_int_distribution<std::size_t>(0, count - 1)(*random);
  };
}

using nlohmann::json;

class JobGenerator {
 public:
  explicit JobGenerator(Choose choose) : choose_(std::move(choose)) {}

  // A whole AutotuneJob document named "generated".

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

  json pick(const std::vector<json>& choices) { return choices[choose_(choices.size())]; }

  json maybe(json usual, json odd) { return chance(0.97) ? std::move(usual) : std::move(odd); }

  bool chance(double probability) {
    constexpr std::size_t kSteps = 1000;
    return static_cast<double>(choose_(kSteps)) < probability * kSteps;
  }

  Choose choose_;
};

}  // namespace autotune::testing
