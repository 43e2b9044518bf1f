#pragma once
// `autotune report`: a picture of a finished search. From its results (search_results.h) and,
// when known, the job that ran it, one self-contained HTML file (inline SVG and CSS, no script,
// nothing fetched) with the chart of every ZeRO stage's curve (chart.h), DeepSpeed's summary
// table, the best config and its command, and the trials on a time axis with the GPU-hours they
// cost (timeline.h); or the chart alone as SVG.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "report/search_results.h"

namespace autotune::report {

enum class Format { kHtml, kSvg };

// "html" or "svg".
std::optional<Format> parseFormat(std::string_view name);

std::string renderReport(const SearchResults& results, const std::optional<api::AutotuneJob>& job,
                         Format format);

// One GPU model's search of a job that tunes for several: its results and the AutotuneJob that
// ran it, or why there are none.
struct ModelSearchResults {
  std::string gpuModel;
  std::string searchJob;
  std::optional<SearchResults> results;
  std::optional<api::AutotuneJob> job;
  std::string note;  // where there are no results
};

// The searches of the job `jobName`, one HTML page: a table of the models, then each one's part
// as renderReport draws a search.
std::string renderModelsReport(std::string_view jobName,
                               const std::vector<ModelSearchResults>& searches);

}  // namespace autotune::report
