#pragma once
// Drawing the report's models: SVG for the chart and the timeline, and the HTML page that holds
// them with the summary, the best config and the command. Every text that comes from the results
// is escaped (markup.h); nothing the output holds fetches or runs anything.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/chart.h"
#include "report/search_results.h"
#include "report/timeline.h"

namespace autotune::report {

// One panel per stage on shared axes, with its legend; an <svg> element with its namespace, so
// that it stands alone as a file as well as inside a page. Its ids begin with `idPrefix`.
std::string chartSvg(const Chart& chart, std::string_view idPrefix = "");

// One row per trial in launch order, its bar from start to end, with the GPUs it held.
std::string timelineSvg(const Timeline& timeline);

// A search as drawn: its results, and the chart and the timeline built from them.
struct DrawnSearch {
  SearchResults results;
  Chart chart;
  Timeline timeline;
};

// One GPU model's part of a page of several: its search drawn, or why there is none.
struct ModelPart {
  std::string gpuModel;
  std::string searchJob;  // the AutotuneJob that searched it
  std::optional<DrawnSearch> search;
  std::string note;
};

// The whole page of one search.
std::string htmlPage(const DrawnSearch& search);

// The page of a job that tunes for several GPU models: a table of them, then each one's part.
std::string htmlModelsPage(std::string_view jobName, const std::vector<ModelPart>& models);

}  // namespace autotune::report
