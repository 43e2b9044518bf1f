// autotune: the command-line face of the tuning engine.
//   autotune plan FILE        the trials a job would run, with memory estimates and what is pruned
//   autotune run FILE         the search with trials as local processes (see executor/local_run.h)
//   autotune report RESULTS   a picture of a search's results (see report/report.h)
// Installed as kubectl-autotune (a link to it), it is a kubectl plugin: see kubectl_plugin.cpp.

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "api/codec.h"
#include "api/text.h"
#include "commands.h"
#include "executor/local_run.h"
#include "executor/results_directory.h"
#include "report/report.h"
#include "tuning/engine.h"
#include "tuning/memory_model.h"
#include "tuning/naming.h"

namespace {

using autotune::api::AutotuneJob;
using autotune::api::Spec;
namespace tuning = autotune::tuning;

using autotune::cli::Flag;
using autotune::cli::kExitUsage;
constexpr int kExitInvalid = 2;
// A plan that cannot start, as a search that failed.
constexpr int kExitFailure = 1;

constexpr std::string_view kUsage =
    "usage: autotune plan [-f] FILE\n"
    "       autotune run [-f] FILE [--gpus LIST] [--results DIR] [--resume]\n"
    "       autotune report RESULTS [--job FILE] [-o html|svg] [--output-file OUT]\n"
    "       autotune --version\n"
    "\n"
    "  plan    print the memory estimate per ZeRO stage, the largest micro-batch each is expected\n"
    "          to fit, and the trials the job's strategy would launch first\n"
    "  run     run the search with each trial a local process on its own GPUs\n"
    "  report  draw a search's results\n"
    "\n"
    "FILE may be - (standard input). 'autotune VERB --help' describes a verb's flags.\n";

constexpr std::string_view kRunUsage =
    "usage: autotune run [-f] FILE [flags]\n"
    "\n"
    "Runs the search of the job in FILE (- for standard input) with each trial a local process on\n"
    "its own GPUs. Re-running on the same results directory resumes without running a finished\n"
    "trial again.\n";

constexpr std::string_view kReportUsage =
    "usage: autotune report RESULTS [flags]\n"
    "\n"
    "Draws a search. RESULTS is a results directory of autotune run, a results.json (autotune\n"
    "run's or the output ConfigMap's), or the output ConfigMap itself (kubectl get configmap NAME\n"
    "-o yaml).\n";

std::string precisionName(tuning::Precision precision) {
  switch (precision) {
    case tuning::Precision::kFp16:
      return "fp16";
    case tuning::Precision::kBf16:
      return "bf16";
    case tuning::Precision::kFp32:
      return "fp32";
    case tuning::Precision::kHalfAuto:
      return "\"auto\" (the training script decides; the memory model assumes 16-bit mixed "
             "precision)";
  }
  return "fp32";
}

// The dotted paths of the "auto" values of a space's base config, which every trial keeps for
// the training script to fill (the base has no batch keys: those are tuned).
void collectAutoKeys(const nlohmann::json& value, const std::string& prefix,
                     std::vector<std::string>& paths) {
  for (const auto& [key, child] : value.items()) {
    std::string path = prefix;
    path += prefix.empty() ? "" : ".";
    path += key;
    if (child.is_object()) {
      collectAutoKeys(child, path, paths);
    } else if (child == "auto") {
      paths.push_back(path);
    }
  }
}

void printGlobalBatch(const tuning::TuningSpace& space) {
  const int dataParallel = space.parallelism.dataParallel();
  if (!space.fixedTrainBatch) {
    std::cout << "Global batch " << (space.trainBatchAuto ? "\"auto\", left to the script" : "free")
              << ": micro-batch x gradient accumulation x " << dataParallel
              << " data-parallel ranks\n";
    return;
  }
  std::cout << "Global batch fixed at " << *space.fixedTrainBatch
            << " (train_batch_size): micro-batch x gradient accumulation x " << dataParallel
            << " data-parallel ranks; micro-batch candidates (gradient accumulation):";
  const tuning::MicroBatchLadder& ladder = space.microBatches;
  for (const int microBatch :
       ladder.between(space.search.minMicroBatchSize, space.search.maxMicroBatchSize)) {
    std::cout << ' ' << microBatch << " (" << ladder.gradientAccumulationFor(microBatch, 1) << ")";
  }
  std::cout << "\n";
}

std::string row(const std::vector<std::string>& cells, const std::vector<int>& widths) {
  std::string line;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    line += cells[i];
    if (i + 1 < cells.size()) {
      line += std::string(
          static_cast<std::size_t>(std::max(1, widths[i] - static_cast<int>(cells[i].size()))),
          ' ');
    }
  }
  return line + "\n";
}

tuning::EngineInput firstQuestion(const AutotuneJob& job, int freeSlots) {
  tuning::EngineInput input;
  input.spec = job.spec;
  input.jobUid = job.uid();
  input.freeSlots = freeSlots;
  return input;
}

// " on 2 nodes (8 each)" for a multi-node trial.
std::string nodesOf(const autotune::api::Resources& resources) {
  if (resources.nodesPerTrial <= 1) {
    return "";
  }
  return " on " + std::to_string(resources.nodesPerTrial) + " nodes (" +
         std::to_string(resources.gpusPerNode()) + " each)";
}

void printHeader(const AutotuneJob& job, const tuning::TuningSpace& space) {
  const Spec& spec = job.spec;
  std::cout << "Job " << (job.namespaceName().empty() ? "" : job.namespaceName() + "/")
            << job.name() << ": strategy " << autotune::api::toString(spec.search.strategy)
            << (spec.search.strategy == autotune::api::Strategy::kDeepSpeed
                    ? (spec.search.fast ? " (fast)" : " (full)")
                    : "")
            << ", metric " << autotune::api::toString(spec.search.metric) << ", "
            << spec.resources.gpusPerTrial << " GPUs per trial" << nodesOf(spec.resources)
            << " (data-parallel " << space.parallelism.dataParallel() << "), up to "
            << spec.parallelism << " trials at once, at most " << spec.search.maxTrials
            << " trials\n";
  if (!spec.queueName.empty()) {
    std::cout << "Queue: Kueue LocalQueue " << spec.queueName
              << " (spec.queueName); Kueue admits its trials as the queue's quota allows\n";
  }
  std::cout << "Precision " << precisionName(tuning::precisionOf(space.base)) << "; ZeRO stages";
  for (const int stage : space.stages) {
    std::cout << ' ' << stage;
  }
  std::cout << "; tuned keys:";
  for (const auto& dimension : space.dimensions) {
    std::cout << ' ' << dimension.path << " (" << dimension.values.size() << ")";
  }
  std::cout << (space.dimensions.empty() ? " none" : "") << "\n";
  printGlobalBatch(space);
  std::vector<std::string> autoKeys;
  collectAutoKeys(space.base, "", autoKeys);
  if (!autoKeys.empty()) {
    constexpr std::size_t kWidth = 100;
    std::string line = "Kept \"auto\" for the training script to fill:";
    for (std::size_t i = 0; i < autoKeys.size(); ++i) {
      const std::string word = " " + autoKeys[i] + (i + 1 < autoKeys.size() ? "," : "");
      if (line.size() + word.size() > kWidth) {
        std::cout << line << "\n";
        line = " ";
      }
      line += word;
    }
    std::cout << line << "\n";
  }
  std::cout << "\n";
}

void printWarnings(const autotune::api::FieldErrors& warnings) {
  if (warnings.empty()) {
    return;
  }
  std::cout << "Notes on the spec (accepted, but worth a look):\n";
  for (const auto& warning : warnings) {
    std::cout << "  " << autotune::api::format(warning) << "\n";
  }
  std::cout << "\n";
}

void printMemory(const AutotuneJob& job, const tuning::TuningSpace& space) {
  const Spec& spec = job.spec;
  if (!spec.model.numParameters) {
    std::cout << "Model size not given: a profiling trial (" << tuning::kProfileTrialName
              << ", ZeRO-3, micro-batch 1) runs first and measures it.\n\n";
    return;
  }
  const tuning::ModelSize model{*spec.model.numParameters, spec.model.activationMemoryPerSample};
  std::cout << "Memory per GPU for " << *spec.model.numParameters << " parameters";
  if (spec.resources.gpuMemory) {
    std::cout << " on GPUs of " << spec.resources.gpuMemory->text() << " ("
              << tuning::formatBytes(static_cast<double>(spec.resources.gpuMemory->value())) << ")";
  } else {
    std::cout << " (GPU memory not given: the operator reads the nodes' nvidia.com/gpu.memory "
                 "label)";
  }
  std::cout << ":\n";
  const std::vector<int> widths = {7, 12, 12, 12, 12, 14, 12, 6};
  std::cout << row({"stage", "parameters", "gradients", "optimizer", "overhead", "model states",
                    "per sample", "fits", "largest micro-batch"},
                   widths);
  for (const int stage : space.stages) {
    const tuning::Trial trial =
        tuning::makeFastTrial(space, stage, 1, space.gradientAccumulation.first(1));
    const tuning::MemoryEstimate estimate =
        tuning::estimateMemory(model, trial.config, space.parallelism);
    std::string fits = "?";
    std::string largest = "?";
    if (spec.resources.gpuMemory) {
      const auto micro = tuning::largestMicroBatch(estimate, spec.resources.gpuMemory->value());
      const double atOne = estimate.total(1).value_or(estimate.modelStates());
      fits = atOne <= static_cast<double>(spec.resources.gpuMemory->value()) ? "yes" : "no";
      largest = micro ? std::to_string(*micro) : "? (activation memory unknown)";
    }
    std::cout << row(
        {std::to_string(stage), tuning::formatBytes(estimate.parameters),
         tuning::formatBytes(estimate.gradients), tuning::formatBytes(estimate.optimizerStates),
         tuning::formatBytes(estimate.overhead), tuning::formatBytes(estimate.modelStates()),
         estimate.activationsPerSample ? tuning::formatBytes(*estimate.activationsPerSample) : "?",
         fits, largest},
        widths);
  }
  std::cout << "\n";
}

void printFirstTrials(const AutotuneJob& job, const tuning::Decision& first) {
  const Spec& spec = job.spec;
  std::cout << "First trials (" << first.launch.size() << " at once):\n";
  for (const auto& trial : first.launch) {
    std::cout << "  " << trial.name << "  (pod " << tuning::podName(job.name(), trial.name)
              << ")\n";
  }
  if (spec.search.strategy != autotune::api::Strategy::kDeepSpeed) {
    std::cout << "\nAll " << first.trials.size() << " configurations after pruning, in "
              << (spec.search.strategy == autotune::api::Strategy::kGrid ? "the order they run"
                                                                         : "grid order")
              << ":\n";
    for (const auto& trial : first.trials) {
      std::cout << "  " << trial.name << "\n";
    }
  } else {
    std::cout << "\nLater trials depend on these results: the search screens each stage at the "
                 "micro-batch the\nmemory model expects to fit, searches the best stage's "
                 "micro-batch, then gives stages\nthat came close one probe at the same memory "
                 "use.\n";
  }
}

// Whether the search can start: when it cannot, says why instead of listing trials.
bool printTrials(const AutotuneJob& job) {
  const Spec& spec = job.spec;
  const tuning::Decision first = tuning::decide(firstQuestion(job, spec.parallelism));
  const bool starts = first.state != tuning::Decision::State::kFailed;
  if (!starts) {
    std::cout << "The search cannot start: " << first.message << "\n";
  } else {
    printFirstTrials(job, first);
  }
  std::cout << "\nPruned (" << first.pruned.size() << "):\n";
  for (const auto& pruned : first.pruned) {
    std::cout << "  " << pruned.name << ": " << pruned.reason << "\n";
  }
  return starts;
}

int planJob(const std::string& path) {
  const auto text = autotune::api::readText(path);
  if (!text) {
    std::cerr << path << ": cannot be read\n";
    return kExitInvalid;
  }
  const auto decoded = autotune::api::decodeYaml(*text);
  if (!decoded) {
    for (const auto& error : decoded.error()) {
      std::cerr << autotune::api::format(error) << "\n";
    }
    return kExitInvalid;
  }
  const AutotuneJob& job = decoded->job;
  const tuning::TuningSpace space = tuning::describeSpace(job.spec);
  printHeader(job, space);
  printWarnings(decoded->warnings);
  printMemory(job, space);
  return printTrials(job) ? 0 : kExitFailure;
}

// The directory of this executable: tools installed beside it (trial-sim) are put on the trials'
// PATH.
std::string ownDirectory() {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string() : self.parent_path().string();
}

int run(const std::vector<std::string>& args) {
  autotune::executor::RunOptions options;
  options.toolsDirectory = ownDirectory();
  options.terminal = isatty(STDOUT_FILENO) != 0;
  std::string file;
  const std::vector<Flag> flags{
      autotune::cli::jobFileFlag(file),
      {"gpus", 0, "LIST", "GPUs to use, e.g. 0-15 or 0,1,2 (default: CUDA_VISIBLE_DEVICES)",
       [&](const std::string& value) {
         options.gpus = value;
         return std::optional<std::string>();
       }},
      {"results", 0, "DIR", "the results directory (default: autotune_results)",
       [&](const std::string& value) {
         options.resultsDirectory = value;
         return std::optional<std::string>();
       }},
      {"resume", 0, "", "fail unless DIR already holds finished trials of this job",
       [&](const std::string& value) {
         options.resume = value == "true";
         return std::optional<std::string>();
       }}};
  const auto line = autotune::cli::parseCommandLine(args, flags);
  if (const auto answered =
          autotune::cli::answeredAlone(line, "autotune", "run", kRunUsage, flags)) {
    return *answered;
  }
  auto job = autotune::cli::oneJobFile(file, line->arguments, "autotune", "run");
  if (!job) {
    return kExitUsage;
  }
  options.jobFile = *job;
  return autotune::executor::runLocally(options, std::cout, std::cerr);
}

// The job given with --job, or nothing; false after saying why it cannot be used.
bool readReportJob(const std::string& path, std::optional<AutotuneJob>& job) {
  const auto text = autotune::api::readText(path);
  if (!text) {
    std::cerr << "--job " << path << ": cannot be read\n";
    return false;
  }
  auto decoded = autotune::api::decodeJobYaml(*text);
  if (!decoded) {
    for (const auto& error : decoded.error()) {
      std::cerr << "--job " << path << ": " << autotune::api::format(error) << "\n";
    }
    return false;
  }
  job = std::move(*decoded);
  return true;
}

int report(const std::vector<std::string>& args) {
  std::string jobFile;
  autotune::cli::ReportOutput output;
  std::vector<Flag> flags{{"job", 0, "FILE",
                           "the job that ran the search: its metric, the memory model's "
                           "estimates and what it pruned",
                           [&](const std::string& value) {
                             jobFile = value;
                             return std::optional<std::string>();
                           }}};
  for (auto& flag : autotune::cli::reportOutputFlags(output)) {
    flags.push_back(std::move(flag));
  }
  const auto line = autotune::cli::parseCommandLine(args, flags);
  if (const auto answered =
          autotune::cli::answeredAlone(line, "autotune", "report", kReportUsage, flags)) {
    return *answered;
  }
  if (line->arguments.size() != 1) {
    std::cerr << "autotune report: "
              << (line->arguments.empty() ? "RESULTS is missing" : "one RESULTS only")
              << "\nSee 'autotune report --help'.\n";
    return kExitUsage;
  }
  const std::string& source = line->arguments.front();
  const auto results = autotune::report::loadResults(source);
  if (!results) {
    std::cerr << results.error() << "\n";
    return kExitInvalid;
  }
  std::optional<AutotuneJob> job;
  if (!jobFile.empty() && !readReportJob(jobFile, job)) {
    return kExitInvalid;
  }
  if (job && !results->jobName.empty() && results->jobName != job->name()) {
    std::cerr << "note: --job " << jobFile << " is job " << job->name() << ", and " << source
              << " holds the results of job " << results->jobName << "\n";
  }
  return autotune::cli::writeReport(*results, job, output);
}

}  // namespace

namespace autotune::cli {

int planVerb(const std::vector<std::string>& args, std::string_view program) {
  std::string file;
  const std::vector<Flag> flags{jobFileFlag(file)};
  const std::string usage = "usage: " + std::string(program) +
                            " plan [-f] FILE\n"
                            "\n"
                            "Prints the memory estimate per ZeRO stage of the job in FILE (- for "
                            "standard input),\nthe largest micro-batch each is expected to fit, "
                            "and the trials the job's strategy\nwould launch first.\n";
  const auto line = parseCommandLine(args, flags);
  if (const auto answered = answeredAlone(line, program, "plan", usage, flags)) {
    return *answered;
  }
  const auto job = oneJobFile(file, line->arguments, program, "plan");
  return job ? planJob(*job) : kExitUsage;
}

std::vector<Flag> reportOutputFlags(ReportOutput& output) {
  return {{"output", 'o', "FORMAT", "html (default): the whole report; svg: the chart alone",
           [&output](const std::string& value) -> std::optional<std::string> {
             const auto format = report::parseFormat(value);
             if (!format) {
               return "must be html or svg, not \"" + value + "\"";
             }
             output.format = *format;
             return std::nullopt;
           }},
          {"output-file", 0, "FILE", "write to FILE (default: standard output)",
           [&output](const std::string& value) {
             output.file = value;
             return std::optional<std::string>();
           }}};
}

int writeReport(const report::SearchResults& results, const std::optional<api::AutotuneJob>& job,
                const ReportOutput& output) {
  return writeRendered(report::renderReport(results, job, output.format), output);
}

int writeRendered(const std::string& rendered, const ReportOutput& output) {
  if (output.file == "-") {
    std::cout << rendered;
    return std::cout.flush() ? 0 : 1;
  }
  if (auto written = executor::writeFileAtomically(output.file, rendered); !written) {
    std::cerr << written.error() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace autotune::cli

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (argc > 0 && std::filesystem::path(argv[0]).filename() == "kubectl-autotune") {
    return autotune::cli::kubectlPlugin(args);
  }
  const std::string verb = args.empty() ? "" : args.front();
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (verb == "--help" || verb == "-h" || verb == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (verb == "--version") {
    std::cout << autotune::cli::versionLine("autotune");
    return 0;
  }
  if (verb == "plan") {
    return autotune::cli::planVerb(rest, "autotune");
  }
  if (verb == "run") {
    return run(rest);
  }
  if (verb == "report") {
    return report(rest);
  }
  std::cerr << (verb.empty() ? "" : "autotune: unknown verb \"" + verb + "\"\n") << kUsage;
  return kExitUsage;
}
