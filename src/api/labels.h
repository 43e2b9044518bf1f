#pragma once
// The labels and annotations that people and other programs read on what the operator makes
// (trial Pods and Jobs, the output ConfigMap, kept measurements), and the files of the output
// ConfigMap: one name each, for every layer that writes or reads them.

#include <string_view>

namespace autotune::api {

// The job's name, in its label-safe form: on trial Pods and Jobs and on the output ConfigMap.
inline constexpr std::string_view kJobLabel = "autotune.io/job";
// The canonical trial name (z1_gas1_tmbspg3), on a trial's Pod and on the measurement it made:
// labels and Pod names hold only DNS-safe forms of it.
inline constexpr std::string_view kTrialNameAnnotation = "autotune.io/trial-name";

// On every trial Pod the operator makes, its multi-node trials' included: the API server keeps
// the Pod, deleted or not, until the operator has written what it tells into the job's status and
// taken this off. How a trial ended is thus read from the API server after any restart, never
// from what a process remembers.
inline constexpr std::string_view kTrialResultFinalizer = "autotune.io/trial-result";

// The output ConfigMap's files: the tuned config the training job mounts, the command that runs
// it, DeepSpeed's summary table, and every trial's record. `autotune run`'s results directory
// holds the last two under the same names, where `autotune report` reads them as it reads the
// ConfigMap.
inline constexpr std::string_view kOutputConfigFile = "ds_config.json";
inline constexpr std::string_view kOutputCommandFile = "cmd.txt";
inline constexpr std::string_view kOutputSummaryFile = "summary.txt";
inline constexpr std::string_view kOutputResultsFile = "results.json";

}  // namespace autotune::api
