#include "report/chart_style.h"

namespace autotune::report {
namespace {

constexpr std::string_view kStyleBeforePruned =
    "<style>"
    ".chart text{font:12px system-ui,-apple-system,'Segoe UI',sans-serif;fill:#24292f}"
    ".chart .title{font-size:15px;font-weight:600}"
    ".chart .muted{fill:#57606a}"
    ".chart .tick{font-size:10px;fill:#57606a}"
    ".chart .plot{fill:#fff;stroke:#d0d7de}"
    ".chart .grid{stroke:#eaeef2}"
    ".chart .strip{fill:#f6f8fa;stroke:#d0d7de}"
    ".chart .curve{fill:none;stroke:#0969da;stroke-width:1.6}"
    ".chart .succeeded{fill:#0969da}"
    ".chart .oom{fill:none;stroke:#cf222e;stroke-width:2}"
    ".chart .failed{fill:#6e7781}"
    ".chart .timedout{fill:none;stroke:#bc4c00;stroke-width:1.6}"
    ".chart .memory{stroke:#8250df;stroke-width:1.4;stroke-dasharray:5 3}"
    ".chart text.memory-label{fill:#8250df;font-size:10px}";

constexpr std::string_view kStyleAfterPruned =
    ".chart text.pruned-label{fill:#57606a;font-size:10px}"
    ".chart .best-ring{fill:none;stroke:#bf8700;stroke-width:2.2}"
    ".chart .baseline-ring{fill:none;stroke:#57606a;stroke-width:1.5;stroke-dasharray:3 2}"
    ".chart text.callout{font-size:11px;font-weight:600}"
    ".chart text.gas{font-size:9px;fill:#57606a}"
    "</style>";

constexpr std::string_view kPatternAfterItsId =
    R"svg(" width="6" height="6" patternUnits="userSpaceOnUse")svg"
    R"svg( patternTransform="rotate(45)"><rect width="6" height="6" fill="#f6f8fa"/>)svg"
    R"svg(<line x1="0" y1="0" x2="0" y2="6" stroke="#d0d7de" stroke-width="2"/></pattern>)svg"
    "</defs>";

}  // namespace

std::string chartStyle(std::string_view idPrefix) {
  const std::string patternId = std::string(idPrefix) + "autotune-pruned";
  return std::string(kStyleBeforePruned) + ".chart .pruned{fill:url(#" + patternId + ")}" +
         std::string(kStyleAfterPruned) + "<defs><pattern id=\"" + patternId +
         std::string(kPatternAfterItsId);
}

}  // namespace autotune::report
