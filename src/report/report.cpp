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

namespace {

DrawnSearch drawn(const SearchResults& results, const std::optional<api::AutotuneJob>& job) {
  return {results, buildChart(results, job), buildTimeline(results, job)};
}

}  // namespace

std::string renderReport(const SearchResults& results, const std::optional<api::AutotuneJob>& job,
                         Format format) {
  if (format == Format::kSvg) {
    return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + chartSvg(buildChart(results, job)) +
           "\n";
  }
  return htmlPage(drawn(results, job));
}

std::string renderModelsReport(std::string_view jobName,
                               const std::vector<ModelSearchResults>& searches) {
  std::vector<ModelPart> models;
  models.reserve(searches.size());
  for (const auto& search : searches) {
    ModelPart& model = models.emplace_back();
    model.gpuModel = search.gpuModel;
    model.searchJob = search.searchJob;
    model.note = search.note;
    if (search.results) {
      model.search = drawn(*search.results, search.job);
    }
  }
  return htmlModelsPage(jobName, models);
}

}  // namespace autotune::report
