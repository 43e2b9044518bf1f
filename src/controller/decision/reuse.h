#pragma once
// Never paying twice for a measurement: before a job launches the trials the engine wants, each is
// looked up among the measurements kept in the job's namespace (measurements.h) under the identity
// it would run with. A hit becomes the trial's result, marked with where it came from, and the
// engine is asked again as if the trial had run: a hit on the profiling trial gives the model, and
// a job whose every trial was measured before launches nothing. Pure but for the lookup.

#include <functional>
#include <string>
#include <vector>

#include "controller/decision/observe.h"
#include "controller/objects/measurements.h"
#include "tuning/engine.h"

namespace autotune::controller {

// The kept measurements, as the cache holds them.
struct KeptMeasurements {
  // The one of that name in that namespace, if there is one.
  std::function<Shared<MeasurementObject>(const std::string& ns, const std::string& name)> named;
  // Those the job with that UID made in that namespace.
  std::function<std::vector<Shared<MeasurementObject>>(const std::string& ns,
                                                       const std::string& jobUid)>
      madeBy;
  MeasurementLimits limits;
};

// With spec.reuse Enabled and the search going on, the results of the trials `decision` launches
// that were measured before, taken into `snapshot` (its results and model, and Snapshot::reused),
// round after round until the engine wants nothing measured before; the last decision. Kept
// measurements that cannot stand for their trial are named in Snapshot::measurementsIgnored, and
// the trial runs. Nothing is looked up while the GPUs a trial would get cannot be told
// (expectedRanOn). An image given by tag is looked up by the digest the job's own trials ran,
// once one has run where the runtime reports digests; until then, as written, which finds only
// what was measured where the runtime reported none: a tag may have moved since.
tuning::Decision reuseMeasured(Snapshot& snapshot, tuning::Decision decision,
                               const KeptMeasurements& kept);

}  // namespace autotune::controller
