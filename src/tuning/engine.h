#pragma once
// The tuning engine's ask/tell core. decide() is a pure function of its input: the same spec,
// finished results, trials in flight and free slots always give the same answer, so a caller
// may be restarted at any moment and ask again. It knows nothing of Kubernetes or processes.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/job.h"
#include "tuning/space.h"

namespace autotune::tuning {

struct EngineInput {
  api::Spec spec;
  std::string jobUid;                          // seeds random choices together with search.seed
  std::optional<api::MeasuredModel> measured;  // what the profiling trial found, if it ran
  // Per GPU, as the cluster reports it (the nodes' label); spec.resources.gpuMemory wins.
  std::optional<std::int64_t> gpuMemoryBytes;
  std::vector<api::TrialRecord> finished;  // in launch order
  std::vector<std::string> inFlight;       // names of trials launched and not yet finished
  int freeSlots = 0;                       // how many more trials may start now
  // How many more could start were the GPUs no limit, spec.parallelism's room: Decision::wanted.
  int roomSlots = 0;
};

// A configuration the engine will not run, and why.
struct PrunedTrial {
  std::string name;
  std::string reason;
};

struct Decision {
  enum class State {
    kContinue,   // launch `launch` (possibly nothing) and ask again when a trial finishes
    kSucceeded,  // the search is over; `best` holds the answer
    kFailed,     // the search cannot go on (see `message`)
  };
  State state = State::kContinue;
  std::vector<Trial> launch;
  // What it would launch with EngineInput::roomSlots free, asked in the same breath: `launch` and
  // the trials that wait for GPUs.
  std::vector<Trial> wanted;
  std::vector<PrunedTrial> pruned;
  std::optional<Trial> best;  // best finished trial so far
  std::optional<double> bestValue;
  std::vector<Trial> trials;  // every trial the search has considered, to look names up in
  std::string message;        // why the search stopped, when it did
};

Decision decide(const EngineInput& input);

// EngineInput::freeSlots: what both spec.parallelism (the trials it leaves room for) and the free
// GPUs (the trials they hold) allow, and never below 0.
int freeSlots(int parallelismLeft, int gpuSlots);

}  // namespace autotune::tuning
