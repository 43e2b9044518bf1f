#pragma once
// The trial protocol, whatever runs the trial: the config and environment a trial gets,
// and how the way it ended becomes an outcome. Shared by the local executor and the controller.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::tuning {

inline constexpr std::string_view kJobVariable = "AUTOTUNE_JOB";
inline constexpr std::string_view kTrialVariable = "AUTOTUNE_TRIAL";
inline constexpr std::string_view kConfigVariable = "AUTOTUNE_DS_CONFIG";
inline constexpr std::string_view kMetricsVariable = "AUTOTUNE_METRICS_PATH";

// Where a trial finds its config and writes what it measured.
struct TrialFiles {
  std::string config;
  std::string metrics;  // autotuning.metric_path, or model_info_path for the profiling trial
};

// The trial's DeepSpeed config with the protocol's autotuning section: enabled, the metrics path,
// the profiled steps (3 and 5 unless the user's own autotuning section sets them), and for the
// profiling trial model_info.profile with model_info_path.
nlohmann::json launchConfig(const api::Spec& spec, const Trial& trial, const TrialFiles& files);

// AUTOTUNE_JOB, AUTOTUNE_TRIAL, AUTOTUNE_DS_CONFIG and AUTOTUNE_METRICS_PATH.
std::vector<std::pair<std::string, std::string>> protocolEnvironment(std::string_view jobName,
                                                                     const Trial& trial,
                                                                     const TrialFiles& files);

// Where a trial Pod finds its DeepSpeed config.
inline constexpr std::string_view kTrialConfigPath = "/etc/autotune/ds_config.json";

// The primary container's command and args for a trial: `--deepspeed X` / `--deepspeed_config X`
// pointed at `configPath`, argMappings flags replaced or appended, and ${key}, ${trial} and
// ${job} placeholders filled in.
std::vector<std::string> trialCommand(const api::Spec& spec, std::string_view jobName,
                                      const Trial& trial, std::string_view configPath);

// The template's primary container (spec.primaryContainer; the decoder defaults it to the first)
// and its index in spec.template.spec.containers.
struct PrimaryContainer {
  std::size_t index = 0;
  nlohmann::json container;
};
std::optional<PrimaryContainer> primaryContainer(const api::Spec& spec);

// ${key}, ${trial} and ${job} in one word of the command or the environment, filled in; a
// multi-node trial's ${AUTOTUNE_NODE_RANK} and the like (api::kRendezvousVariables) become
// $(AUTOTUNE_NODE_RANK), which the kubelet expands from each Pod's environment.
std::string substitutePlaceholders(std::string_view text, const Trial& trial,
                                   std::string_view jobName);

// How the template's command hands a trial its config, in words for a user whose trials did not
// run it: the file after --deepspeed or --deepspeed_config (or only $AUTOTUNE_DS_CONFIG), and each
// spec.argMappings flag, appended after a shell script as arguments it must pass on with "$@".
std::string howTheConfigIsPassed(const api::Spec& spec);

// A command line as one shell-quoted string.
std::string shellJoin(const std::vector<std::string>& argv);

// The most of a trial's termination message the kubelet keeps, and so the most of a trial's error
// output either runner reads into TrialExit::message.
inline constexpr std::size_t kTerminationMessageBytes = 4096;

// How a trial's process ended, as far as its runner could tell.
struct TrialExit {
  std::optional<int> exitCode;
  std::optional<int> signal;
  bool oomKilled = false;              // the kernel or the kubelet reported OOMKilled
  bool timedOut = false;               // the runner stopped it at spec.trialTimeout
  std::string message;                 // the tail of its error output or termination message
  std::optional<std::string> metrics;  // what it wrote to its metrics path, if anything
};

struct Classification {
  api::Outcome outcome = api::Outcome::kFailed;
  std::optional<double> value;
  std::string reason;
  std::optional<api::MeasuredModel> measured;  // for a profiling trial that succeeded
  // Every metric of its metrics file, for a trial that succeeded (a profiling trial's file holds
  // the model's size instead).
  std::map<std::string, double> metrics;
  // What a trial that succeeded reports it ran (tuning/effective_values.h), if it does.
  std::optional<nlohmann::json> effective;
};

// How the trial ended; its metrics file, if it wrote one, is read once here.
Classification classify(const TrialExit& exit, api::Metric metric, bool profilingTrial);

// A trial's record once its process ended, and for the profiling trial what it measured.
struct RecordedExit {
  api::TrialRecord record;
  std::optional<api::MeasuredModel> measured;
};

// The global batch a trial asks DeepSpeed's engine to run: micro-batch × gradient accumulation
// (read from its name: coordinatesFromName) × the data-parallel ranks of `spec`. Nothing for the
// profiling trial, or a name cut short.
std::optional<int> askedGlobalBatch(const api::Spec& spec, std::string_view trialName);

// Exit, classification, record: how every runner records a trial of `spec` whose process ended.
// The record is classify(exit)'s outcome, value, reason and metrics, under the trial's name and
// space, with when it started (RFC 3339) and for how many seconds it ran. A success that ran
// another config than asked measured nothing of it: ConfigNotApplied. Its metrics may show that
// (DeepSpeed writes throughput as train_batch_size × 10^6 / latency against askedGlobalBatch),
// and so may its effective values (checkEffective). A success whose effective values were checked
// and all agree is configVerified; one that reported none is measured all the same, unverified.
RecordedExit recordExit(std::string_view name, std::string_view space, const TrialExit& exit,
                        const api::Spec& spec, bool profilingTrial, std::string_view startTime,
                        double seconds);

// Whether a message carries a CUDA / PyTorch out-of-memory error.
bool mentionsOutOfMemory(std::string_view message);

// The last `maxBytes` of a text as valid UTF-8, cut between characters and at a line start where
// possible.
std::string tail(std::string_view text, std::size_t maxBytes);

// A trial's reason as status.results keeps it, up to 1,000 of them in one object: one line
// (api::oneLine), at most 256 bytes as a JSON string ('"' and '\\' count twice, as escaped),
// cut between characters.
std::string boundedReason(std::string_view reason);

}  // namespace autotune::tuning
