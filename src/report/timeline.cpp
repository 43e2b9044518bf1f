#include "report/timeline.h"

#include <algorithm>
#include <chrono>

#include "object/time.h"

namespace autotune::report {
namespace {

std::optional<double> secondsSinceEpoch(const std::string& time) {
  const auto parsed = object::parseTime(time);
  if (!parsed) {
    return std::nullopt;
  }
  return std::chrono::duration<double>(parsed->time_since_epoch()).count();
}

int gpusHeld(const FinishedTrial& trial, const std::optional<api::AutotuneJob>& job) {
  if (const int listed = countGpus(trial.gpus); listed > 0) {
    return listed;
  }
  return job ? job->spec.resources.gpusPerTrial : 0;
}

void addCost(const TimelineBar& bar, std::vector<SpaceCost>& bySpace) {
  auto row = std::find_if(bySpace.begin(), bySpace.end(),
                          [&](const SpaceCost& cost) { return cost.space == bar.space; });
  if (row == bySpace.end()) {
    bySpace.push_back({bar.space, 0, 0});
    row = std::prev(bySpace.end());
  }
  ++row->trials;
  if (bar.reusedFrom.empty()) {
    row->gpuHours += bar.durationSeconds * bar.gpuCount / kSecondsPerHour;
  }
}

}  // namespace

Timeline buildTimeline(const SearchResults& results, const std::optional<api::AutotuneJob>& job) {
  Timeline timeline;
  std::optional<double> origin;
  for (const auto& trial : results.trials) {
    const auto start = secondsSinceEpoch(trial.record.startTime);
    if (start && (!origin || *start < *origin)) {
      origin = start;
      timeline.firstStart = trial.record.startTime;
    }
  }
  double gpuHours = 0;
  bool gpusKnown = true;
  double previousStart = 0;
  for (const auto& trial : results.trials) {
    const api::TrialRecord& record = trial.record;
    const auto start = secondsSinceEpoch(record.startTime);
    TimelineBar bar;
    bar.trial = record.name;
    bar.space = record.space;
    bar.outcome = record.outcome;
    bar.startKnown = start.has_value();
    bar.startSeconds = start ? *start - origin.value_or(*start) : previousStart;
    bar.durationSeconds = std::max(0.0, record.durationSeconds);
    bar.gpus = trial.gpus;
    bar.gpuCount = gpusHeld(trial, job);
    bar.reusedFrom = record.reusedFrom;
    previousStart = bar.startSeconds;
    gpusKnown &= bar.gpuCount > 0;
    const double cost = bar.durationSeconds * bar.gpuCount / kSecondsPerHour;
    if (bar.reusedFrom.empty()) {
      gpuHours += cost;
    } else {
      timeline.savedGpuHours += cost;
      ++timeline.reused;
    }
    timeline.spanSeconds = std::max(timeline.spanSeconds, bar.startSeconds + bar.durationSeconds);
    addCost(bar, timeline.bySpace);
    timeline.bars.push_back(std::move(bar));
  }
  if (gpusKnown) {
    timeline.gpuHours = gpuHours;
  }
  return timeline;
}

}  // namespace autotune::report
