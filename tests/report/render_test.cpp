#include "report/render.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "report/fixtures.h"
#include "report/report.h"
#include "support/published_oracle.h"
#include "support/text.h"

namespace {

using autotune::api::Outcome;
using autotune::report::buildChart;
using autotune::report::buildTimeline;
using autotune::report::chartSvg;
using autotune::report::Format;
using autotune::report::ModelSearchResults;
using autotune::report::parseFormat;
using autotune::report::renderModelsReport;
using autotune::report::renderReport;
using autotune::report::SearchResults;
using autotune::report::timelineSvg;
using autotune::report::fixtures::jobOf;
using autotune::report::fixtures::record;
using autotune::report::fixtures::resultsOf;
using autotune::report::fixtures::searchOf;
using autotune::report::fixtures::thousandTrials;
using autotune::testing::contains;
namespace oracle = autotune::oracle;

std::size_t count(std::string_view text, std::string_view part) {
  std::size_t found = 0;
  for (auto at = text.find(part); at != std::string_view::npos; at = text.find(part, at + 1)) {
    ++found;
  }
  return found;
}

// The published GPT2-large search, with the job that ran it.
std::string gpt2LargeChart() {
  const auto& model = oracle::publishedModels().front();
  const auto spec = oracle::specFor(model);
  const auto run = searchOf(spec, oracle::publishedOracle(model));
  return chartSvg(buildChart(resultsOf(run.records), jobOf(spec, "gpt2-large")));
}

TEST(Render, TheChartHasAPanelPerStageAndACurvePerStageThatRan) {
  const std::string svg = gpt2LargeChart();

  EXPECT_EQ(count(svg, "<g class=\"stage\""), 4U);
  for (const auto* stage : {"0", "1", "2"}) {
    EXPECT_TRUE(contains(svg, std::string("<polyline class=\"curve\" data-stage=\"") + stage))
        << "ZeRO-" << stage;
  }
  EXPECT_EQ(count(svg, "<polyline class=\"curve\""), 3U) << "no trial of ZeRO-3 had a value";
  EXPECT_EQ(count(svg, "<g class=\"memory-model\""), 4U) << "the memory model's line on each stage";
  EXPECT_TRUE(contains(svg, ">model: \xE2\x89\xA4 2</text>")) << "ZeRO-0's expected largest";
  EXPECT_TRUE(std::regex_search(svg, std::regex(">best z1_gas1_tmbspg3 \xC2\xB7 87\\.[0-9]+ "
                                                "\xC2\xB7 1\\.[0-9]+\xC3\x97 the baseline<")))
      << "the best trial labelled with its speedup";
  EXPECT_TRUE(contains(svg, ">baseline z0_gas1_tmbspg2 \xC2\xB7 "));
  EXPECT_TRUE(contains(svg, "class=\"mark oom\"")) << "the OOM boundary is drawn";
}

TEST(Render, ASingleTrialIsOnePanelAcrossTheWidth) {
  const auto chart = buildChart(
      resultsOf({record("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.1)}, "one"), std::nullopt);
  const std::string svg = chartSvg(chart);

  EXPECT_EQ(count(svg, "<g class=\"stage\""), 1U);
  EXPECT_EQ(count(svg, "<polyline class=\"curve\""), 1U);
  EXPECT_TRUE(contains(svg, ">best and baseline z1_gas1_tmbspg3 \xC2\xB7 87.1<"));
  EXPECT_FALSE(contains(svg, "the baseline<")) << "no speedup over itself";
}

TEST(Render, AThousandTrialsStayOneReadablePage) {
  const SearchResults results = resultsOf(thousandTrials(), "thousand");
  const std::string page = renderReport(results, std::nullopt, Format::kHtml);

  EXPECT_EQ(count(page, "<g class=\"stage\""), 10U);
  EXPECT_EQ(count(page, "<polyline class=\"curve\""), 10U);
  EXPECT_EQ(count(page, "<g class=\"trial\""), 1000U) << "every trial a point";
  EXPECT_EQ(count(page, "<g class=\"run\""), 1000U) << "every trial a bar";
  EXPECT_LT(page.size(), 2'000'000U);
  // Past 200 trials the timeline's rows are thin and unlabelled: 3 pixels each.
  const std::string timeline = timelineSvg(buildTimeline(results, std::nullopt));
  EXPECT_TRUE(contains(timeline, "viewBox=\"0 0 960 3052\"")) << timeline.substr(0, 300);
  EXPECT_FALSE(contains(timeline, "class=\"name\""));
}

TEST(Render, TextFromTheResultsIsShownAndNeverRun) {
  auto crashed = record("z1_gas1_tmbspg4", Outcome::kFailed);
  crashed.reason = "Traceback\n<script>document.title='pwned'</script>";
  auto named = record("z1_gas1_tmbspg2\"><script>alert(1)</script>", Outcome::kSucceeded, 50);
  SearchResults results = resultsOf({named, crashed}, "<img src=x onerror=alert(1)>");
  results.summary = "</pre><script>alert(2)</script>";
  results.bestConfig = "{\"x\": \"<iframe src=//example.org>\"}";
  results.command = "train.py --name '<b>bold</b>'";
  results.trials[0].gpus = "<svg onload=alert(3)>";

  for (const auto format : {Format::kHtml, Format::kSvg}) {
    const std::string output = renderReport(results, std::nullopt, format);
    EXPECT_FALSE(contains(output, "<script")) << output;
    EXPECT_FALSE(contains(output, "<img"));
    EXPECT_FALSE(contains(output, "<iframe"));
    EXPECT_FALSE(contains(output, "<b>bold"));
    EXPECT_FALSE(contains(output, "<svg onload"));
    EXPECT_TRUE(contains(output, "&lt;img src=x onerror=alert(1)&gt;")) << "the job's name";
  }
  const std::string page = renderReport(results, std::nullopt, Format::kHtml);
  EXPECT_TRUE(contains(page, "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"))
      << "the reason, as text";
  EXPECT_TRUE(contains(page, "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;"));
}

TEST(Render, AReusedTrialSaysWhereItCameFromAndWhatItSaved) {
  auto measured = record("z0_gas1_tmbspg2", Outcome::kSucceeded, 59);
  measured.durationSeconds = 1800;
  auto reused = record("z1_gas1_tmbspg3", Outcome::kOOM);
  reused.durationSeconds = 3600;
  reused.reusedFrom = "autotune-m-0123abcd";
  SearchResults results = resultsOf({measured, reused});
  results.trials[0].gpus = "0-15";
  results.trials[1].gpus = "0-15";
  const std::string page = renderReport(results, std::nullopt, Format::kHtml);
  EXPECT_TRUE(contains(page, "reused from ConfigMap autotune-m-0123abcd")) << page;
  EXPECT_TRUE(contains(page,
                       "8 GPU-hours \u00b7 1 reused from earlier measurements, saving 16 "
                       "GPU-hours"))
      << page;
}

TEST(Render, ThePageFetchesNothingAndRunsNothing) {
  const std::string page = renderReport(resultsOf(thousandTrials()), std::nullopt, Format::kHtml);

  EXPECT_EQ(page.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0U);
  EXPECT_FALSE(contains(page, "<script"));
  EXPECT_FALSE(contains(page, " src="));
  EXPECT_FALSE(contains(page, " href="));
  EXPECT_FALSE(contains(page, "url(http"));
  EXPECT_FALSE(contains(page, "@import"));
}

// A job that tunes for several GPU models is one page: a table of the models, then each model's
// search as a page of one search draws it, its ids its own, and a model with no search to draw
// says why.
TEST(Render, AJobOfSeveralGpuModelsIsOnePageWithAPartPerModel) {
  std::vector<ModelSearchResults> models(3);
  models[0].gpuModel = "NVIDIA-A100-SXM4-40GB";
  models[0].searchJob = "train-nvidia-a100-sxm4-40gb";
  models[0].results = resultsOf({record("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.1),
                                 record("z1_gas1_tmbspg4", Outcome::kOOM)});
  models[1].gpuModel = "NVIDIA-H100-80GB-HBM3";
  models[1].searchJob = "train-nvidia-h100-80gb-hbm3";
  models[1].results = resultsOf({record("z1_gas1_tmbspg8", Outcome::kSucceeded, 120)});
  models[2].gpuModel = "L40S<script>alert(1)</script>";
  models[2].searchJob = "train-l40s";
  models[2].note = "Failed: AutotuneJob train-l40s exists and is not this job's";
  const std::string page = renderModelsReport("train", models);

  EXPECT_EQ(page.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0), 0U);
  EXPECT_EQ(count(page, "<!DOCTYPE"), 1U);
  EXPECT_TRUE(contains(page, "<title>Autotune report: train, per GPU model</title>"));
  for (const auto* heading :
       {"GPU model NVIDIA-A100-SXM4-40GB", "GPU model NVIDIA-H100-80GB-HBM3"}) {
    EXPECT_EQ(count(page, std::string("<h1>") + heading + "</h1>"), 1U) << heading;
  }
  EXPECT_EQ(count(page, "<svg xmlns="), 4U) << "a chart and a timeline for each searched model";
  EXPECT_TRUE(contains(page, "<b>z1_gas1_tmbspg3</b>"));
  EXPECT_TRUE(contains(page, "<b>z1_gas1_tmbspg8</b>"));
  EXPECT_TRUE(contains(page, "is not this job&#39;s")) << "why the third has no search";
  EXPECT_FALSE(contains(page, "<script"));

  std::set<std::string> ids;
  const std::regex id(" id=\"([^\"]*)\"");
  for (auto at = std::sregex_iterator(page.begin(), page.end(), id); at != std::sregex_iterator();
       ++at) {
    EXPECT_TRUE(ids.insert((*at)[1]).second) << "id " << (*at)[1] << " twice";
  }
  EXPECT_TRUE(ids.contains("model-1-chart"));
  const std::regex link(" href=\"([^\"]*)\"");
  int links = 0;
  for (auto at = std::sregex_iterator(page.begin(), page.end(), link); at != std::sregex_iterator();
       ++at, ++links) {
    EXPECT_TRUE(ids.contains(std::string((*at)[1]).substr(1))) << "a link within the page";
  }
  EXPECT_EQ(links, 3);
}

TEST(Render, TheSvgFormatIsTheChartAloneAsADocument) {
  const SearchResults results = resultsOf({record("z1_gas1_tmbspg3", Outcome::kSucceeded, 87.1)});
  const std::string svg = renderReport(results, std::nullopt, Format::kSvg);

  EXPECT_EQ(svg.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=", 0), 0U);
  EXPECT_EQ(count(svg, "<svg"), 1U) << "no timeline";
  EXPECT_FALSE(contains(svg, "<html"));
  EXPECT_EQ(parseFormat("svg"), Format::kSvg);
  EXPECT_EQ(parseFormat("html"), Format::kHtml);
  EXPECT_FALSE(parseFormat("png"));
}

}  // namespace
