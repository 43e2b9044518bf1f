#pragma once
// The commands the autotune executable shares between its two names: `autotune` and
// `kubectl-autotune`, the kubectl plugin (a link to the same program). Both read their command
// lines with command_line.h, and take the same verbs with the same spellings where they share
// them: `plan [-f] FILE`, and report's `-o FORMAT` and `--output-file FILE`.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/job.h"
#include "command_line.h"
#include "report/report.h"
#include "report/search_results.h"

namespace autotune::cli {

// `plan [-f] FILE` (FILE may be -, standard input) of either program; `program` names it in the
// usage and errors ("autotune", "kubectl autotune"). 0, 1 when the plan cannot start, 2 when the
// file is no valid job or the command line is wrong.
int planVerb(const std::vector<std::string>& args, std::string_view program);

// Where and how a report is written: -o html|svg, --output-file FILE (default: standard output).
struct ReportOutput {
  report::Format format = report::Format::kHtml;
  std::string file = "-";
};
std::vector<Flag> reportOutputFlags(ReportOutput& output);

// The report to `output`. 0, or 1 when it cannot be written.
int writeReport(const report::SearchResults& results, const std::optional<api::AutotuneJob>& job,
                const ReportOutput& output);
// A report already drawn, to `output`'s file. 0, or 1 when it cannot be written.
int writeRendered(const std::string& rendered, const ReportOutput& output);

// kubectl-autotune's command line (the arguments after the program's name).
int kubectlPlugin(const std::vector<std::string>& args);

}  // namespace autotune::cli
