// The timeline as SVG: a row per trial in launch order, its bar from start to end, so that trials
// running side by side overlap and the waits between them show as gaps.

#include <algorithm>
#include <array>
#include <cstdio>

#include "report/chart.h"
#include "report/markup.h"
#include "report/render.h"

namespace autotune::report {
namespace {

using markup::element;
using markup::emptyElement;
using markup::number;
using markup::svgText;
using markup::textElement;

using markup::kFigureMargin;
using markup::kFigureWidth;
constexpr double kLabelWidth = 230;
constexpr double kGpuWidth = 110;
constexpr double kTop = 40;  // the time axis above the rows
constexpr double kBottom = 12;
// Rows stay labelled up to this many trials; past it they shrink to thin unlabelled bars (each
// keeps its tooltip), so a thousand trials stay one readable picture.
constexpr std::size_t kMaxLabelledRows = 200;
constexpr double kLabelledRow = 16;
constexpr double kCompactRow = 3;
constexpr std::size_t kMaxNameCharacters = 36;
constexpr double kSecondsPerMinute = 60;

constexpr std::string_view kTimelineStyle =
    "<style>"
    ".timeline text{font:11px system-ui,-apple-system,'Segoe UI',sans-serif;fill:#24292f}"
    ".timeline .tick{font-size:10px;fill:#57606a}"
    ".timeline .muted{fill:#57606a}"
    ".timeline .grid{stroke:#eaeef2}"
    ".timeline .succeeded{fill:#0969da}"
    ".timeline .oom{fill:#cf222e}"
    ".timeline .failed{fill:#6e7781}"
    ".timeline .timedout{fill:#bc4c00}"
    "</style>";

std::string_view markClass(Mark mark) {
  switch (mark) {
    case Mark::kSucceeded:
      return "succeeded";
    case Mark::kOOM:
      return "oom";
    case Mark::kFailed:
      return "failed";
    case Mark::kTimedOut:
      return "timedout";
  }
  return "failed";
}

// The unit the axis counts in, for a search of this length.
struct TimeUnit {
  double seconds = 1;
  std::string_view suffix = "s";
};

TimeUnit unitFor(double spanSeconds) {
  if (spanSeconds <= 2 * kSecondsPerMinute) {
    return {1, "s"};
  }
  if (spanSeconds <= 2 * kSecondsPerHour) {
    return {kSecondsPerMinute, "min"};
  }
  return {kSecondsPerHour, "h"};
}

std::string axis(const markup::Scale& time, double span, double bottom) {
  const TimeUnit unit = unitFor(span);
  const markup::Scale inUnit(0, span / unit.seconds, time.at(0), time.at(span));
  std::string out;
  for (const double tick : inUnit.ticks(8, false)) {
    const double x = inUnit.at(tick);
    out += emptyElement("line", {{"class", "grid"},
                                 {"x1", number(x)},
                                 {"y1", number(kTop - 6)},
                                 {"x2", number(x)},
                                 {"y2", number(bottom)}});
    out += svgText(x, kTop - 10, markup::tickLabel(tick) + " " + std::string(unit.suffix), "tick",
                   "middle");
  }
  out += svgText(kFigureMargin, kTop - 24, "time since the first trial started", "muted");
  return out;
}

std::string gpuText(const TimelineBar& bar) {
  if (!bar.gpus.empty()) {
    return "GPUs " + bar.gpus;
  }
  return bar.gpuCount > 0 ? std::to_string(bar.gpuCount) + " GPUs" : "";
}

std::string tooltip(const TimelineBar& bar, std::size_t index) {
  std::string tip = "#" + std::to_string(index + 1) + " " + bar.trial + ": " +
                    std::string(api::toString(bar.outcome)) + ", ";
  tip += bar.startKnown ? "started at " + markup::duration(bar.startSeconds) : "start not recorded";
  tip += ", ran " + markup::duration(bar.durationSeconds);
  if (const std::string gpus = gpuText(bar); !gpus.empty()) {
    tip += ", " + gpus;
  }
  return tip;
}

std::string row(const TimelineBar& bar, std::size_t index, const markup::Scale& time, double y,
                double height, bool labelled) {
  const double x = time.at(bar.startSeconds);
  const double width = std::max(1.5, time.at(bar.startSeconds + bar.durationSeconds) - x);
  std::string out = textElement("title", {}, tooltip(bar, index));
  out += emptyElement("rect", {{"class", std::string(markClass(markOf(bar.outcome)))},
                               {"x", number(x)},
                               {"y", number(y)},
                               {"width", number(width)},
                               {"height", number(height)}});
  if (labelled) {
    const double baseline = y + height - 2;
    out += svgText(kFigureMargin + kLabelWidth - 8, baseline,
                   markup::shortened(bar.trial, kMaxNameCharacters), "name", "end");
    out += svgText(kFigureWidth - kFigureMargin - kGpuWidth + 8, baseline, gpuText(bar), "muted");
  }
  return element("g", {{"class", "run"}, {"data-trial", bar.trial}}, out);
}

}  // namespace

std::string timelineSvg(const Timeline& timeline) {
  const bool labelled = timeline.bars.size() <= kMaxLabelledRows;
  const double rowHeight = labelled ? kLabelledRow : kCompactRow;
  const double height =
      kTop + rowHeight * static_cast<double>(std::max<std::size_t>(1, timeline.bars.size())) +
      kBottom;
  const double span = timeline.spanSeconds > 0 ? timeline.spanSeconds : 1;
  const markup::Scale time(0, span, kFigureMargin + kLabelWidth,
                           kFigureWidth - kFigureMargin - kGpuWidth);
  std::string out(kTimelineStyle);
  out += axis(time, span, height - kBottom);
  for (std::size_t i = 0; i < timeline.bars.size(); ++i) {
    const double y = kTop + rowHeight * static_cast<double>(i);
    out += row(timeline.bars[i], i, time, y + 1, rowHeight - (labelled ? 3 : 1), labelled);
  }
  return markup::figure("timeline", height, "Trials in launch order on a time axis", out);
}

}  // namespace autotune::report
