#pragma once
// The picture of a search, as plain data: per ZeRO stage the metric against the micro-batch,
// each trial a point marked by its outcome, the memory model's largest expected micro-batch, what
// the search pruned without running, and the best trial and the baseline. render.h draws it.

#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "report/search_results.h"
#include "tuning/naming.h"

namespace autotune::report {

// How a point is drawn: the outcomes that end alike share a mark.
enum class Mark {
  kSucceeded,
  kOOM,
  kFailed,  // Failed, MetricsUnavailable, Unschedulable
  kTimedOut,
};

Mark markOf(api::Outcome outcome);

// Where a trial stands on the chart, read from its name (tuning::coordinatesFromName) or, for
// names the search shortened, from the job's trials.
using tuning::Coordinates;
using tuning::coordinatesFromName;

struct ChartPoint {
  std::string trial;
  Coordinates at;
  api::Outcome outcome = api::Outcome::kSucceeded;
  std::optional<double> value;  // only a trial that succeeded has one
  std::string reason;           // why it did not succeed
  int launchIndex = 0;          // its position among all the search's trials

  bool operator==(const ChartPoint&) const = default;
};

// Micro-batches from..to, both included.
struct MicroBatchRange {
  int from = 0;
  int to = 0;

  bool operator==(const MicroBatchRange&) const = default;
};

// One best value per micro-batch: the line through a stage's points.
struct CurvePoint {
  int microBatch = 0;
  double value = 0;

  bool operator==(const CurvePoint&) const = default;
};

struct StageCurve {
  int stage = 0;
  std::vector<ChartPoint> points;  // in launch order
  std::vector<CurvePoint> curve;   // by micro-batch: the best value that ran there
  // The memory model's largest micro-batch expected to fit (0: none fits), with the job.
  std::optional<int> expectedLargest;
  // Micro-batches the search did not run because the memory model (or DeepSpeed's rules) ruled
  // them out, merged into ranges; `wholeStagePruned` when none of the stage was to run.
  std::vector<MicroBatchRange> pruned;
  bool wholeStagePruned = false;
  std::string prunedReason;  // the first pruned config and the engine's words for it
  bool gradientAccumulationVaries = false;
};

// The best trial or the baseline, where the chart labels it.
struct Callout {
  std::string trial;
  std::optional<Coordinates> at;  // nothing for a trial the chart cannot place
  double value = 0;

  bool operator==(const Callout&) const = default;
};

struct Chart {
  std::string title;  // the job's name
  api::Metric metric = api::Metric::kThroughput;
  std::vector<StageCurve> stages;  // by stage
  std::optional<Callout> best;
  std::optional<Callout> baseline;  // the first trial that succeeded, at the user's settings
  std::optional<double> speedup;    // of the best over the baseline (both ways "better" > 1)
  // Trials the chart cannot place on a curve: the profiling trial, a name it cannot read.
  std::vector<std::string> unplaced;
  bool memoryModelKnown = false;  // the job gave what the memory model needs
};

// The chart of `results`; `job` (when known) gives the metric, the memory model's estimates, the
// pruned configs and the trials behind shortened names.
Chart buildChart(const SearchResults& results, const std::optional<api::AutotuneJob>& job);

// The search's metric: the job's, else the metric whose recorded values are the records' values
// (every record keeps all its trial's metrics), else throughput.
api::Metric metricOf(const SearchResults& results, const std::optional<api::AutotuneJob>& job);

}  // namespace autotune::report
