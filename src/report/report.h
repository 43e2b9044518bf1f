#pragma once
// `autotune report`: a picture of a finished search. From its results (search_results.h) and,
// when known, the job that ran it, one self-contained HTML file (inline SVG and CSS, no script,
// nothing fetched) with the chart of every ZeRO stage's curve (chart.h), DeepSpeed's summary
// table, the best config and its command, and the trials on a time axis with the GPU-hours they
// cost (timeline.h); or the chart alone as SVG.

#include <optional>
#include <string>
#include <string_view>

#include "api/job.h"
#include "report/search_results.h"

namespace autotune::report {

enum class Format { kHtml, kSvg };

// "html" or "svg".
std::optional<Format> parseFormat(std::string_view name);

std::string renderReport(const SearchResults& results, const std::optional<api::AutotuneJob>& job,
                         Format format);

}  // namespace autotune::report
