#pragma once
// A search that cannot start: when the memory model leaves no ZeRO stage of the space room for a
// micro-batch of 1, what each stage needs against the GPU and what would fit instead (offloading,
// more GPUs a trial), so that nobody waits on a job that can only fail.

#include <cstdint>
#include <optional>
#include <string>

#include "tuning/memory_model.h"
#include "tuning/space.h"

namespace autotune::tuning {

// Nothing when some stage of `space` fits a micro-batch of 1 in `gpuMemoryBytes` a GPU.
std::optional<std::string> nothingFits(const TuningSpace& space, const ModelSize& model,
                                       std::int64_t gpuMemoryBytes);

}  // namespace autotune::tuning
