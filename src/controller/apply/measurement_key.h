#pragma once
// The key of the operator's measurement seal (measurements.h): kept in a Secret of the operator's
// own namespace, which no tenant reads, and made there by the first replica that finds none. A
// replaced key leaves every measurement sealed under the old one unread and in place.

#include <string>

#include "controller/objects/measurements.h"
#include "k8s/client.h"

namespace autotune::controller {

k8s::Result<MeasurementSeal> loadMeasurementSeal(const k8s::Client& client, const std::string& ns,
                                                 const std::string& secretName);

}  // namespace autotune::controller
