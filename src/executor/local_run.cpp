#include "executor/local_run.h"

#include <algorithm>
#include <array>
#include <csignal>
#include <cstdlib>
#include <set>
#include <thread>

#include "api/codec.h"
#include "api/text.h"
#include "executor/gpu_slots.h"
#include "executor/process.h"
#include "executor/progress.h"
#include "executor/results_directory.h"
#include "object/time.h"
#include "report/report.h"
#include "tuning/engine.h"
#include "tuning/protocol.h"
#include "tuning/results.h"

namespace autotune::executor {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(20);
constexpr auto kStopGrace = std::chrono::seconds(5);

volatile std::sig_atomic_t stopSignal = 0;

extern "C" void requestStop(int signal) { stopSignal = signal; }

void installStopHandlers() {
  stopSignal = 0;
  struct sigaction action {};
  action.sa_handler = requestStop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

// RFC 3339 with milliseconds, so that the intervals of short trials can be compared.
std::string utcNow() {
  return object::formatTime(std::chrono::system_clock::now(), object::Fraction::kMilliseconds);
}

// The last line of a reason: for a crash, usually the exception that ended it.
std::string lastLine(std::string_view text) {
  const auto end = text.find_last_not_of("\n ");
  if (end == std::string_view::npos) {
    return "";
  }
  text = text.substr(0, end + 1);
  const auto newline = text.rfind('\n');
  return std::string(newline == std::string_view::npos ? text : text.substr(newline + 1));
}

struct RunningTrial {
  tuning::Trial trial;
  ChildProcess process;
  std::vector<int> gpus;
  TrialPaths paths;
  int launchIndex = 0;
  Clock::time_point started;
  std::string startTime;
  bool timedOut = false;
};

class LocalRun {
 public:
  LocalRun(api::AutotuneJob job, ResultsDirectory results, GpuSlots slots, std::string searchPath,
           Progress& progress)
      : job_(std::move(job)),
        results_(std::move(results)),
        slots_(std::move(slots)),
        searchPath_(std::move(searchPath)),
        progress_(progress) {}

  int execute(std::ostream& out) {
    installStopHandlers();
    if (!results_.records().empty()) {
      progress_.log("Resuming with " + std::to_string(results_.records().size()) +
                    " finished trials from " + results_.root().string());
    }
    bool changed = true;
    tuning::Decision decision;
    while (stopSignal == 0) {
      changed |= reapFinished();
      enforceTimeouts();
      if (!changed) {
        std::this_thread::sleep_for(kPollInterval);
        continue;
      }
      changed = false;
      decision = tuning::decide(question());
      for (const auto& trial : decision.launch) {
        launch(trial);
        changed = true;
      }
      report(decision);
      if (decision.state != tuning::Decision::State::kContinue && running_.empty()) {
        return conclude(decision, out);
      }
    }
    return stop();
  }

 private:
  tuning::EngineInput question() const {
    tuning::EngineInput input;
    input.spec = job_.spec;
    input.jobUid = job_.uid().empty() ? job_.name() : job_.uid();
    input.measured = results_.measured();
    input.finished = results_.records();
    for (const auto& running : running_) {
      input.inFlight.push_back(running.trial.name);
    }
    const int byParallelism = job_.spec.parallelism - static_cast<int>(running_.size());
    const int byGpus = slots_.free() / job_.spec.resources.gpusPerTrial;
    input.freeSlots = tuning::freeSlots(byParallelism, byGpus);
    return input;
  }

  std::vector<std::pair<std::string, std::string>> environment(const tuning::Trial& trial,
                                                               const TrialPaths& paths,
                                                               const std::vector<int>& gpus) {
    std::vector<std::pair<std::string, std::string>> variables;
    if (const auto primary = tuning::primaryContainer(job_.spec)) {
      for (const auto& variable : primary->container.value("env", nlohmann::json::array())) {
        if (variable.contains("value")) {
          variables.emplace_back(
              variable.value("name", ""),
              tuning::substitutePlaceholders(variable.value("value", ""), trial, job_.name()));
        } else if (warnedValueFrom_.insert(variable.value("name", "")).second) {
          progress_.log("Skipped env " + variable.value("name", "") +
                        ": valueFrom is resolved only on Kubernetes");
        }
      }
    }
    for (auto& variable : tuning::protocolEnvironment(job_.name(), trial, paths.protocol)) {
      variables.push_back(std::move(variable));
    }
    variables.emplace_back("CUDA_VISIBLE_DEVICES", deviceList(gpus));
    variables.emplace_back("PATH", searchPath_);
    return variables;
  }

  void launch(const tuning::Trial& trial) {
    auto gpus = slots_.acquire(job_.spec.resources.gpusPerTrial);
    if (!gpus) {
      return;
    }
    const int launchIndex = nextLaunchIndex_++;
    const std::string devices = rangeList(*gpus);
    const TrialPaths paths = results_.pathsFor(trial);
    const std::vector<std::string> command =
        tuning::trialCommand(job_.spec, job_.name(), trial, paths.protocol.config);
    const auto prepared = results_.prepareTrial(
        trial, tuning::launchConfig(job_.spec, trial, paths.protocol), command, devices);
    if (!prepared) {
      slots_.release(*gpus);
      failToStart(trial, launchIndex, prepared.error());
      return;
    }
    const LaunchSpec spec{command, environment(trial, paths, *gpus), "", paths.stdoutLog.string(),
                          paths.stderrLog.string()};
    auto process = ChildProcess::start(spec);
    if (!process) {
      slots_.release(*gpus);
      failToStart(trial, launchIndex, process.error());
      return;
    }
    progress_.log("Launched trial " + trial.name + " gpus=" + devices);
    running_.push_back(
        {trial, *process, std::move(*gpus), paths, launchIndex, Clock::now(), utcNow(), false});
  }

  void failToStart(const tuning::Trial& trial, int launchIndex, const std::string& reason) {
    api::TrialRecord record;
    record.name = trial.name;
    record.space = trial.space;
    record.outcome = api::Outcome::kFailed;
    record.reason = reason;
    record.startTime = utcNow();
    finish(record, launchIndex, std::nullopt);
  }

  bool reapFinished() {
    bool any = false;
    for (auto it = running_.begin(); it != running_.end();) {
      const auto status = it->process.poll();
      if (!status) {
        ++it;
        continue;
      }
      any = true;
      // What the trial left running dies with it, as with a container, before its GPUs go to
      // the next trial.
      it->process.signalGroup(SIGKILL);
      slots_.release(it->gpus);
      tuning::TrialExit exit;
      exit.exitCode = status->exitCode;
      exit.signal = status->signal;
      exit.timedOut = it->timedOut;
      exit.message = tuning::tail(api::readText(it->paths.stderrLog).value_or(""),
                                  tuning::kTerminationMessageBytes);
      exit.metrics = api::readText(it->paths.protocol.metrics);
      const double seconds = std::chrono::duration<double>(Clock::now() - it->started).count();
      const tuning::RecordedExit recorded =
          tuning::recordExit(it->trial.name, it->trial.space, exit, job_.spec, it->trial.profile,
                             it->startTime, seconds);
      finish(recorded.record, it->launchIndex, recorded.measured);
      it = running_.erase(it);
    }
    return any;
  }

  void finish(const api::TrialRecord& record, int launchIndex,
              const std::optional<api::MeasuredModel>& measured) {
    if (auto saved = results_.record(record, launchIndex, measured); !saved) {
      progress_.log("Could not record trial " + record.name + ": " + saved.error());
    }
    std::string line =
        "Finished trial " + record.name + " outcome=" + std::string(api::toString(record.outcome));
    if (record.value) {
      line += " " + std::string(api::toString(job_.spec.search.metric)) + "=" +
              tuning::formatMetricValue(*record.value);
    }
    line += " duration=" + tuning::formatMetricValue(record.durationSeconds) + "s";
    if (!record.reason.empty() && record.outcome != api::Outcome::kSucceeded) {
      line += " reason=\"" + lastLine(record.reason) + "\"";
    }
    progress_.log(line);
  }

  void enforceTimeouts() {
    const auto limit = job_.spec.trialTimeout.value();
    for (auto& running : running_) {
      if (!running.timedOut && Clock::now() - running.started > limit) {
        running.timedOut = true;
        running.process.signalGroup(SIGKILL);
      }
    }
  }

  void report(const tuning::Decision& decision) {
    ProgressState state;
    state.finished = static_cast<int>(results_.records().size());
    state.running = static_cast<int>(running_.size());
    state.planned = std::min(
        job_.spec.search.maxTrials,
        std::max(static_cast<int>(decision.trials.size()), state.finished + state.running));
    if (decision.best) {
      state.bestTrial = decision.best->name;
      state.bestValue = decision.bestValue;
    }
    progress_.update(state);
  }

  int conclude(const tuning::Decision& decision, std::ostream& out) {
    progress_.finish();
    const api::Metric metric = job_.spec.search.metric;
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    if (decision.state != tuning::Decision::State::kSucceeded || !decision.best) {
      const std::string summary =
          tuning::summaryTable(tuning::summarizeSpaces(results_.records(), metric), metric,
                               elapsed) +
          "\nSearch failed: " + decision.message + "\n";
      out << summary;
      if (auto written = results_.writeFailure(summary); !written) {
        out << "Could not write the summary: " << written.error() << "\n";
      }
      writeReport(out);
      return kExitSearchFailed;
    }
    const tuning::Trial& best = *decision.best;
    const tuning::Report report =
        tuning::report(job_.spec, job_.name(), results_.records(), best, decision.trials, elapsed,
                       std::filesystem::absolute(results_.optimalConfigPath()).string());
    out << report.summary << "\n";
    if (auto written = results_.writeOutcome(report); !written) {
      out << "Could not write the outcome: " << written.error() << "\n";
      return kExitSearchFailed;
    }
    const auto record =
        tuning::bestTrial(best, decision.bestValue.value_or(0), metric,
                          tuning::baselineValue(results_.records()), job_.spec.resources);
    out << "Best trial: " << best.name << " (" << api::toString(metric) << " "
        << tuning::formatMetricValue(record.value);
    if (record.speedup) {
      std::array<char, 32> speedup{};
      std::snprintf(speedup.data(), speedup.size(), "%.2f", *record.speedup);
      out << ", " << speedup.data() << "x the first trial";
    }
    out << "; " << decision.message << ")\n"
        << "Optimal config: " << results_.optimalConfigPath().string() << "\n"
        << "Command: " << report.command << "\n";
    writeReport(out);
    return 0;
  }

  // report.html beside summary.txt, drawn from what the directory holds, as `autotune report`
  // draws it. The search is over either way: a report that cannot be written is only told.
  void writeReport(std::ostream& out) const {
    const auto results = report::loadResults(results_.root());
    if (!results) {
      out << "Could not draw the report: " << results.error() << "\n";
      return;
    }
    const std::filesystem::path path = results_.root() / "report.html";
    const std::string page = report::renderReport(*results, job_, report::Format::kHtml);
    if (auto written = writeFileAtomically(path, page); !written) {
      out << "Could not write the report: " << written.error() << "\n";
      return;
    }
    out << "Report: " << path.string() << "\n";
  }

  int stop() {
    const int signal = stopSignal;
    for (auto& running : running_) {
      running.process.signalGroup(SIGTERM);
    }
    const auto deadline = Clock::now() + kStopGrace;
    while (Clock::now() < deadline &&
           std::any_of(running_.begin(), running_.end(),
                       [](RunningTrial& r) { return !r.process.poll(); })) {
      std::this_thread::sleep_for(kPollInterval);
    }
    for (auto& running : running_) {
      running.process.signalGroup(SIGKILL);
      running.process.wait();
    }
    progress_.finish();
    progress_.log("Stopped by signal " + std::to_string(signal) + "; " +
                  std::to_string(running_.size()) +
                  " interrupted trials were not recorded and will run again when resumed");
    return 128 + signal;
  }

  api::AutotuneJob job_;
  ResultsDirectory results_;
  GpuSlots slots_;
  std::string searchPath_;
  Progress& progress_;
  std::vector<RunningTrial> running_;
  std::set<std::string> warnedValueFrom_;
  int nextLaunchIndex_ = results_.nextLaunchIndex();
  Clock::time_point started_ = Clock::now();
};

std::optional<std::string> readJob(const std::string& path, std::ostream& err) {
  auto text = api::readText(path);
  if (!text) {
    err << path << ": cannot be read\n";
  }
  return text;
}

// Checks the primary container's command can run here, before anything starts.
bool commandRuns(const api::AutotuneJob& job, const std::string& searchPath, std::ostream& err) {
  const auto primary = tuning::primaryContainer(job.spec);
  const std::string path =
      "spec.template.spec.containers[" + std::to_string(primary ? primary->index : 0) + "]";
  const tuning::TuningSpace space = tuning::describeSpace(job.spec);
  const auto argv =
      tuning::trialCommand(job.spec, job.name(), tuning::makeProfileTrial(space), "ds_config.json");
  if (argv.empty()) {
    err << path << ".command: a local run needs a command (the image's entrypoint is not known)\n";
    return false;
  }
  if (!findExecutable(argv.front(), searchPath)) {
    err << path << ".command[0]: \"" << argv.front() << "\" is not found on PATH\n";
    return false;
  }
  return true;
}

}  // namespace

int runLocally(const RunOptions& options, std::ostream& out, std::ostream& err) {
  const auto text = readJob(options.jobFile, err);
  if (!text) {
    return kExitBadInput;
  }
  auto decoded = api::decodeYaml(*text);
  if (!decoded) {
    for (const auto& error : decoded.error()) {
      err << api::format(error) << "\n";
    }
    return kExitBadInput;
  }
  for (const auto& warning : decoded->warnings) {
    err << "note: " << api::format(warning) << "\n";
  }
  api::AutotuneJob job = std::move(decoded->job);
  if (job.spec.resources.nodesPerTrial > 1) {
    err << "spec.resources.nodesPerTrial is " << job.spec.resources.nodesPerTrial
        << ": autotune run runs every trial on this one machine; multi-node trials run on "
           "Kubernetes (kubectl apply the job for the operator), or set it to 1\n";
    return kExitBadInput;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; nothing here sets variables
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string gpuText = options.gpus.value_or(visible != nullptr ? visible : "");
  if (gpuText.empty()) {
    err << "no GPUs given: pass --gpus (e.g. --gpus 0-15) or set CUDA_VISIBLE_DEVICES\n";
    return kExitBadInput;
  }
  auto gpus = parseGpuList(gpuText);
  if (!gpus) {
    err << "--gpus: " << gpus.error() << "\n";
    return kExitBadInput;
  }
  if (static_cast<int>(gpus->size()) < job.spec.resources.gpusPerTrial) {
    err << "a trial needs " << job.spec.resources.gpusPerTrial
        << " GPUs (spec.resources.gpusPerTrial) but only " << gpus->size() << " are given\n";
    return kExitBadInput;
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read at start-up; nothing here sets variables
  const char* path = std::getenv("PATH");
  const std::string searchPath =
      options.toolsDirectory + ":" + (path != nullptr ? path : "/usr/bin:/bin");
  if (!commandRuns(job, searchPath, err)) {
    return kExitBadInput;
  }
  auto results = ResultsDirectory::open(options.resultsDirectory, job);
  if (!results) {
    err << results.error() << "\n";
    return kExitBadInput;
  }
  if (options.resume && results->records().empty()) {
    err << "--resume: " << options.resultsDirectory << " holds no finished trials to resume\n";
    return kExitBadInput;
  }
  Progress progress(out, options.terminal, job.spec.search.metric);
  LocalRun run(std::move(job), std::move(*results), GpuSlots(std::move(*gpus)), searchPath,
               progress);
  return run.execute(out);
}

}  // namespace autotune::executor
