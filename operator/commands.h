#pragma once
// The commands the autotune executable shares between its two names: `autotune` and
// `kubectl-autotune`, the kubectl plugin (a link to the same program).

#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "report/report.h"
#include "report/search_results.h"

namespace autotune::cli {

// `autotune plan FILE`: what the job would run. 0, or 2 when the file is no valid job.
int plan(const std::string& path);

// The report to `output` ("-": standard output). 0, or 1 when it cannot be written.
int writeReport(const report::SearchResults& results, const std::optional<api::AutotuneJob>& job,
                report::Format format, const std::string& output);

// kubectl-autotune's command line (the arguments after the program's name).
int kubectlPlugin(const std::vector<std::string>& args);

}  // namespace autotune::cli
