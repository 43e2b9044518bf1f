#include "tuning/naming.h"

#include <gtest/gtest.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

namespace {

using autotune::tuning::acronym;
using autotune::tuning::dnsSafe;
using autotune::tuning::fastTrialName;
using autotune::tuning::fnv1aHex;
using autotune::tuning::formatValue;
using autotune::tuning::knobSpaceName;
using autotune::tuning::knobTrialName;
using autotune::tuning::KnobValue;
using autotune::tuning::labelValue;
using autotune::tuning::orderForNaming;
using autotune::tuning::orderForSpace;
using autotune::tuning::podName;
using autotune::tuning::trialLabel;
using nlohmann::json;

constexpr std::size_t kMaxLabelLength = 63;

// A DNS-1123 label: what Kubernetes accepts as a Pod name fragment or a label value.
bool isDnsLabel(const std::string& text) {
  static const std::regex kLabel("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  return text.size() <= kMaxLabelLength && std::regex_match(text, kLabel);
}

std::string zero(const std::string& key) { return "zero_optimization." + key; }

// The knobs in DeepSpeed's trial-name order for a stage, taking values from `values`.
std::vector<KnobValue> orderedKnobs(int stage, const std::vector<KnobValue>& values) {
  std::vector<std::string> paths;
  for (const auto& [path, value] : values) {
    paths.push_back(path);
  }
  std::vector<KnobValue> ordered;
  for (const auto& path : orderForNaming(stage, paths)) {
    for (const auto& knob : values) {
      if (knob.first == path) {
        ordered.push_back(knob);
      }
    }
  }
  return ordered;
}

std::string spaceName(int stage, const std::vector<std::string>& keys) {
  std::vector<std::string> paths;
  for (const auto& key : keys) {
    paths.push_back(zero(key));
  }
  return knobSpaceName(stage, orderForSpace(stage, paths));
}

// A long trial name: every ZeRO-3 knob of DeepSpeed's default space.
std::string longTrialName(int microBatch) {
  return knobTrialName(3,
                       orderedKnobs(3, {{zero("overlap_comm"), true},
                                        {zero("reduce_scatter"), false},
                                        {zero("reduce_bucket_size"), 5e8},
                                        {zero("allgather_partitions"), true},
                                        {zero("allgather_bucket_size"), 1e9},
                                        {zero("contiguous_gradients"), true}}),
                       1, microBatch, false);
}

TEST(Acronym, TakesTheFirstLetterOfEachWord) {
  EXPECT_EQ(acronym("reduce_bucket_size"), "rbs");
  EXPECT_EQ(acronym("allgather_bucket_size"), "abs");
  EXPECT_EQ(acronym("overlap_comm"), "oc");
  EXPECT_EQ(acronym("train_micro_batch_size_per_gpu"), "tmbspg");
  EXPECT_EQ(acronym("gradient_accumulation_steps"), "gas");
  EXPECT_EQ(acronym("loss_scale_window"), "lsw");
  EXPECT_EQ(acronym("stage"), "s");
}

TEST(FormatValue, NumbersOver9000AreInScientificNotation) {
  EXPECT_EQ(formatValue(json(5e7)), "5.0e+07");
  EXPECT_EQ(formatValue(json(1e9)), "1.0e+09");
  EXPECT_EQ(formatValue(json(500000000)), "5.0e+08");
}

TEST(FormatValue, NumbersUpTo9000AreSpelledAsPythonPrintsThem) {
  EXPECT_EQ(formatValue(json(9000)), "9000");
  EXPECT_EQ(formatValue(json(0.5)), "0.5");
  EXPECT_EQ(formatValue(json(1.0)), "1.0");
  EXPECT_EQ(formatValue(json(3)), "3");
}

TEST(FormatValue, BooleansAreTOrF) {
  EXPECT_EQ(formatValue(json(true)), "T");
  EXPECT_EQ(formatValue(json(false)), "F");
}

TEST(FastTrialName, PutsStageThenGradientAccumulationThenMicroBatch) {
  EXPECT_EQ(fastTrialName(1, 1, 3), "z1_gas1_tmbspg3");
  EXPECT_EQ(fastTrialName(3, 4, 16), "z3_gas4_tmbspg16");
}

TEST(KnobTrialName, MatchesDeepSpeedForZero2WithoutUserGradientAccumulation) {
  const auto knobs = orderedKnobs(2, {{zero("allgather_bucket_size"), 1e9},
                                      {zero("overlap_comm"), false},
                                      {zero("reduce_scatter"), false},
                                      {zero("reduce_bucket_size"), 1e9},
                                      {zero("contiguous_gradients"), false}});
  EXPECT_EQ(knobTrialName(2, knobs, 2, 11, false),
            "z2_abs1.0e+09_ocF_rsF_rbs1.0e+09_cgF_tmbspg11_gas2");
}

TEST(KnobTrialName, OrderDoesNotDependOnTheOrderKnobsAreGivenIn) {
  const auto knobs = orderedKnobs(2, {{zero("contiguous_gradients"), false},
                                      {zero("reduce_bucket_size"), 1e9},
                                      {zero("reduce_scatter"), false},
                                      {zero("overlap_comm"), false},
                                      {zero("allgather_bucket_size"), 1e9}});
  EXPECT_EQ(knobTrialName(2, knobs, 2, 11, false),
            "z2_abs1.0e+09_ocF_rsF_rbs1.0e+09_cgF_tmbspg11_gas2");
}

TEST(KnobTrialName, MatchesThePublishedDebertaName) {
  const auto knobs =
      orderedKnobs(1, {{zero("allgather_bucket_size"), 1e9}, {zero("reduce_bucket_size"), 5e7}});
  EXPECT_EQ(knobTrialName(1, knobs, 1, 11, true), "z1_rbs5.0e+07_abs1.0e+09_gas1_tmbspg11");
}

TEST(KnobSpaceName, MatchesDeepSpeedsDefaultSpaceNames) {
  EXPECT_EQ(spaceName(1, {"allgather_bucket_size", "reduce_bucket_size"}), "z1_rbs_abs_tmbspg");
  EXPECT_EQ(spaceName(2, {"allgather_bucket_size", "contiguous_gradients", "overlap_comm",
                          "reduce_bucket_size", "reduce_scatter"}),
            "z2_oc_rs_rbs_abs_cg_tmbspg");
  EXPECT_EQ(spaceName(3, {"allgather_bucket_size", "allgather_partitions", "contiguous_gradients",
                          "overlap_comm", "reduce_bucket_size", "reduce_scatter"}),
            "z3_oc_rs_rbs_ap_abs_cg_tmbspg");
}

TEST(OrderForNaming, PutsNonZeroKeysAfterZeroKeysAlphabetically) {
  const auto ordered = orderForNaming(1, {"optimizer.params.lr", zero("allgather_bucket_size"),
                                          "gradient_clipping", zero("reduce_bucket_size")});
  EXPECT_EQ(ordered,
            (std::vector<std::string>{zero("reduce_bucket_size"), zero("allgather_bucket_size"),
                                      "gradient_clipping", "optimizer.params.lr"}));
}

TEST(DnsSafe, LowersCaseAndReplacesSeparators) {
  EXPECT_EQ(dnsSafe("z1_gas1_tmbspg3"), "z1-gas1-tmbspg3");
  EXPECT_TRUE(
      std::regex_match(dnsSafe("z2_abs1.0e+09_ocF"), std::regex("z2-abs1-0e09-ocf-[0-9a-f]{10}")))
      << dnsSafe("z2_abs1.0e+09_ocF");
  EXPECT_TRUE(isDnsLabel(dnsSafe("z2_abs1.0e+09_ocF_rsF_rbs1.0e+09_cgF_tmbspg11_gas2")));
}

// Only lower-case letters, digits and '_' map one to one onto a DNS label; any other character
// could make two trials one Pod, so it brings a hash of the trial's own name.
TEST(DnsSafe, TrialsThatWouldShareALabelKeepDistinctOnes) {
  EXPECT_NE(dnsSafe("z1_np.a.b_tmbspg1"), dnsSafe("z1_np.a_b_tmbspg1"));
  EXPECT_NE(dnsSafe("z1_x-1_tmbspg1"), dnsSafe("z1_x_1_tmbspg1"));
  EXPECT_NE(dnsSafe("z1_dA_tmbspg1"), dnsSafe("z1_da_tmbspg1"));
  EXPECT_NE(podName("job", "z1_rbs5.0e+07_tmbspg1"), podName("job", "z1_rbs5.0e07_tmbspg1"));
  for (const char* trial : {"z1_np.a.b_tmbspg1", "z1_x-1_tmbspg1", "z1_dA_tmbspg1"}) {
    EXPECT_TRUE(isDnsLabel(podName("job", trial))) << podName("job", trial);
  }
}

TEST(PodName, AJobNameCutAtADotStillMakesAValidLabel) {
  const std::string job = std::string(51, 'a') + "." + std::string(20, 'b');
  const std::string name = podName(job, "z1_gas1_tmbspg3");
  EXPECT_TRUE(isDnsLabel(name)) << name;
}

TEST(PodName, ShortNamesStayReadable) {
  EXPECT_EQ(podName("gpt2-large", "z1_gas1_tmbspg3"), "gpt2-large-z1-gas1-tmbspg3");
  EXPECT_TRUE(isDnsLabel(podName("gpt2-large", "z1_gas1_tmbspg3")));
}

TEST(PodName, LongNamesAreCutToAValidLabelEndingInAHash) {
  const std::string job = "gpt2-large-finetune-sweep";
  const std::string trial = longTrialName(16);
  ASSERT_GT(job.size() + 1 + dnsSafe(trial).size(), kMaxLabelLength);

  const std::string name = podName(job, trial);
  EXPECT_TRUE(isDnsLabel(name)) << name;
  EXPECT_TRUE(name.starts_with(job + "-z3-")) << name;
  EXPECT_TRUE(std::regex_search(name, std::regex("-[0-9a-f]{10}$"))) << name;
}

TEST(PodName, LongNamesDifferingOnlyAtTheEndStayDistinct) {
  const std::string job = "gpt2-large-finetune-sweep";
  const std::string first = podName(job, longTrialName(16));
  const std::string second = podName(job, longTrialName(17));
  EXPECT_TRUE(isDnsLabel(first)) << first;
  EXPECT_TRUE(isDnsLabel(second)) << second;
  EXPECT_NE(first, second);
}

TEST(PodName, IsTheSameForTheSameTrial) {
  EXPECT_EQ(podName("job", longTrialName(16)), podName("job", longTrialName(16)));
}

TEST(TrialLabel, ShortNamesStayReadable) {
  EXPECT_EQ(trialLabel("z1_gas1_tmbspg3"), "z1-gas1-tmbspg3");
  EXPECT_EQ(trialLabel("profile_model_info"), "profile-model-info");
}

TEST(TrialLabel, LongNamesAreValidDistinctLabels) {
  const std::string stem = longTrialName(16) + "_with_a_much_longer_suffix_";
  const std::string first = trialLabel(stem + "a");
  const std::string second = trialLabel(stem + "b");
  EXPECT_TRUE(isDnsLabel(first)) << first;
  EXPECT_TRUE(isDnsLabel(second)) << second;
  EXPECT_NE(first, second);
}

TEST(LabelValue, AValidValueIsKeptAndAnyOtherTextBecomesADistinctValidOne) {
  EXPECT_EQ(labelValue("z2_oo+op"), "z2_ooop-" + fnv1aHex("z2_oo+op").substr(0, 10));
  EXPECT_EQ(labelValue("z1"), "z1");
  EXPECT_EQ(labelValue(""), "");
  // A space name as the engine builds it for offload knobs: '+' and ',' are not label characters.
  const std::string space = "z3_oo[cpu,nvme]_op[cpu]+" + longTrialName(4);
  const std::string value = labelValue(space);
  EXPECT_LE(value.size(), 63U);
  EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(value.front())));
  EXPECT_TRUE(
      value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                              "-_.") == std::string::npos)
      << value;
  EXPECT_NE(value, labelValue(space + "1"));
  EXPECT_EQ(labelValue("_-."), fnv1aHex("_-.").substr(0, 10));
}

// DeepSpeed spells 5.0e7 and 5.04e7 alike; two candidates must not share a trial name.
TEST(FormatValue, DistinctNumbersKeepDistinctSpellings) {
  EXPECT_EQ(formatValue(json(5.0e7)), "5.0e+07");
  EXPECT_EQ(formatValue(json(5.04e7)), "5.04e+07");
  EXPECT_EQ(formatValue(json(123456789)), "1.23456789e+08");
  EXPECT_NE(formatValue(json(5.0e7)), formatValue(json(5.00000001e7)));
}

TEST(FormatValue, StringsThatReadAsOtherValuesOrCarryPathsAreMadeDistinctAndSafe) {
  EXPECT_EQ(formatValue(json("cpu")), "cpu");
  EXPECT_NE(formatValue(json("5.0e+07")), formatValue(json(5e7)));
  EXPECT_NE(formatValue(json("T")), formatValue(json(true)));
  const std::string path = formatValue(json("/local_nvme"));
  EXPECT_EQ(path.find('/'), std::string::npos) << path;
  EXPECT_NE(path, formatValue(json("local_nvme")));
}

}  // namespace

// A string candidate is spelled as it is; a hundred-character one would make names that are no
// longer file names and that fill status.results.
TEST(KnobTrialName, LongNamesAreCutToDistinctNamesOf128Characters) {
  const std::string longPath(120, 'x');
  const std::vector<KnobValue> first = {{"zero_optimization.offload_optimizer.device", longPath}};
  const std::vector<KnobValue> second = {
      {"zero_optimization.offload_optimizer.device", longPath + "y"}};
  const std::string a = knobTrialName(2, first, 1, 4, true);
  const std::string b = knobTrialName(2, second, 1, 4, true);
  EXPECT_EQ(a.size(), 128U);
  EXPECT_EQ(b.size(), 128U);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.substr(0, 10), "z2_oo_dxxx");
  EXPECT_EQ(a[117], '~');

  const std::vector<std::string> paths(40, "zero_optimization.some_long_key_name");
  EXPECT_EQ(knobSpaceName(2, paths).size(), 128U);
}
