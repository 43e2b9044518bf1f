#pragma once
// Drawing the report's models: SVG for the chart and the timeline, and the HTML page that holds
// them with the summary, the best config and the command. Every text that comes from the results
// is escaped (markup.h); nothing the output holds fetches or runs anything.

#include <string>

#include "report/chart.h"
#include "report/search_results.h"
#include "report/timeline.h"

namespace autotune::report {

// One panel per stage on shared axes, with its legend; an <svg> element with its namespace, so
// that it stands alone as a file as well as inside a page.
std::string chartSvg(const Chart& chart);

// One row per trial in launch order, its bar from start to end, with the GPUs it held.
std::string timelineSvg(const Timeline& timeline);

// The whole page.
std::string htmlPage(const SearchResults& results, const Chart& chart, const Timeline& timeline);

}  // namespace autotune::report
