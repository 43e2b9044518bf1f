#include "tuning/engine.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "tuning/naming.h"
#include "tuning/nothing_fits.h"
#include "tuning/protocol.h"
#include "tuning/strategy.h"

namespace autotune::tuning {
namespace {

// The user's seed and the job's UID together, so two jobs with the same seed differ.
std::uint64_t seedOf(std::int64_t userSeed, const std::string& jobUid) {
  return fnv1a(jobUid, kFnvOffsetBasis ^ static_cast<std::uint64_t>(userSeed));
}

bool countsAsFailure(api::Outcome outcome) {
  return outcome == api::Outcome::kFailed || outcome == api::Outcome::kMetricsUnavailable ||
         outcome == api::Outcome::kTimedOut || outcome == api::Outcome::kConfigNotApplied;
}

// Trials that ran another config than they were given say the command does not apply it: a second
// one ends the search rather than measuring on.
constexpr int kConfigNotAppliedToFail = 2;

// "NAME: REASON" of the last finished trial whose outcome `matches`, and how many matched.
struct LastMatch {
  int count = 0;
  std::string named;
};
LastMatch lastOf(const std::vector<api::TrialRecord>& finished,
                 const std::function<bool(api::Outcome)>& matches) {
  LastMatch last;
  for (const auto& record : finished) {
    if (matches(record.outcome)) {
      ++last.count;
      last.named = record.name + ": " + record.reason;
    }
  }
  return last;
}

std::optional<std::string> configNotApplied(const EngineInput& input) {
  const LastMatch notApplied = lastOf(input.finished, [](api::Outcome outcome) {
    return outcome == api::Outcome::kConfigNotApplied;
  });
  if (notApplied.count < kConfigNotAppliedToFail) {
    return std::nullopt;
  }
  return std::to_string(notApplied.count) +
         " trials did not run the config they were given (the last, " + notApplied.named + "); " +
         howTheConfigIsPassed(input.spec);
}

// Whether the best trial's result says its config was measured without being checked.
bool bestUnverified(const std::vector<api::TrialRecord>& finished, const std::string& best) {
  const auto record = std::ranges::find(finished, best, &api::TrialRecord::name);
  return record != finished.end() && record->configVerified == false;
}

// What is known of the model: the user's numbers first, else what the profiling trial measured.
std::optional<ModelSize> modelSize(const EngineInput& input) {
  const api::ModelInfo& given = input.spec.model;
  ModelSize size;
  if (given.numParameters) {
    size.numParameters = *given.numParameters;
  } else if (input.measured) {
    size.numParameters = input.measured->numParameters;
  } else {
    return std::nullopt;
  }
  if (given.activationMemoryPerSample) {
    size.activationBytesPerSample = given.activationMemoryPerSample;
  } else if (input.measured && input.measured->activationMemoryPerSample > 0) {
    size.activationBytesPerSample = input.measured->activationMemoryPerSample;
  }
  return size;
}

SearchContext contextFor(const EngineInput& input) {
  SearchContext context;
  context.space = describeSpace(input.spec);
  context.model = modelSize(input);
  context.gpuMemoryBytes = input.spec.resources.gpuMemory
                               ? std::optional(input.spec.resources.gpuMemory->value())
                               : input.gpuMemoryBytes;
  for (const auto& record : input.finished) {
    if (context.finished.emplace(record.name, Observation{record.outcome, record.value}).second) {
      context.launchOrder.push_back(record.name);
    }
  }
  context.inFlight = {input.inFlight.begin(), input.inFlight.end()};
  context.wantedSlots = static_cast<int>(context.inFlight.size()) + input.freeSlots;
  context.seed = seedOf(input.spec.search.seed, input.jobUid);
  return context;
}

void selectBest(const SearchContext& context, Decision& decision) {
  std::optional<double> bestScore;
  for (const auto& trial : decision.trials) {
    const auto score = context.score(trial.name);
    if (score && (!bestScore || *score > *bestScore)) {
      bestScore = score;
      decision.best = trial;
      decision.bestValue = context.finished.at(trial.name).value;
    }
  }
}

}  // namespace

std::optional<double> SearchContext::score(const std::string& name) const {
  const auto found = finished.find(name);
  if (found == finished.end() || !found->second.succeeded()) {
    return std::nullopt;
  }
  const double value = *found->second.value;
  return api::higherIsBetter(space.search.metric) ? value : -value;
}

std::optional<Observation> SearchContext::observation(const std::string& name) const {
  const auto found = finished.find(name);
  if (found == finished.end()) {
    return std::nullopt;
  }
  return found->second;
}

MemoryEstimate SearchContext::memory(const Trial& trial) const {
  return estimateMemory(model.value_or(ModelSize{}), trial.config, space.parallelism);
}

std::optional<int> SearchContext::estimatedLargestMicroBatch(const Trial& trial) const {
  if (!model || !gpuMemoryBytes) {
    return std::nullopt;
  }
  return largestMicroBatch(memory(trial), *gpuMemoryBytes);
}

std::optional<std::string> SearchContext::pruneReason(const Trial& trial) const {
  if (auto reason = inconsistency(space, trial)) {
    return reason;
  }
  if (!model || !gpuMemoryBytes) {
    return std::nullopt;
  }
  const MemoryEstimate estimate = memory(trial);
  const double needed = estimate.total(trial.microBatch).value_or(estimate.modelStates());
  if (needed > static_cast<double>(*gpuMemoryBytes)) {
    return "needs about " + formatBytes(needed) + " per GPU, more than the " +
           formatBytes(static_cast<double>(*gpuMemoryBytes)) + " it has";
  }
  return std::nullopt;
}

int trialsSinceImprovement(const SearchContext& context, const std::vector<std::string>& names,
                           std::optional<double> baseline) {
  const std::set<std::string> members(names.begin(), names.end());
  std::optional<double> best = baseline;
  int since = 0;
  for (const auto& name : context.launchOrder) {
    if (!members.contains(name)) {
      continue;
    }
    const auto score = context.score(name);
    if (score && (!best || *score > *best)) {
      best = score;
      since = 0;
    } else {
      ++since;
    }
  }
  return since;
}

namespace {

// Trials that ran or run but that the strategy has walked past (a speculative probe beyond the
// boundary it later found), and the profiling trial once it gave the model, are still trials of
// this search: callers look their configs up.
void addTrialsLeftBehind(const SearchContext& context, const EngineInput& input,
                         const Trial& profile, Decision& decision) {
  std::vector<std::string> names = input.inFlight;
  for (const auto& record : input.finished) {
    names.push_back(record.name);
  }
  for (const auto& name : names) {
    const bool known = std::any_of(decision.trials.begin(), decision.trials.end(),
                                   [&](const Trial& trial) { return trial.name == name; });
    if (known) {
      continue;
    }
    if (name == profile.name) {
      decision.trials.push_back(profile);
    } else if (auto trial = fastTrialNamed(context.space, name)) {
      decision.trials.push_back(std::move(*trial));
    }
  }
}

// Why the search stops early though trials remain: a trial that did not apply its config, or
// too many failures. The job fails once nothing is in flight.
bool stoppedEarly(const SearchContext& context, const EngineInput& input, Decision& decision) {
  std::optional<std::string> why = configNotApplied(input);
  if (!why) {
    const LastMatch failures = lastOf(input.finished, countsAsFailure);
    if (failures.count >= input.spec.maxFailedTrials) {
      why = std::to_string(failures.count) + " trials failed (spec.maxFailedTrials is " +
            std::to_string(input.spec.maxFailedTrials) + "; the last, " + failures.named + ")";
    }
  }
  if (!why) {
    return false;
  }
  decision.message = std::move(*why);
  decision.state = context.inFlight.empty() ? Decision::State::kFailed : Decision::State::kContinue;
  return true;
}

// Trials started so far, the profiling trial not counted: it is not one of spec.search.maxTrials.
int startedTrials(const SearchContext& context, const std::string& profileName) {
  const auto launched = std::count_if(context.launchOrder.begin(), context.launchOrder.end(),
                                      [&](const std::string& name) { return name != profileName; });
  const auto running = context.inFlight.size() - (context.inFlight.contains(profileName) ? 1 : 0);
  return static_cast<int>(launched) + static_cast<int>(running);
}

Proposal propose(const SearchContext& context) {
  return context.space.search.strategy == api::Strategy::kDeepSpeed ? proposeDeepSpeed(context)
                                                                    : proposeFromList(context);
}

// The wanted trials not measured or in flight, as many as `count`, in the proposal's order.
std::vector<Trial> launchable(const SearchContext& context, const Proposal& proposal, int count) {
  std::vector<Trial> launch;
  for (const auto& trial : proposal.wanted) {
    if (static_cast<int>(launch.size()) >= count) {
      break;
    }
    if (!context.observation(trial.name) && !context.inFlight.contains(trial.name)) {
      launch.push_back(trial);
    }
  }
  return launch;
}

// What the search would launch with `roomSlots` free: a strategy may want more at once with more
// room (two probes of a curve rather than one), so it is asked again, on the same context rather
// than one built again.
std::vector<Trial> wantedWithRoom(SearchContext& context, const EngineInput& input,
                                  const Decision& decision, int remaining) {
  if (input.roomSlots <= input.freeSlots) {
    return decision.launch;
  }
  const int wantedSlots = context.wantedSlots;
  context.wantedSlots = static_cast<int>(context.inFlight.size()) + input.roomSlots;
  auto wanted = launchable(context, propose(context), std::min(input.roomSlots, remaining));
  context.wantedSlots = wantedSlots;
  return wanted;
}

// The search is over: Succeeded with a best, else Failed, saying why in words a user can act on.
void conclude(const SearchContext& context, const EngineInput& input, std::string stopReason,
              Decision& decision) {
  decision.message = stopReason.empty() ? "search complete" : std::move(stopReason);
  decision.state = decision.best ? Decision::State::kSucceeded : Decision::State::kFailed;
  if (decision.best) {
    if (bestUnverified(input.finished, decision.best->name)) {
      decision.message +=
          "; the best trial did not report what its engine ran (configVerified: "
          "false), so only its global batch was checked: docs/trial-protocol.md";
    }
    return;
  }
  decision.message = "no trial succeeded: " + decision.message;
  const LastMatch ended = lastOf(
      input.finished, [](api::Outcome outcome) { return outcome != api::Outcome::kSucceeded; });
  if (ended.count > 0) {
    decision.message += " (the last, " + ended.named + ")";
  }
  if (input.finished.empty() && !decision.pruned.empty()) {
    decision.message = "nothing to run: every configuration of the search is pruned (" +
                       decision.pruned.front().name + ": " + decision.pruned.front().reason + ")";
  }
  if (context.model && context.gpuMemoryBytes) {
    if (auto why = nothingFits(context.space, *context.model, *context.gpuMemoryBytes)) {
      decision.message = std::move(*why);
    }
  }
}

}  // namespace

Decision decide(const EngineInput& input) {
  SearchContext context = contextFor(input);
  Decision decision;

  const Trial profile = makeProfileTrial(context.space);
  if (!context.model && !context.observation(profile.name)) {
    decision.trials.push_back(profile);
    if (!context.inFlight.contains(profile.name)) {
      if (input.freeSlots > 0) {
        decision.launch.push_back(profile);
      }
      if (std::max(input.freeSlots, input.roomSlots) > 0) {
        decision.wanted.push_back(profile);
      }
    }
    return decision;
  }

  Proposal proposal = propose(context);
  decision.trials = std::move(proposal.known);
  addTrialsLeftBehind(context, input, profile, decision);
  decision.pruned = std::move(proposal.pruned);
  selectBest(context, decision);
  if (stoppedEarly(context, input, decision)) {
    return decision;
  }

  const int remaining = input.spec.search.maxTrials - startedTrials(context, profile.name);
  decision.launch = launchable(context, proposal, std::min(input.freeSlots, remaining));
  const bool wantsMore = std::any_of(proposal.wanted.begin(), proposal.wanted.end(),
                                     [&](const Trial& t) { return !context.observation(t.name); });
  decision.wanted = wantedWithRoom(context, input, decision, remaining);
  if (!context.inFlight.empty() || (wantsMore && remaining > 0)) {
    return decision;
  }
  if (wantsMore) {
    proposal.stopReason =
        "spec.search.maxTrials (" + std::to_string(input.spec.search.maxTrials) + ") reached";
  }
  conclude(context, input, std::move(proposal.stopReason), decision);
  return decision;
}

int freeSlots(int parallelismLeft, int gpuSlots) {
  return std::max(0, std::min(parallelismLeft, gpuSlots));
}

}  // namespace autotune::tuning
