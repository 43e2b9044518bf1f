// The chart as SVG: small multiples, one panel per ZeRO stage on shared axes, so that the stages
// compare by height and position however many there are (one trial or ten stages of a hundred).

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>

#include "report/chart_style.h"
#include "report/markup.h"
#include "report/render.h"
#include "tuning/results.h"

namespace autotune::report {
namespace {

using markup::element;
using markup::emptyElement;
using markup::number;
using markup::Scale;
using markup::svgText;
using markup::textElement;

using markup::kFigureMargin;
using markup::kFigureWidth;
constexpr double kColumnGap = 28;
constexpr double kHeaderHeight = 62;  // the title and the legend
constexpr double kPanelTitle = 24;
constexpr double kPlotHeight = 170;
constexpr double kStripHeight = 22;  // the trials that ran without a value
constexpr double kAxisHeight = 36;   // tick labels and the axis name
constexpr double kPanelGap = 18;
constexpr double kPlotLeft = 56;  // room for the value ticks
constexpr double kPlotRight = 10;
constexpr double kFootnoteHeight = 20;
// Past this ratio of the largest micro-batch to the smallest, the axis is logarithmic.
constexpr double kLogAxisRatio = 48;
// Room above the best value for its label.
constexpr double kHeadroom = 1.15;
constexpr std::size_t kMaxLabelCharacters = 90;
constexpr std::size_t kMaxTooltipCharacters = 300;
constexpr std::size_t kMaxGasLabels = 12;  // gradient accumulation labels per panel, at most
constexpr std::size_t kMaxUnplacedNamed = 6;

struct Layout {
  int columns = 1;
  int rows = 0;
  double panelWidth = 0;
  double panelHeight = kPanelTitle + kPlotHeight + kStripHeight + kAxisHeight;
  double height = 0;
};

Layout layoutOf(const Chart& chart) {
  Layout layout;
  const auto panels = static_cast<int>(chart.stages.size());
  layout.columns = panels > 1 ? 2 : 1;
  layout.rows = std::max(1, (panels + layout.columns - 1) / layout.columns);
  layout.panelWidth =
      (kFigureWidth - 2 * kFigureMargin - (layout.columns - 1) * kColumnGap) / layout.columns;
  layout.height = kHeaderHeight + layout.rows * (layout.panelHeight + kPanelGap) +
                  (chart.unplaced.empty() ? 0 : kFootnoteHeight) + kFigureMargin;
  return layout;
}

// Panel coordinates: the plot spans these, the strip of trials without a value lies below it.
constexpr double kPlotTop = kPanelTitle;
constexpr double kPlotBottom = kPanelTitle + kPlotHeight;
constexpr double kStripMiddle = kPlotBottom + kStripHeight / 2;

struct Axes {
  Scale x;
  Scale y;
};

// Every micro-batch the chart shows: trials, the memory model's line and pruned ranges.
std::pair<double, double> microBatchSpan(const Chart& chart) {
  std::set<int> shown;
  for (const auto& stage : chart.stages) {
    for (const auto& point : stage.points) {
      shown.insert(point.at.microBatch);
    }
    if (stage.expectedLargest && *stage.expectedLargest > 0) {
      shown.insert(*stage.expectedLargest);
    }
    for (const auto& range : stage.pruned) {
      shown.insert(range.from);
      shown.insert(range.to);
    }
  }
  if (shown.empty()) {
    return {1, 1};
  }
  return {*shown.begin(), *shown.rbegin()};
}

Axes axesOf(const Chart& chart, const Layout& layout) {
  const auto [low, high] = microBatchSpan(chart);
  const double right = layout.panelWidth - kPlotRight;
  const bool logarithmic = high / low > kLogAxisRatio;
  const double pad = std::max(1.0, 0.05 * (high - low));
  Scale x = logarithmic ? Scale(low / 1.25, high * 1.25, kPlotLeft, right, true)
                        : Scale(std::max(0.5, low - pad), high + pad, kPlotLeft, right);
  double largest = 0;
  for (const auto& stage : chart.stages) {
    for (const auto& point : stage.points) {
      largest = std::max(largest, point.value.value_or(0));
    }
  }
  const double top = largest > 0 ? largest * kHeadroom : 1;
  return {x, Scale(0, top, kPlotBottom, kPlotTop)};
}

std::string line(double x1, double y1, double x2, double y2, std::string_view classes) {
  return emptyElement("line", {{"class", std::string(classes)},
                               {"x1", number(x1)},
                               {"y1", number(y1)},
                               {"x2", number(x2)},
                               {"y2", number(y2)}});
}

std::string rect(double x, double y, double width, double height, std::string_view classes) {
  return emptyElement("rect", {{"class", std::string(classes)},
                               {"x", number(x)},
                               {"y", number(y)},
                               {"width", number(std::max(0.0, width))},
                               {"height", number(std::max(0.0, height))}});
}

std::string circle(double x, double y, double radius, std::string_view classes) {
  return emptyElement("circle", {{"class", std::string(classes)},
                                 {"cx", number(x)},
                                 {"cy", number(y)},
                                 {"r", number(radius)}});
}

// A group whose tooltip is `title`.
std::string titled(const markup::Attributes& attributes, std::string_view title,
                   std::string_view content) {
  return element("g", attributes, textElement("title", {}, title) + std::string(content));
}

std::string markShape(Mark mark, double x, double y) {
  const auto at = [&](double dx, double dy) { return number(x + dx) + " " + number(y + dy); };
  switch (mark) {
    case Mark::kSucceeded:
      return circle(x, y, 3.5, "mark succeeded");
    case Mark::kOOM:
      return emptyElement("path", {{"class", "mark oom"},
                                   {"d", "M" + at(-4, -4) + " L" + at(4, 4) + " M" + at(-4, 4) +
                                             " L" + at(4, -4)}});
    case Mark::kFailed:
      return emptyElement(
          "path", {{"class", "mark failed"},
                   {"d", "M" + at(0, -4.5) + " L" + at(4.5, 3.5) + " L" + at(-4.5, 3.5) + " Z"}});
    case Mark::kTimedOut:
      return rect(x - 3.5, y - 3.5, 7, 7, "mark timedout");
  }
  return "";
}

std::string legendEntry(Mark mark, std::string_view label, double& x) {
  std::string out = markShape(mark, x + 5, -4) + svgText(x + 14, 0, label);
  x += 30 + 6.5 * static_cast<double>(label.size());
  return out;
}

std::string legend(const Chart& chart) {
  std::string out;
  double x = 0;
  out += line(x, -4, x + 18, -4, "curve") + svgText(x + 24, 0, "best value per micro-batch");
  x += 24 + 6.5 * 27;
  out += legendEntry(Mark::kSucceeded, "Succeeded", x);
  out += legendEntry(Mark::kOOM, "OOM", x);
  out += legendEntry(Mark::kFailed, "Failed", x);
  out += legendEntry(Mark::kTimedOut, "TimedOut", x);
  if (chart.memoryModelKnown) {
    out += line(x, -11, x, 3, "memory") + svgText(x + 8, 0, "memory model: largest expected");
    x += 8 + 6.5 * 31;
  }
  const bool anyPruned = std::any_of(chart.stages.begin(), chart.stages.end(),
                                     [](const StageCurve& stage) { return !stage.pruned.empty(); });
  if (anyPruned) {
    out += rect(x, -11, 14, 14, "pruned") + svgText(x + 20, 0, "pruned without running");
  }
  return element(
      "g", {{"class", "legend"}, {"transform", "translate(" + number(kFigureMargin) + " 48)"}},
      out);
}

std::string valueAxis(const Axes& axes, double plotRight) {
  std::string out;
  for (const double tick : axes.y.ticks(5, false)) {
    const double y = axes.y.at(tick);
    out += line(kPlotLeft, y, plotRight, y, "grid");
    out += svgText(kPlotLeft - 6, y + 3.5, markup::tickLabel(tick), "tick", "end");
  }
  return out;
}

std::string microBatchAxis(const Axes& axes, double plotRight) {
  std::string out;
  const double labelY = kPlotBottom + kStripHeight + 13;
  for (const double tick : axes.x.ticks(10, true)) {
    const double x = axes.x.at(tick);
    out += line(x, kPlotBottom + kStripHeight, x, kPlotBottom + kStripHeight + 4, "grid");
    out += svgText(x, labelY, markup::tickLabel(tick), "tick", "middle");
  }
  out += svgText((kPlotLeft + plotRight) / 2, labelY + 15,
                 std::string("micro-batch per GPU") + (axes.x.logarithmic() ? " (log scale)" : ""),
                 "muted", "middle");
  return out;
}

// A micro-batch range as the band it covers: from halfway to its lower neighbour to halfway to
// its upper one.
std::pair<double, double> band(const Axes& axes, const MicroBatchRange& range) {
  if (axes.x.logarithmic()) {
    return {axes.x.at(range.from / std::sqrt(2.0)), axes.x.at(range.to * std::sqrt(2.0))};
  }
  return {axes.x.at(range.from - 0.5), axes.x.at(range.to + 0.5)};
}

std::string prunedShading(const StageCurve& stage, const Axes& axes, double plotRight) {
  const std::string reason = markup::shortened(stage.prunedReason, kMaxTooltipCharacters);
  if (stage.wholeStagePruned) {
    const double middle = (kPlotLeft + plotRight) / 2;
    const auto fits = static_cast<std::size_t>((plotRight - kPlotLeft) / 6.0);
    return titled({{"class", "pruned-stage"}}, "Pruned without running: " + reason,
                  rect(kPlotLeft, kPlotTop, plotRight - kPlotLeft, kPlotHeight, "pruned") +
                      svgText(middle, (kPlotTop + kPlotBottom) / 2, "pruned without running",
                              "muted", "middle") +
                      svgText(middle, (kPlotTop + kPlotBottom) / 2 + 16,
                              markup::shortened(stage.prunedReason, fits), "tick", "middle"));
  }
  std::string out;
  for (const auto& range : stage.pruned) {
    const auto [from, to] = band(axes, range);
    std::string shading = rect(from, kPlotTop, to - from, kPlotHeight, "pruned");
    if (to - from > 40) {
      shading += svgText((from + to) / 2, (kPlotTop + kPlotBottom) / 2, "pruned", "pruned-label",
                         "middle");
    }
    out += titled({{"class", "pruned-range"}},
                  "Pruned without running: micro-batch " + std::to_string(range.from) +
                      (range.to != range.from ? " to " + std::to_string(range.to) : "") + ": " +
                      reason,
                  shading);
  }
  return out;
}

// Between the largest micro-batch expected to fit and the next: what fits lies to its left.
std::string memoryLine(const StageCurve& stage, const Axes& axes) {
  if (!stage.expectedLargest || *stage.expectedLargest <= 0) {
    return "";
  }
  const int largest = *stage.expectedLargest;
  const double x =
      axes.x.logarithmic() ? axes.x.at(largest * std::sqrt(2.0)) : axes.x.at(largest + 0.5);
  return titled(
      {{"class", "memory-model"}},
      "The memory model expects micro-batches up to " + std::to_string(largest) + " to fit",
      line(x, kPlotTop, x, kPlotBottom + kStripHeight, "memory") +
          svgText(x - 4, kPlotBottom - 6, "model: \u2264 " + std::to_string(largest),
                  "memory-label", "end"));
}

std::string curveLine(const StageCurve& stage, const Axes& axes) {
  if (stage.curve.empty()) {
    return "";
  }
  std::string points;
  for (const auto& point : stage.curve) {
    points += (points.empty() ? "" : " ") + number(axes.x.at(point.microBatch)) + "," +
              number(axes.y.at(point.value));
  }
  return emptyElement(
      "polyline",
      {{"class", "curve"}, {"data-stage", std::to_string(stage.stage)}, {"points", points}});
}

std::string tooltip(const ChartPoint& point, api::Metric metric) {
  std::string tip = point.trial + " (micro-batch " + std::to_string(point.at.microBatch) +
                    ", gradient accumulation " + std::to_string(point.at.gradientAccumulation) +
                    "): " + std::string(api::toString(point.outcome));
  if (point.value) {
    tip +=
        ", " + std::string(api::toString(metric)) + " " + tuning::formatMetricValue(*point.value);
  }
  if (!point.reason.empty() && point.outcome != api::Outcome::kSucceeded) {
    tip += ": " + markup::lastLine(point.reason);
  }
  return markup::shortened(tip, kMaxTooltipCharacters);
}

double yOf(const ChartPoint& point, const Axes& axes) {
  return point.value ? axes.y.at(*point.value) : kStripMiddle;
}

std::string marks(const StageCurve& stage, const Axes& axes, api::Metric metric) {
  std::string out;
  const bool labelGas = stage.gradientAccumulationVaries && stage.points.size() <= kMaxGasLabels;
  for (const auto& point : stage.points) {
    const double x = axes.x.at(point.at.microBatch);
    const double y = yOf(point, axes);
    std::string shapes = markShape(markOf(point.outcome), x, y);
    if (labelGas) {
      shapes += svgText(x, y + 13, "gas " + std::to_string(point.at.gradientAccumulation), "gas",
                        "middle");
    }
    out +=
        titled({{"class", "trial"}, {"data-trial", point.trial}}, tooltip(point, metric), shapes);
  }
  return out;
}

// Where a label of `characters` starts so that it stays inside the plot, centred on `x` where
// it can be. Its width is estimated: the page's font is not known here.
double labelStart(double x, std::size_t characters, double plotRight) {
  constexpr double kCharacterWidth = 6.6;  // 11px semibold, on average
  const double width = kCharacterWidth * static_cast<double>(characters);
  return std::clamp(x - width / 2, kPlotLeft + 2, std::max(kPlotLeft + 2, plotRight - 2 - width));
}

std::size_t characterCount(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;  // not a UTF-8 continuation byte
  }));
}

std::string callout(const Callout& callout, const Axes& axes, double plotRight,
                    std::string_view ring, std::string_view label, bool above) {
  const double x = axes.x.at(callout.at->microBatch);
  const double y = axes.y.at(callout.value);
  const std::string shown = markup::shortened(label, kMaxLabelCharacters);
  const double labelY = above ? std::max(kPlotTop + 11, y - 11) : std::min(kPlotBottom - 4, y + 19);
  return circle(x, y, 7, ring) +
         svgText(labelStart(x, characterCount(shown), plotRight), labelY, shown, "callout");
}

std::string speedupText(const Chart& chart) {
  if (!chart.speedup) {
    return "";
  }
  std::array<char, 32> ratio{};
  std::snprintf(ratio.data(), ratio.size(), "%.2f", *chart.speedup);
  return std::string(" \u00b7 ") + ratio.data() + "\u00d7 the baseline";
}

std::string callouts(const StageCurve& stage, const Chart& chart, const Axes& axes,
                     double plotRight) {
  const auto onStage = [&](const std::optional<Callout>& c) {
    return c && c->at && c->at->stage == stage.stage;
  };
  std::string out;
  const bool same = chart.best && chart.baseline && chart.best->trial == chart.baseline->trial;
  if (onStage(chart.baseline) && !same) {
    out += callout(*chart.baseline, axes, plotRight, "baseline-ring",
                   "baseline " + chart.baseline->trial + " \u00b7 " +
                       tuning::formatMetricValue(chart.baseline->value),
                   false);
  }
  if (onStage(chart.best)) {
    out += callout(*chart.best, axes, plotRight, "best-ring",
                   std::string(same ? "best and baseline " : "best ") + chart.best->trial +
                       " \u00b7 " + tuning::formatMetricValue(chart.best->value) +
                       (same ? "" : speedupText(chart)),
                   true);
  }
  return out;
}

std::string panelTitle(const StageCurve& stage, const Chart& chart) {
  std::string detail =
      std::to_string(stage.points.size()) + (stage.points.size() == 1 ? " trial" : " trials");
  std::optional<double> best;
  for (const auto& point : stage.curve) {
    if (!best || (api::higherIsBetter(chart.metric) ? point.value > *best : point.value < *best)) {
      best = point.value;
    }
  }
  if (best) {
    detail += " \u00b7 best " + tuning::formatMetricValue(*best);
  } else if (stage.wholeStagePruned) {
    detail += " \u00b7 pruned";
  } else if (!stage.points.empty()) {
    detail += " \u00b7 none succeeded";
  }
  return element(
      "text", {{"x", number(kPlotLeft)}, {"y", "15"}},
      textElement("tspan", {{"font-weight", "600"}}, "ZeRO-" + std::to_string(stage.stage)) +
          textElement("tspan", {{"class", "muted"}}, " " + detail));
}

std::string panel(const StageCurve& stage, const Chart& chart, const Axes& axes,
                  const Layout& layout, double left, double top) {
  const double plotRight = layout.panelWidth - kPlotRight;
  std::string out = panelTitle(stage, chart);
  out += rect(kPlotLeft, kPlotTop, plotRight - kPlotLeft, kPlotHeight, "plot");
  out += rect(kPlotLeft, kPlotBottom, plotRight - kPlotLeft, kStripHeight, "strip");
  out += svgText(kPlotLeft - 6, kStripMiddle + 3.5, "no value", "tick", "end");
  out += valueAxis(axes, plotRight);
  out += prunedShading(stage, axes, plotRight);
  out += memoryLine(stage, axes);
  out += curveLine(stage, axes);
  out += marks(stage, axes, chart.metric);
  out += callouts(stage, chart, axes, plotRight);
  out += microBatchAxis(axes, plotRight);
  return element("g",
                 {{"class", "stage"},
                  {"data-stage", std::to_string(stage.stage)},
                  {"transform", "translate(" + number(left) + " " + number(top) + ")"}},
                 out);
}

std::string heading(const Chart& chart) {
  const std::string metric(api::toString(chart.metric));
  const std::string direction =
      api::higherIsBetter(chart.metric) ? "higher is better" : "lower is better";
  const std::string name = chart.title.empty() ? "" : chart.title + ": ";
  return svgText(kFigureMargin, 22,
                 markup::shortened(name, kMaxLabelCharacters) + metric +
                     " against micro-batch per GPU, by ZeRO stage (" + direction + ")",
                 "title");
}

std::string footnote(const Chart& chart, double y) {
  if (chart.unplaced.empty()) {
    return "";
  }
  std::string names;
  for (std::size_t i = 0; i < std::min(chart.unplaced.size(), kMaxUnplacedNamed); ++i) {
    names += (i == 0 ? "" : ", ") + chart.unplaced[i];
  }
  if (chart.unplaced.size() > kMaxUnplacedNamed) {
    names += " and " + std::to_string(chart.unplaced.size() - kMaxUnplacedNamed) + " more";
  }
  return svgText(kFigureMargin, y,
                 markup::shortened("Not on the chart (no micro-batch in the name): " + names, 150),
                 "muted");
}

}  // namespace

std::string chartSvg(const Chart& chart, std::string_view idPrefix) {
  const Layout layout = layoutOf(chart);
  const Axes axes = axesOf(chart, layout);
  std::string out = chartStyle(idPrefix);
  out += emptyElement("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "#ffffff"}});
  out += heading(chart);
  out += legend(chart);
  if (chart.stages.empty()) {
    out +=
        svgText(kFigureMargin, kHeaderHeight + 24, "No trial of a ZeRO stage to chart.", "muted");
  }
  const auto columns = static_cast<std::size_t>(layout.columns);
  for (std::size_t i = 0; i < chart.stages.size(); ++i) {
    const std::size_t rowIndex = i / columns;
    const auto column = static_cast<double>(i % columns);
    const auto row = static_cast<double>(rowIndex);
    out += panel(chart.stages[i], chart, axes, layout,
                 kFigureMargin + column * (layout.panelWidth + kColumnGap),
                 kHeaderHeight + row * (layout.panelHeight + kPanelGap));
  }
  out += footnote(chart, kHeaderHeight + layout.rows * (layout.panelHeight + kPanelGap) + 12);
  return markup::figure("chart", layout.height,
                        "Metric against micro-batch per ZeRO stage" +
                            (chart.title.empty() ? "" : " for " + chart.title),
                        out);
}

}  // namespace autotune::report
