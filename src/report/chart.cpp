#include "report/chart.h"

#include <algorithm>
#include <map>
#include <set>

#include "tuning/engine.h"
#include "tuning/memory_model.h"
#include "tuning/naming.h"
#include "tuning/space.h"

namespace autotune::report {
namespace {

// What the job says about its trials: it rebuilds the search's own view of them.
struct JobKnowledge {
  std::map<std::string, Coordinates, std::less<>> trials;  // every config the search considered
  std::set<int> stages;
  std::map<int, int> expectedLargest;
  std::map<int, std::set<int>> prunedMicroBatches;
  std::map<int, std::string> prunedReasons;
  bool memoryModelKnown = false;
};

std::optional<tuning::ModelSize> modelSize(const api::Spec& spec,
                                           const std::optional<api::MeasuredModel>& measured) {
  tuning::ModelSize size;
  if (spec.model.numParameters) {
    size.numParameters = *spec.model.numParameters;
  } else if (measured) {
    size.numParameters = measured->numParameters;
  } else {
    return std::nullopt;
  }
  if (spec.model.activationMemoryPerSample) {
    size.activationBytesPerSample = spec.model.activationMemoryPerSample;
  } else if (measured && measured->activationMemoryPerSample > 0) {
    size.activationBytesPerSample = measured->activationMemoryPerSample;
  }
  return size;
}

// The memory model's largest micro-batch per stage, as `autotune plan` prints it.
void addMemoryModel(const api::Spec& spec, const std::optional<api::MeasuredModel>& measured,
                    const tuning::TuningSpace& space, JobKnowledge& known) {
  const auto model = modelSize(spec, measured);
  if (!model || !spec.resources.gpuMemory) {
    return;
  }
  for (const int stage : space.stages) {
    const tuning::Trial trial =
        tuning::makeFastTrial(space, stage, 1, space.gradientAccumulation.first(1));
    const auto largest =
        tuning::largestMicroBatch(tuning::estimateMemory(*model, trial.config, space.parallelism),
                                  spec.resources.gpuMemory->value());
    if (largest) {
      known.expectedLargest[stage] = *largest;
      known.memoryModelKnown = true;
    }
  }
}

JobKnowledge knowledgeOf(const api::AutotuneJob& job, const SearchResults& results) {
  JobKnowledge known;
  const tuning::TuningSpace space = tuning::describeSpace(job.spec);
  known.stages = {space.stages.begin(), space.stages.end()};
  addMemoryModel(job.spec, results.model, space, known);

  // The engine is a pure function of the spec and the records: asked again, it names every
  // config it considered and every one it pruned, with its reason.
  tuning::EngineInput input;
  input.spec = job.spec;
  input.jobUid = job.uid().empty() ? job.name() : job.uid();  // as the runs seed it
  input.measured = results.model;
  for (const auto& trial : results.trials) {
    input.finished.push_back(trial.record);
  }
  const tuning::Decision decision = tuning::decide(input);
  for (const auto& trial : decision.trials) {
    if (!trial.profile) {
      known.trials.emplace(trial.name,
                           Coordinates{trial.stage, trial.microBatch, trial.gradientAccumulation});
    }
  }
  for (const auto& pruned : decision.pruned) {
    const auto found = known.trials.find(pruned.name);
    const auto at = found != known.trials.end() ? std::optional(found->second)
                                                : coordinatesFromName(pruned.name);
    if (!at) {
      continue;
    }
    known.prunedMicroBatches[at->stage].insert(at->microBatch);
    known.prunedReasons.emplace(at->stage, pruned.name + ": " + pruned.reason);
  }
  return known;
}

// Pruned micro-batches as ranges, split only where a trial ran between them: the candidates a
// range skips (a list without 7) were never the search's to run.
std::vector<MicroBatchRange> rangesOf(const std::set<int>& pruned, const StageCurve& stage) {
  std::set<int> ran;
  for (const auto& point : stage.points) {
    ran.insert(point.at.microBatch);
  }
  std::vector<MicroBatchRange> ranges;
  for (const int microBatch : pruned) {
    const bool ranBetween =
        !ranges.empty() && ran.upper_bound(ranges.back().to) != ran.lower_bound(microBatch);
    if (ranges.empty() || ranBetween) {
      ranges.push_back({microBatch, microBatch});
    } else {
      ranges.back().to = microBatch;
    }
  }
  return ranges;
}

// The profiling trial measures the model, not a config: never a point, the best or the baseline.
bool isProfile(const api::TrialRecord& record) {
  return record.space == tuning::kProfileTrialName || record.name == tuning::kProfileTrialName;
}

bool better(api::Metric metric, double value, double than) {
  return api::higherIsBetter(metric) ? value > than : value < than;
}

void drawCurve(api::Metric metric, StageCurve& stage) {
  std::map<int, double> bestAt;
  std::set<int> accumulations;
  for (const auto& point : stage.points) {
    accumulations.insert(point.at.gradientAccumulation);
    if (!point.value) {
      continue;
    }
    const auto [entry, first] = bestAt.emplace(point.at.microBatch, *point.value);
    if (!first && better(metric, *point.value, entry->second)) {
      entry->second = *point.value;
    }
  }
  for (const auto& [microBatch, value] : bestAt) {
    stage.curve.push_back({microBatch, value});
  }
  stage.gradientAccumulationVaries = accumulations.size() > 1;
}

void addPruned(const JobKnowledge& known, StageCurve& stage) {
  if (const auto expected = known.expectedLargest.find(stage.stage);
      expected != known.expectedLargest.end()) {
    stage.expectedLargest = expected->second;
  }
  const auto pruned = known.prunedMicroBatches.find(stage.stage);
  if (pruned == known.prunedMicroBatches.end()) {
    return;
  }
  stage.pruned = rangesOf(pruned->second, stage);
  stage.wholeStagePruned = stage.points.empty();
  stage.prunedReason = known.prunedReasons.at(stage.stage);
}

// The best trial by the metric, the first of equals in launch order (as the summary table
// picks it), and the baseline: the first trial that succeeded, at the user's own settings.
void labelBestAndBaseline(const SearchResults& results,
                          const std::map<std::string, Coordinates, std::less<>>& placed,
                          Chart& chart) {
  for (const auto& trial : results.trials) {
    const api::TrialRecord& record = trial.record;
    if (isProfile(record) || record.outcome != api::Outcome::kSucceeded || !record.value) {
      continue;
    }
    const auto found = placed.find(record.name);
    const Callout callout{
        record.name,
        found == placed.end() ? std::nullopt : std::optional(found->second),
        *record.value,
    };
    if (!chart.baseline) {
      chart.baseline = callout;
    }
    if (!chart.best || better(chart.metric, callout.value, chart.best->value)) {
      chart.best = callout;
    }
  }
  if (chart.best && chart.baseline && chart.best->value > 0 && chart.baseline->value > 0) {
    chart.speedup = api::higherIsBetter(chart.metric) ? chart.best->value / chart.baseline->value
                                                      : chart.baseline->value / chart.best->value;
  }
}

}  // namespace

Mark markOf(api::Outcome outcome) {
  switch (outcome) {
    case api::Outcome::kSucceeded:
      return Mark::kSucceeded;
    case api::Outcome::kOOM:
      return Mark::kOOM;
    case api::Outcome::kTimedOut:
      return Mark::kTimedOut;
    case api::Outcome::kFailed:
    case api::Outcome::kMetricsUnavailable:
    case api::Outcome::kUnschedulable:
    case api::Outcome::kConfigNotApplied:
      return Mark::kFailed;
  }
  return Mark::kFailed;
}

api::Metric metricOf(const SearchResults& results, const std::optional<api::AutotuneJob>& job) {
  if (job) {
    return job->spec.search.metric;
  }
  for (const auto metric : {api::Metric::kThroughput, api::Metric::kLatency, api::Metric::kFlops}) {
    const std::string name(api::toString(metric));
    bool matchesAll = true;
    bool matchesAny = false;
    for (const auto& trial : results.trials) {
      const api::TrialRecord& record = trial.record;
      if (!record.value || isProfile(record)) {
        continue;
      }
      const auto measured = record.metrics.find(name);
      const bool matches = measured != record.metrics.end() && measured->second == *record.value;
      matchesAll &= matches;
      matchesAny |= matches;
    }
    if (matchesAll && matchesAny) {
      return metric;
    }
  }
  return api::Metric::kThroughput;
}

Chart buildChart(const SearchResults& results, const std::optional<api::AutotuneJob>& job) {
  Chart chart;
  chart.title = job ? job->name() : results.jobName;
  chart.metric = metricOf(results, job);
  const JobKnowledge known = job ? knowledgeOf(*job, results) : JobKnowledge{};
  chart.memoryModelKnown = known.memoryModelKnown;

  std::map<int, StageCurve> stages;
  std::map<std::string, Coordinates, std::less<>> placed;
  for (std::size_t i = 0; i < results.trials.size(); ++i) {
    const api::TrialRecord& record = results.trials[i].record;
    const auto found = known.trials.find(record.name);
    const auto at = found != known.trials.end() ? std::optional(found->second)
                                                : coordinatesFromName(record.name);
    if (isProfile(record) || !at) {
      chart.unplaced.push_back(record.name);
      continue;
    }
    placed.emplace(record.name, *at);
    StageCurve& stage = stages[at->stage];
    stage.stage = at->stage;
    const bool succeeded = record.outcome == api::Outcome::kSucceeded;
    stage.points.push_back({record.name, *at, record.outcome,
                            succeeded ? record.value : std::nullopt, record.reason,
                            static_cast<int>(i)});
  }
  for (const int stage : known.stages) {
    stages[stage].stage = stage;
  }
  for (auto& [number, stage] : stages) {
    drawCurve(chart.metric, stage);
    addPruned(known, stage);
    chart.stages.push_back(std::move(stage));
  }
  labelBestAndBaseline(results, placed, chart);
  return chart;
}

}  // namespace autotune::report
