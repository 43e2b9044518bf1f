#pragma once
// Never paying twice for a measurement: before a job launches the trials the engine wants, each is
// looked up among the kept measurements observe read with the job (Snapshot::recallable) under the
// identity it would run with. A hit becomes the trial's result, marked with where it came from,
// and the engine is asked again as if the trial had run: a hit on the profiling trial gives the
// model, and a job whose every trial was measured before launches nothing. Pure: the reconcile
// confirms with the API server what was taken, and recalls again if any of it changed.

#include <vector>

#include "controller/decision/observe.h"
#include "controller/objects/measurements.h"
#include "tuning/engine.h"

namespace autotune::controller {

struct Recalled {
  // The snapshot with the results of the trials taken from kept measurements (Snapshot::reused,
  // the model of a reused profiling trial) and why kept measurements that would have stood for a
  // trial could not (Snapshot::measurementsIgnored).
  Snapshot snapshot;
  tuning::Decision decision;  // the engine's, on those results
  std::vector<Shared<MeasurementObject>> taken;
};

// The results of the trials the engine wants (tuning::Decision::wanted: the GPUs not counted) that
// were measured before, round after round until it wants nothing measured before. The engine is
// asked once, and once more after each round that took something.
Recalled recall(Snapshot snapshot);

}  // namespace autotune::controller
