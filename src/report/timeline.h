#pragma once
// What a search spent, as plain data: its trials in launch order on a time axis with the GPUs
// each held (parallel trials overlap, waits show as gaps), and the GPU-hours they cost.

#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "report/search_results.h"

namespace autotune::report {

inline constexpr double kSecondsPerHour = 3600;

struct TimelineBar {
  std::string trial;
  std::string space;
  api::Outcome outcome = api::Outcome::kSucceeded;
  double startSeconds = 0;  // after the first trial started
  double durationSeconds = 0;
  bool startKnown = true;  // else placed at the start of the trial before it
  std::string gpus;        // the devices it held ("0-15"), where the results say
  int gpuCount = 0;        // 0 where unknown
  // Taken from a measurement an earlier job made (TrialRecord::reusedFrom): it cost this search
  // nothing, and stands where and when it was measured.
  std::string reusedFrom;

  bool operator==(const TimelineBar&) const = default;
};

// What one tuning space (z0, z1, a knob space) cost.
struct SpaceCost {
  std::string space;
  int trials = 0;
  double gpuHours = 0;

  bool operator==(const SpaceCost&) const = default;
};

struct Timeline {
  std::vector<TimelineBar> bars;  // in launch order
  double spanSeconds = 0;         // from the first start to the last end
  // Trial duration x GPUs held, over every trial; nothing when a trial's GPUs are unknown (a
  // results.json without its directory's exps/ and without the job).
  std::optional<double> gpuHours;
  // What the reused trials cost when they were measured, and how many they are.
  double savedGpuHours = 0;
  int reused = 0;
  std::vector<SpaceCost> bySpace;  // in the order spaces first ran
  std::string firstStart;          // RFC 3339, as recorded
};

// `job` gives GPUs per trial where the results do not name the devices.
Timeline buildTimeline(const SearchResults& results, const std::optional<api::AutotuneJob>& job);

}  // namespace autotune::report
