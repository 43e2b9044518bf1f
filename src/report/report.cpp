#include "report/report.h"

#include "report/chart.h"
#include "report/render.h"
#include "report/timeline.h"

namespace autotune::report {

std::optional<Format> parseFormat(std::string_view name) {
  if (name == "html") {
    return Format::kHtml;
  }
  if (name == "svg") {
    return Format::kSvg;
  }
  return std::nullopt;
}

std::string renderReport(const SearchResults& results, const std::optional<api::AutotuneJob>& job,
                         Format format) {
  const Chart chart = buildChart(results, job);
  if (format == Format::kSvg) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + chartSvg(chart) + "\n";
  }
  return htmlPage(results, chart, buildTimeline(results, job));
}

}  // namespace autotune::report
