// The report as one self-contained HTML page: inline SVG and CSS, no script, nothing fetched.

#include <array>
#include <cstdio>
#include <map>

#include "report/markup.h"
#include "report/render.h"
#include "tuning/results.h"

namespace autotune::report {
namespace {

using markup::element;
using markup::emptyElement;
using markup::escape;
using markup::textElement;

constexpr std::size_t kMaxReasonShown = 200;
constexpr std::size_t kMaxReasonInTooltip = 4000;

constexpr std::string_view kPageStyle =
    "body{margin:0;background:#f6f8fa;color:#24292f;"
    "font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif}"
    "main{max-width:1000px;margin:0 auto;padding:20px 16px 48px}"
    "header h1{font-size:22px;margin:0 0 6px;overflow-wrap:anywhere}"
    "header p{margin:2px 0}"
    "section{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:14px 18px;"
    "margin:16px 0}"
    "h2{font-size:16px;margin:0 0 10px}"
    "h3{font-size:14px;margin:14px 0 6px}"
    "pre{background:#f6f8fa;border-radius:4px;padding:10px 12px;margin:0;overflow:auto;"
    "font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}"
    "svg{display:block;max-width:100%;height:auto}"
    "table{border-collapse:collapse;width:100%;font-size:12px}"
    "th,td{border-bottom:1px solid #eaeef2;padding:3px 8px;text-align:left;vertical-align:top}"
    ".number{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}"
    "td.reason{font-family:ui-monospace,monospace;white-space:pre-wrap;overflow-wrap:anywhere}"
    ".note{color:#57606a;font-size:12px;margin:8px 0 0}"
    ".Succeeded{color:#0969da}.OOM{color:#cf222e}.TimedOut{color:#bc4c00}"
    ".Failed,.MetricsUnavailable,.Unschedulable{color:#6e7781}";

// An element without attributes around markup.
std::string plain(std::string_view name, std::string_view content) {
  return element(name, {}, content);
}

// Several searches share a page: each one's section ids begin with its own prefix.
std::string section(std::string_view idPrefix, std::string_view id, std::string_view title,
                    std::string_view body) {
  return element("section", {{"id", std::string(idPrefix) + std::string(id)}},
                 textElement("h2", {}, title) + std::string(body));
}

std::string pre(std::string_view content) { return textElement("pre", {}, content); }

std::string ratio(double value) {
  std::array<char, 32> text{};
  std::snprintf(text.data(), text.size(), "%.2f", value);
  return text.data();
}

std::string clock(double seconds) {
  const auto whole = static_cast<long long>(seconds);
  std::array<char, 64> text{};
  std::snprintf(text.data(), text.size(), "%lld:%02lld:%02lld", whole / 3600, (whole / 60) % 60,
                whole % 60);
  return text.data();
}

std::string bestLine(const Chart& chart) {
  if (!chart.best) {
    return "No trial succeeded.";
  }
  std::string line = "Best: " + textElement("b", {}, chart.best->trial) + ", " +
                     std::string(api::toString(chart.metric)) + " " +
                     tuning::formatMetricValue(chart.best->value);
  if (chart.speedup && chart.baseline && chart.baseline->trial != chart.best->trial) {
    line += ", " + ratio(*chart.speedup) + "\u00d7 the baseline " + escape(chart.baseline->trial) +
            " (" + tuning::formatMetricValue(chart.baseline->value) + ")";
  } else if (chart.baseline && chart.baseline->trial == chart.best->trial) {
    line += ", the baseline itself";
  }
  return line + ".";
}

std::string spendLine(const Timeline& timeline) {
  std::map<api::Outcome, int> outcomes;  // in the enum's order: Succeeded first
  for (const auto& bar : timeline.bars) {
    ++outcomes[bar.outcome];
  }
  std::string line =
      std::to_string(timeline.bars.size()) + (timeline.bars.size() == 1 ? " trial" : " trials");
  std::string separator = ": ";
  for (const auto& [outcome, count] : outcomes) {
    line += separator + std::to_string(count) + " " + std::string(api::toString(outcome));
    separator = ", ";
  }
  line += timeline.gpuHours
              ? " \u00b7 " + tuning::formatMetricValue(*timeline.gpuHours) + " GPU-hours"
              : " \u00b7 GPU-hours unknown (the GPUs each trial held are not in "
                "these results)";
  if (timeline.reused > 0) {
    line += " \u00b7 " + std::to_string(timeline.reused) + " reused from earlier measurements";
    if (timeline.gpuHours) {
      line += ", saving " + tuning::formatMetricValue(timeline.savedGpuHours) + " GPU-hours";
    }
  }
  line += " \u00b7 " + clock(timeline.spanSeconds) + " from the first start to the last end";
  return escape(line) + ".";
}

std::string header(const Chart& chart, const Timeline& timeline) {
  const std::string name = chart.title.empty() ? "a search" : chart.title;
  return plain("header", textElement("h1", {}, "Autotune report: " + name) +
                             plain("p", bestLine(chart)) + plain("p", spendLine(timeline)));
}

std::string prunedNote(const Chart& chart) {
  std::string note;
  for (const auto& stage : chart.stages) {
    if (stage.pruned.empty()) {
      continue;
    }
    std::string ranges;
    for (const auto& range : stage.pruned) {
      ranges += (ranges.empty() ? "" : ", ") + std::to_string(range.from) +
                (range.to == range.from ? "" : "\u2013" + std::to_string(range.to));
    }
    note += textElement("li", {},
                        ("ZeRO-" + std::to_string(stage.stage) + ": " +
                         (stage.wholeStagePruned ? "the whole stage" : "micro-batch " + ranges) +
                         ": " + stage.prunedReason));
  }
  if (!note.empty()) {
    return plain("h3", "Pruned without running") + plain("ul", note);
  }
  if (!chart.memoryModelKnown) {
    return textElement("p", {{"class", "note"}},
                       "The memory model's estimates and what it pruned come from the job's spec "
                       "(autotune report --job FILE) with its model size and GPU memory.");
  }
  return "";
}

std::string summaryOf(const SearchResults& results, const Chart& chart, const Timeline& timeline) {
  if (results.summary) {
    return *results.summary;
  }
  std::vector<api::TrialRecord> records;
  records.reserve(results.trials.size());
  for (const auto& trial : results.trials) {
    records.push_back(trial.record);
  }
  return tuning::summaryTable(tuning::summarizeSpaces(records, chart.metric), chart.metric,
                              timeline.spanSeconds);
}

std::string fileOrNote(const std::optional<std::string>& content) {
  if (content) {
    return pre(*content);
  }
  return textElement("p", {{"class", "note"}},
                     "Not in these results: the search found no best, or its results.json was "
                     "read without the directory or the ConfigMap that holds this file.");
}

std::string bestSection(const SearchResults& results, std::string_view idPrefix) {
  const std::string body = plain("h3", "ds_config.json") + fileOrNote(results.bestConfig) +
                           plain("h3", "cmd.txt") + fileOrNote(results.command);
  return section(idPrefix, "best", "The best config and its command", body);
}

// A table row: each cell's text escaped, numbers aligned right.
std::string tableRow(std::string_view cellTag,
                     const std::vector<std::pair<std::string, markup::Attributes>>& cells) {
  std::string row;
  for (const auto& [content, attributes] : cells) {
    row += textElement(cellTag, attributes, content);
  }
  return plain("tr", row);
}

const markup::Attributes& numeric() {
  static const markup::Attributes kNumeric = {{"class", "number"}};
  return kNumeric;
}

std::string costSection(const Timeline& timeline) {
  std::string rows =
      tableRow("th", {{"tuning space", {}}, {"trials", numeric()}, {"GPU-hours", numeric()}});
  for (const auto& cost : timeline.bySpace) {
    rows += tableRow(
        "td", {{cost.space, {}},
               {std::to_string(cost.trials), numeric()},
               {timeline.gpuHours ? tuning::formatMetricValue(cost.gpuHours) : "?", numeric()}});
  }
  return plain("h3", "GPU-hours by tuning space (duration \u00d7 GPUs held)") +
         plain("table", rows);
}

std::string trialRow(const FinishedTrial& trial, const TimelineBar& bar, std::size_t index) {
  const api::TrialRecord& record = trial.record;
  const std::string outcome(api::toString(record.outcome));
  std::string reason = record.outcome == api::Outcome::kSucceeded ? "" : record.reason;
  if (!record.reusedFrom.empty()) {
    reason = "reused from ConfigMap " + record.reusedFrom + (reason.empty() ? "" : ": " + reason);
  }
  const std::string gpus =
      bar.gpus.empty() && bar.gpuCount > 0 ? std::to_string(bar.gpuCount) : bar.gpus;
  return tableRow(
      "td", {{std::to_string(index + 1), numeric()},
             {record.name, {}},
             {outcome, {{"class", outcome}}},
             {record.value ? tuning::formatMetricValue(*record.value) : "", numeric()},
             {gpus, numeric()},
             {bar.startKnown ? "+" + markup::duration(bar.startSeconds) : "?", numeric()},
             {markup::duration(bar.durationSeconds), numeric()},
             {markup::shortened(markup::lastLine(reason), kMaxReasonShown),
              {{"class", "reason"}, {"title", markup::shortened(reason, kMaxReasonInTooltip)}}}});
}

std::string trialsSection(const SearchResults& results, const Chart& chart,
                          const Timeline& timeline, std::string_view idPrefix) {
  std::string rows = tableRow("th", {{"#", numeric()},
                                     {"trial", {}},
                                     {"outcome", {}},
                                     {std::string(api::toString(chart.metric)), numeric()},
                                     {"GPUs", numeric()},
                                     {"start", numeric()},
                                     {"duration", numeric()},
                                     {"reason", {}}});
  for (std::size_t i = 0; i < results.trials.size(); ++i) {
    rows += trialRow(results.trials[i], timeline.bars[i], i);
  }
  return section(idPrefix, "trials", "Every trial, in launch order", plain("table", rows));
}

// One search's sections: its chart, summary, best config, timeline and trials.
std::string searchSections(const DrawnSearch& search, std::string_view idPrefix) {
  const Chart& chart = search.chart;
  const Timeline& timeline = search.timeline;
  return section(idPrefix, "chart", "The search, stage by stage",
                 chartSvg(chart, idPrefix) + prunedNote(chart)) +
         section(idPrefix, "summary", "Summary (summary.txt)",
                 pre(summaryOf(search.results, chart, timeline))) +
         bestSection(search.results, idPrefix) +
         section(idPrefix, "timeline", "Trials in launch order, with the GPUs they held",
                 timelineSvg(timeline) + costSection(timeline)) +
         trialsSection(search.results, chart, timeline, idPrefix);
}

std::string document(const std::string& title, const std::string& body) {
  const std::string head =
      emptyElement("meta", {{"charset", "utf-8"}}) +
      emptyElement("meta",
                   {{"name", "viewport"}, {"content", "width=device-width, initial-scale=1"}}) +
      textElement("title", {}, title) + plain("style", kPageStyle);
  return "<!DOCTYPE html>\n" +
         element("html", {{"lang", "en"}},
                 plain("head", head) + plain("body", plain("main", body))) +
         "\n";
}

// The table that opens a page of several GPU models: each model, its best, a link to its part.
std::string modelsTable(const std::vector<ModelPart>& models) {
  std::string rows = tableRow("th", {{"GPU model", {}}, {"search", {}}, {"best", {}}});
  for (std::size_t index = 0; index < models.size(); ++index) {
    const ModelPart& model = models[index];
    const std::string best = !model.search              ? model.note
                             : model.search->chart.best ? model.search->chart.best->trial
                                                        : "no trial succeeded";
    rows += plain("tr", element("td", {},
                                element("a", {{"href", "#model-" + std::to_string(index)}},
                                        escape(model.gpuModel))) +
                            textElement("td", {}, model.searchJob) +
                            textElement("td", {}, markup::shortened(best, kMaxReasonShown)));
  }
  return plain("table", rows);
}

// A model's part of the page: its heading, then its search's lines and sections, or why there is
// none to draw.
std::string modelPart(const ModelPart& model, std::size_t index) {
  const std::string id = "model-" + std::to_string(index);
  std::string body = textElement("h1", {}, "GPU model " + model.gpuModel);
  if (!model.search) {
    body += textElement("p", {{"class", "note"}}, model.note);
  } else {
    body += plain("p",
                  escape("AutotuneJob " + model.searchJob + ". ") + bestLine(model.search->chart)) +
            plain("p", spendLine(model.search->timeline)) + searchSections(*model.search, id + "-");
  }
  return element("article", {{"id", id}}, body);
}

}  // namespace

std::string htmlPage(const DrawnSearch& search) {
  const std::string name = search.chart.title.empty() ? "a search" : search.chart.title;
  return document("Autotune report: " + name,
                  header(search.chart, search.timeline) + searchSections(search, ""));
}

std::string htmlModelsPage(std::string_view jobName, const std::vector<ModelPart>& models) {
  const std::string title = "Autotune report: " + std::string(jobName) + ", per GPU model";
  std::string body = plain("header", textElement("h1", {}, title) +
                                         textElement("p", {},
                                                     "A search per GPU model, each an AutotuneJob "
                                                     "of its own, drawn one after another."));
  body += section("", "models", "GPU models", modelsTable(models));
  for (std::size_t index = 0; index < models.size(); ++index) {
    body += modelPart(models[index], index);
  }
  return document(title, body);
}

}  // namespace autotune::report
