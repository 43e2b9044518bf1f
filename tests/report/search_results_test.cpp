#include "report/search_results.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

using autotune::api::Outcome;
using autotune::report::countGpus;
using autotune::report::loadResults;
using autotune::report::parseResults;
using autotune::report::SearchResults;
using nlohmann::json;

const json kSucceeded = {{"name", "z1_gas1_tmbspg3"},
                         {"space", "z1"},
                         {"outcome", "Succeeded"},
                         {"value", 87.1},
                         {"startTime", "2026-01-01T00:00:00.250Z"},
                         {"durationSeconds", 61.5},
                         {"metrics", {{"throughput", 87.1}}}};
const json kOutOfMemory = {{"name", "z1_gas1_tmbspg4"},
                           {"space", "z1"},
                           {"outcome", "OOM"},
                           {"reason", "CUDA out of memory"},
                           {"durationSeconds", 12}};

std::vector<std::string> namesOf(const SearchResults& results) {
  std::vector<std::string> names;
  for (const auto& trial : results.trials) {
    names.push_back(trial.record.name);
  }
  return names;
}

TEST(SearchResults, ALocalRunsResultsJsonIsReadInLaunchOrder) {
  json second = kSucceeded;
  second["launchIndex"] = 1;
  json first = kOutOfMemory;
  first["launchIndex"] = 0;
  const json file = {{"apiVersion", "autotune.io/v1alpha1"},
                     {"job", "gpt2-large-local"},
                     {"specIdentity", "2fef59360465e22a"},
                     {"trials", {second, first}},
                     {"model", {{"numParameters", 774000000}, {"activationMemoryPerSample", 5}}}};

  const auto results = parseResults(file.dump(), "results.json");

  ASSERT_TRUE(results) << results.error();
  EXPECT_EQ(results->jobName, "gpt2-large-local");
  EXPECT_EQ(namesOf(*results), (std::vector<std::string>{"z1_gas1_tmbspg4", "z1_gas1_tmbspg3"}));
  const auto& record = results->trials[1].record;
  EXPECT_EQ(record.outcome, Outcome::kSucceeded);
  EXPECT_EQ(record.value, 87.1);
  EXPECT_EQ(record.startTime, "2026-01-01T00:00:00.250Z");
  EXPECT_EQ(record.durationSeconds, 61.5);
  EXPECT_EQ(results->trials[0].record.reason, "CUDA out of memory");
  ASSERT_TRUE(results->model);
  EXPECT_EQ(results->model->numParameters, 774000000);
  EXPECT_FALSE(results->summary);
}

TEST(SearchResults, TheOutputConfigMapsResultsJsonIsAListWithConfigPatches) {
  json best = kSucceeded;
  best["configPatch"] = json::object();
  json other = kOutOfMemory;
  other["configPatch"] = {{"train_micro_batch_size_per_gpu", 4}};
  const std::string file = "[\n" + best.dump() + ",\n" + other.dump() + "\n]\n";

  const auto results = parseResults(file, "results.json");

  ASSERT_TRUE(results) << results.error();
  EXPECT_EQ(namesOf(*results), (std::vector<std::string>{"z1_gas1_tmbspg3", "z1_gas1_tmbspg4"}));
  EXPECT_EQ(results->jobName, "");
}

TEST(SearchResults, TheOutputConfigMapBringsItsFilesAndItsJobsName) {
  const json configMap = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", "gpt2-large-optimal"}, {"labels", {{"autotune.io/job", "gpt2-large"}}}}},
      {"data",
       {{"results.json", "[" + kSucceeded.dump() + "]"},
        {"ds_config.json", "{\"train_micro_batch_size_per_gpu\": 3}\n"},
        {"cmd.txt", "deepspeed train.py\n"},
        {"summary.txt", "| tuning_space |\n"}}}};
  // As `kubectl get configmap -o yaml` prints it: JSON is YAML, and YAML is read too.
  const std::string yaml =
      "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: gpt2-large-optimal\n  labels:\n"
      "    autotune.io/job: gpt2-large\ndata:\n  cmd.txt: |\n    deepspeed train.py\n"
      "  results.json: '" +
      json::array({kSucceeded}).dump() + "'\n";

  for (const auto& text : {configMap.dump(2), yaml}) {
    const auto results = parseResults(text, "configmap");
    ASSERT_TRUE(results) << results.error();
    EXPECT_EQ(results->jobName, "gpt2-large");
    EXPECT_EQ(namesOf(*results), (std::vector<std::string>{"z1_gas1_tmbspg3"}));
    EXPECT_EQ(results->command, "deepspeed train.py\n");
  }
  const auto results = parseResults(configMap.dump(), "configmap");
  EXPECT_EQ(results->bestConfig, "{\"train_micro_batch_size_per_gpu\": 3}\n");
  EXPECT_EQ(results->summary, "| tuning_space |\n");
}

TEST(SearchResults, EveryBadFieldIsNamedWithItsFile) {
  json bad = kSucceeded;
  bad["outcome"] = "Finished";
  bad["durationSeconds"] = "long";
  json unknown = kOutOfMemory;
  unknown["gpus"] = "0-15";
  const json file = {{"job", "j"}, {"trials", {kSucceeded, bad, unknown}}};

  const auto results = parseResults(file.dump(), "run/results.json");

  ASSERT_FALSE(results);
  EXPECT_NE(results.error().find("run/results.json: trials[1].outcome: must be one of Succeeded"),
            std::string::npos)
      << results.error();
  EXPECT_NE(results.error().find("run/results.json: trials[1].durationSeconds: must be a number"),
            std::string::npos)
      << results.error();
  EXPECT_NE(results.error().find("run/results.json: trials[2].gpus: "), std::string::npos)
      << results.error();
}

TEST(SearchResults, WhatIsNoResultsSaysSo) {
  const auto notText = parseResults("trials: [", "broken.json");
  ASSERT_FALSE(notText);
  EXPECT_EQ(notText.error().rfind("broken.json: neither JSON nor YAML: ", 0), 0U)
      << notText.error();

  for (const std::string text : {"{\"kind\": \"Pod\"}", "42", "\"text\""}) {
    const auto other = parseResults(text, "other.json");
    ASSERT_FALSE(other) << text;
    EXPECT_NE(other.error().find("other.json: is none of a results.json"), std::string::npos);
  }

  const auto noResults = parseResults(R"({"kind": "ConfigMap", "data": {"cmd.txt": "x"}})", "cm");
  ASSERT_FALSE(noResults);
  EXPECT_EQ(noResults.error(),
            "cm: data.results.json: is missing; not the output ConfigMap of an AutotuneJob");

  const auto badList = parseResults(R"({"trials": {"name": "x"}})", "r.json");
  ASSERT_FALSE(badList);
  EXPECT_EQ(badList.error(), "r.json: trials: must be a list of trial records");

  const auto badEntry = parseResults(R"([1])", "r.json");
  ASSERT_FALSE(badEntry);
  EXPECT_EQ(badEntry.error(), "r.json: [0]: must be an object");
}

class ResultsDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("report-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "exps");
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const fs::path& relative, const std::string& content) const {
    std::ofstream(root_ / relative) << content;
  }

  fs::path root_;
};

TEST_F(ResultsDirectory, BringsTheFilesBesideResultsJsonAndTheGpusEachTrialHeld) {
  json first = kSucceeded;
  first["launchIndex"] = 0;
  write("results.json", json{{"job", "j"}, {"trials", {first}}}.dump());
  write("summary.txt", "| global |\n");
  write("ds_config_optimal.json", "{}\n");
  write("cmd_optimal.txt", "train.py\n");
  write("exps/z1_gas1_tmbspg3.json", R"({"name": "z1_gas1_tmbspg3", "gpus": "16-31"})");

  for (const auto& path : {root_, root_ / "results.json"}) {
    const auto results = loadResults(path);
    ASSERT_TRUE(results) << results.error();
    EXPECT_EQ(results->summary, "| global |\n");
    EXPECT_EQ(results->bestConfig, "{}\n");
    EXPECT_EQ(results->command, "train.py\n");
    ASSERT_EQ(results->trials.size(), 1U);
    EXPECT_EQ(results->trials[0].gpus, "16-31");
  }
}

TEST_F(ResultsDirectory, WithoutResultsJsonIsNoResultsDirectory) {
  const auto results = loadResults(root_);
  ASSERT_FALSE(results);
  EXPECT_EQ(results.error(),
            root_.string() + ": holds no results.json; not a results directory of autotune run");

  const auto missing = loadResults(root_ / "nothing.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error(), (root_ / "nothing.json").string() + ": cannot be read");
}

TEST(SearchResults, GpuListsAreCounted) {
  EXPECT_EQ(countGpus("0-15"), 16);
  EXPECT_EQ(countGpus("0,1,2"), 3);
  EXPECT_EQ(countGpus("0-3,8-11"), 8);
  EXPECT_EQ(countGpus("7"), 1);
  EXPECT_EQ(countGpus(""), 0);
  EXPECT_EQ(countGpus("3-1"), 0);
  EXPECT_EQ(countGpus("a-b"), 0);
  EXPECT_EQ(countGpus("0,,1"), 0);
}

}  // namespace
