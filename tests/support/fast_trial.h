#pragma once
// The trial of DeepSpeed's fast mode at a stage, micro-batch and accumulation of a spec's space.

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::testing {

inline tuning::Trial fastTrial(const api::Spec& spec, int stage, int microBatch,
                               int gradientAccumulation) {
  return tuning::makeFastTrial(tuning::describeSpace(spec), stage, microBatch,
                               gradientAccumulation);
}

}  // namespace autotune::testing
