#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "controller/decision/plan_steps.h"

namespace autotune::controller::plan_steps {
namespace {

// How long a status write that would only move trials between pending and running, or only change
// the figures in what the job is doing, waits for the next write that records something, so that
// Pods starting cost no write each.
constexpr auto kLiveCountsInterval = std::chrono::seconds(30);
// How long a trial that ended waits for others of its job to end, to be recorded with them.
constexpr auto kConclusionBatch = std::chrono::seconds(5);

// When the trials that ended may be recorded together with those about to end: they ended while
// others of the job run on, and their results start nothing new. Nothing is lost meanwhile:
// their runs stay until the status holds them. Nothing when they are to be recorded now.
std::optional<Timestamp> conclusionsDue(const Snapshot& snapshot,
                                        const tuning::Decision& decision) {
  if (snapshot.concluded.empty() || api::hasEnded(snapshot.job.status.phase) ||
      snapshot.inFlight.empty() || !continues(decision) || !decision.launch.empty() ||
      std::ranges::any_of(snapshot.inFlight, shouldRelaunch) ||
      std::ranges::any_of(snapshot.inFlight, exhaustedUnmeasured)) {
    return std::nullopt;
  }
  std::optional<Timestamp> earliest;
  for (const auto& concluded : snapshot.concluded) {
    const TrialRunState& state = concluded.state;
    // An end after now means the node's clock runs ahead: waiting on it could last that long.
    if (!state.containerFinished || *state.containerFinished > snapshot.now) {
      return std::nullopt;
    }
    earliest = std::min(earliest.value_or(*state.containerFinished), *state.containerFinished);
  }
  const Timestamp due = *earliest + kConclusionBatch;
  return snapshot.now < due ? std::optional(due) : std::nullopt;
}

// `text` with each number in it (a run of digits, with any dots and digits after it) read as one
// mark, so that "trials in flight: 3" and "trials in flight: 12" read alike.
std::string withoutFigures(std::string_view text) {
  std::string words;
  for (std::size_t at = 0; at < text.size(); ++at) {
    if (std::isdigit(static_cast<unsigned char>(text[at])) == 0) {
      words += text[at];
      continue;
    }
    words += '#';
    while (at + 1 < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[at + 1])) != 0 || text[at + 1] == '.')) {
      ++at;
    }
  }
  return words;
}

// `planned` takes `written`'s wording where the two say the same in other figures.
void keepWordingOfSameWords(std::string& planned, const std::string& written) {
  if (withoutFigures(planned) == withoutFigures(written)) {
    planned = written;
  }
}

// Whether `planned` differs from `written` only in what moves while trials run: how many wait and
// run, and the figures in the words that say what the job is doing (the message, and a
// condition's message under the same status and reason: "trials in flight: 3"). New words (Kueue
// saying why a Workload waits where it had not made one) are news, and written at once.
bool onlyLiveFiguresChanged(const api::Status& planned, const api::Status& written) {
  if (planned == written) {
    return false;
  }
  api::Status same = planned;
  same.trials.pending = written.trials.pending;
  same.trials.running = written.trials.running;
  keepWordingOfSameWords(same.message, written.message);
  for (auto& condition : same.conditions) {
    const auto before =
        std::ranges::find(written.conditions, condition.type, &api::Condition::type);
    if (before != written.conditions.end() && before->status == condition.status &&
        before->reason == condition.reason) {
      keepWordingOfSameWords(condition.message, before->message);
    }
  }
  return same == written;
}

}  // namespace

Plan pace(Draft draft) {
  const Snapshot& snapshot = draft.snapshot;
  if (const auto due = conclusionsDue(snapshot, draft.decision)) {
    Plan held;
    held.status = snapshot.job.status;
    held.deletions = snapshot.staleRuns;
    held.releases = snapshot.settled;
    held.requeueAfter = requeueFor(*due - snapshot.now);
    return held;
  }
  const api::Status& written = snapshot.job.status;
  if (snapshot.statusWrittenAt && onlyLiveFiguresChanged(draft.status(), written)) {
    if (const auto due = *snapshot.statusWrittenAt + kLiveCountsInterval; snapshot.now < due) {
      draft.status() = written;
      draft.requeueWithin(due - snapshot.now);
    }
  }
  return std::move(draft.plan);
}

}  // namespace autotune::controller::plan_steps
