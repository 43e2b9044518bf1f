#include "profile.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace autotune::trialsim {
namespace {

using nlohmann::json;

json minimalProfile() {
  return {{"name", "my-model"},
          {"numParameters", 1000000},
          {"activationBytesPerSample", 1e8},
          {"microsPerSample", 100}};
}

TEST(Profiles, TheEightPublishedModelsAreBuiltIn) {
  std::set<std::string> names;
  for (const auto& profile : builtInProfiles()) {
    names.insert(profile.name);
    EXPECT_EQ(profile.gpus, 16) << profile.name;
    EXPECT_EQ(profile.gpuMemoryBytes, 32 * kGiB) << profile.name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"distilbert", "bert-base", "bert-large", "gpt2",
                                          "gpt2-medium", "gpt2-large", "gpt2-xl", "deberta"}));
}

TEST(Profiles, AnUnknownNameListsTheBuiltInOnes) {
  const auto profile = builtInProfile("gpt5");
  ASSERT_FALSE(profile);
  EXPECT_EQ(profile.error(),
            "unknown profile \"gpt5\"; the built-in profiles are distilbert, bert-base, "
            "bert-large, gpt2, gpt2-medium, gpt2-large, gpt2-xl, deberta");
}

TEST(Profiles, ACustomProfileNeedsOnlyTheModelAndFillsTheRest) {
  const auto profile = profileFromJson(minimalProfile());
  ASSERT_TRUE(profile) << profile.error();
  EXPECT_EQ(profile->name, "my-model");
  EXPECT_EQ(profile->numParameters, 1000000);
  EXPECT_EQ(profile->precision, Precision::kFp16);
  EXPECT_EQ(profile->gpus, 1);
  EXPECT_EQ(profile->gpuMemoryBytes, 32 * kGiB);
  EXPECT_EQ(profile->fixedOverheadBytes, kGiB);
  EXPECT_EQ(profile->reportedActivationBytes(), 1e8);
  EXPECT_EQ(profile->noise, 0.005);
  EXPECT_EQ(profile->stageCost, (std::array<double, 4>{1, 1, 1, 1}));
}

TEST(Profiles, EveryFieldOfACustomProfileIsRead) {
  json document = minimalProfile();
  document.update({{"precision", "fp32"},
                   {"gpus", 8},
                   {"gpuMemoryBytes", 85899345920},
                   {"tokensPerSample", 2048},
                   {"fixedOverheadBytes", 2e9},
                   {"profiledActivationBytes", 3e8},
                   {"fixedStepMicros", 5000},
                   {"optimizerStepMicros", 700},
                   {"stageCost", {1, 1.1, 1.2, 1.5}},
                   {"offloadOptimizerCost", 3},
                   {"offloadParamCost", 4},
                   {"pressureStart", 0.8},
                   {"pressureSlowdown", 0.5},
                   {"failingStages", {0, 3}},
                   {"noise", 0},
                   {"seed", 99}});
  const auto profile = profileFromJson(document);
  ASSERT_TRUE(profile) << profile.error();
  EXPECT_EQ(profile->precision, Precision::kFp32);
  EXPECT_EQ(profile->gpus, 8);
  EXPECT_EQ(profile->gpuMemoryBytes, 80 * kGiB);
  EXPECT_EQ(profile->tokensPerSample, 2048);
  EXPECT_EQ(profile->fixedOverheadBytes, 2e9);
  EXPECT_EQ(profile->reportedActivationBytes(), 3e8);
  EXPECT_EQ(profile->fixedStepMicros, 5000);
  EXPECT_EQ(profile->optimizerStepMicros, 700);
  EXPECT_EQ(profile->stageCost, (std::array<double, 4>{1, 1.1, 1.2, 1.5}));
  EXPECT_EQ(profile->offloadOptimizerCost, 3);
  EXPECT_EQ(profile->offloadParamCost, 4);
  EXPECT_EQ(profile->pressureStart, 0.8);
  EXPECT_EQ(profile->pressureSlowdown, 0.5);
  EXPECT_EQ(profile->failingStages, (std::array<bool, 4>{true, false, false, true}));
  EXPECT_EQ(profile->noise, 0);
  EXPECT_EQ(profile->seed, 99U);
}

std::string refusedProfile(const json& document) {
  const auto profile = profileFromJson(document);
  EXPECT_FALSE(profile) << document.dump();
  return profile ? std::string() : profile.error();
}

TEST(Profiles, ACustomProfileNamesItsFirstMistake) {
  json document = minimalProfile();
  document.erase("numParameters");
  EXPECT_EQ(refusedProfile(document), "numParameters: is required");
  document = minimalProfile();
  document["precision"] = "int8";
  EXPECT_EQ(refusedProfile(document), "precision: must be one of fp16, bf16, fp32");
  document = minimalProfile();
  document["stageCost"] = {1, 2};
  EXPECT_EQ(refusedProfile(document), "stageCost: must be 4 positive numbers, one per ZeRO stage");
  document = minimalProfile();
  document["failingStages"] = {4};
  EXPECT_EQ(refusedProfile(document), "failingStages: must be a list of ZeRO stages (0 to 3)");
  document = minimalProfile();
  document["pressureStart"] = 1;
  EXPECT_EQ(refusedProfile(document), "pressureStart: must be a number from 0 to below 1");
  document = minimalProfile();
  document["activationBytesPerSample"] = "lots";
  EXPECT_EQ(refusedProfile(document), "activationBytesPerSample: must be a positive number");
}

TEST(Profiles, AMisspelledFieldIsRefusedRatherThanIgnored) {
  json document = minimalProfile();
  document["microsPerSamples"] = 100;
  EXPECT_EQ(refusedProfile(document), "microsPerSamples: is not a profile field");
  EXPECT_EQ(refusedProfile(json::array()), "a profile must be a JSON object");
}

TEST(Profiles, TheNoiseSeedFollowsFromTheNameUnlessSet) {
  const auto first = profileFromJson(minimalProfile());
  json renamed = minimalProfile();
  renamed["name"] = "other-model";
  const auto second = profileFromJson(renamed);
  ASSERT_TRUE(first && second);
  EXPECT_NE(first->seed, second->seed);
  EXPECT_EQ(first->seed, profileFromJson(minimalProfile())->seed);
}

}  // namespace
}  // namespace autotune::trialsim
