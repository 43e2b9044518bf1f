#include "executor/results_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "api/codec.h"
#include "api/labels.h"
#include "api/text.h"
#include "tuning/naming.h"
#include "tuning/results.h"

namespace autotune::executor {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kLockFile = ".lock";

std::string systemError(const std::string& what) {
  return what + ": " + std::generic_category().message(errno);
}

nlohmann::json recordJson(const api::TrialRecord& record, int launchIndex) {
  api::Status status;
  status.results = {record};
  nlohmann::json encoded = api::encode(status)["results"][0];
  encoded["launchIndex"] = launchIndex;
  return encoded;
}

// A run killed a moment ago can leave the lock to a trial it was starting: until that child execs
// (or sees its parent gone and exits), it holds a copy of the lock's descriptor. So a run that
// finds the lock taken looks again for a second before it says the directory is in use.
bool lockWithinGrace(int fd) {
  constexpr auto kGrace = std::chrono::seconds(1);
  constexpr auto kPoll = std::chrono::milliseconds(20);
  const auto deadline = std::chrono::steady_clock::now() + kGrace;
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

}  // namespace

std::string specIdentity(const api::Spec& spec) {
  nlohmann::json identity = api::encode(spec);
  for (const auto* field :
       {"parallelism", "maxFailedTrials", "trialTimeout", "schedulingTimeout"}) {
    identity.erase(field);
  }
  identity["search"].erase("maxTrials");
  return tuning::fnv1aHex(identity.dump());
}

tl::expected<void, std::string> writeFileAtomically(const fs::path& path,
                                                    const std::string& content) {
  // A name made for this write (mkstemp: created exclusively, never a file or link someone left
  // at a name known beforehand), in the target's folder so that the rename stays within it.
  const fs::path folder = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::string temporary = (folder / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) {
    return tl::unexpected(systemError("cannot write a temporary file beside " + path.string()));
  }
  const auto failed = [&](const std::string& what) {
    auto error = tl::unexpected(systemError(what));
    ::close(fd);
    ::unlink(temporary.c_str());
    return error;
  };
  if (::fchmod(fd, 0644) != 0) {
    return failed("cannot make " + temporary + " readable");
  }
  std::size_t written = 0;
  while (written < content.size()) {
    const auto count = ::write(fd, content.data() + written, content.size() - written);
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      return failed("cannot write " + temporary);
    }
    written += static_cast<std::size_t>(count);
  }
  if (::fsync(fd) != 0) {
    return failed("cannot flush " + temporary);
  }
  if (::close(fd) != 0) {
    ::unlink(temporary.c_str());
    return tl::unexpected(systemError("cannot flush " + temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    auto error = tl::unexpected(systemError("cannot replace " + path.string()));
    ::unlink(temporary.c_str());
    return error;
  }
  return {};
}

tl::expected<ResultsDirectory, std::string> ResultsDirectory::open(const fs::path& root,
                                                                   const api::AutotuneJob& job) {
  std::error_code error;
  fs::create_directories(root / "results", error);
  if (!error) {
    fs::create_directories(root / "exps", error);
  }
  if (error) {
    return tl::unexpected("cannot create results directory " + root.string() + ": " +
                          error.message());
  }
  const fs::path lockPath = root / kLockFile;
  const int lockFd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd < 0) {
    return tl::unexpected(systemError("cannot write to results directory " + root.string()));
  }
  if (!lockWithinGrace(lockFd)) {
    ::close(lockFd);
    return tl::unexpected("results directory " + root.string() +
                          " is in use by another autotune run");
  }
  ResultsDirectory directory(root, lockFd, job.name(), specIdentity(job.spec),
                             job.spec.resources.gpusPerTrial);
  if (auto loaded = directory.load(); !loaded) {
    return tl::unexpected(loaded.error());
  }
  return directory;
}

ResultsDirectory::ResultsDirectory(ResultsDirectory&& other) noexcept
    : root_(std::move(other.root_)),
      lockFd_(std::exchange(other.lockFd_, -1)),
      jobName_(std::move(other.jobName_)),
      specHash_(std::move(other.specHash_)),
      gpusPerTrial_(other.gpusPerTrial_),
      records_(std::move(other.records_)),
      launchIndexes_(std::move(other.launchIndexes_)),
      measured_(other.measured_),
      nextLaunchIndex_(other.nextLaunchIndex_) {}

ResultsDirectory::~ResultsDirectory() {
  if (lockFd_ >= 0) {
    ::close(lockFd_);  // releases the lock
  }
}

tl::expected<void, std::string> ResultsDirectory::load() {
  const fs::path path = root_ / api::kOutputResultsFile;
  // A fresh directory is one of no trials from the start: a search that can launch none (nothing
  // fits) is still one that `autotune report` draws.
  if (!fs::exists(path)) {
    return save();
  }
  const auto text = api::readText(path);
  if (!text) {
    return tl::unexpected(path.string() + " cannot be read");
  }
  const nlohmann::json saved = nlohmann::json::parse(*text, nullptr, false);
  if (saved.is_discarded() || !saved.is_object()) {
    return tl::unexpected(path.string() + " is not valid JSON; move it away to start over");
  }
  const std::string savedJob = saved.value("job", "");
  if (savedJob != jobName_ || saved.value("specIdentity", "") != specHash_) {
    return tl::unexpected("results directory " + root_.string() + " holds the results of " +
                          (savedJob == jobName_ ? "a different spec of job " : "job ") + savedJob +
                          "; use another --results directory");
  }
  nlohmann::json status = {{"results", saved.value("trials", nlohmann::json::array())}};
  for (auto& trial : status["results"]) {
    launchIndexes_.push_back(trial.value("launchIndex", 0));
    trial.erase("launchIndex");
  }
  if (saved.contains("model")) {
    status["model"] = saved["model"];
  }
  auto decoded = api::decodeStatus(status);
  if (!decoded) {
    return tl::unexpected(path.string() + ": " + api::format(decoded.error().front()));
  }
  records_ = std::move(decoded->results);
  measured_ = decoded->model;
  nextLaunchIndex_ = launchIndexes_.empty()
                         ? 0
                         : *std::max_element(launchIndexes_.begin(), launchIndexes_.end()) + 1;
  return {};
}

tl::expected<void, std::string> ResultsDirectory::save() const {
  nlohmann::json saved = {{"apiVersion", api::kApiVersion},
                          {"job", jobName_},
                          {"specIdentity", specHash_},
                          {"trials", nlohmann::json::array()}};
  for (std::size_t i = 0; i < records_.size(); ++i) {
    saved["trials"].push_back(recordJson(records_[i], launchIndexes_[i]));
  }
  if (measured_) {
    api::Status status;
    status.model = measured_;
    saved["model"] = api::encode(status)["model"];
  }
  api::Status status;
  status.gpuHours = gpuHours();
  saved["gpuHours"] = api::encode(status)["gpuHours"];
  return writeFileAtomically(root_ / api::kOutputResultsFile, saved.dump(2) + "\n");
}

TrialPaths ResultsDirectory::pathsFor(const tuning::Trial& trial) const {
  TrialPaths paths;
  paths.directory = fs::absolute(root_ / "results" / trial.name);
  paths.protocol.config = (paths.directory / "ds_config.json").string();
  paths.protocol.metrics =
      (paths.directory / (trial.profile ? "model_info.json" : "metrics.json")).string();
  paths.stdoutLog = paths.directory / "stdout.log";
  paths.stderrLog = paths.directory / "stderr.log";
  return paths;
}

tl::expected<void, std::string> ResultsDirectory::prepareTrial(
    const tuning::Trial& trial, const nlohmann::json& launchConfig,
    const std::vector<std::string>& command, const std::string& gpus) const {
  const TrialPaths paths = pathsFor(trial);
  std::error_code error;
  fs::remove_all(paths.directory, error);
  if (!error) {
    fs::create_directories(paths.directory, error);
  }
  if (error) {
    return tl::unexpected("cannot create " + paths.directory.string() + ": " + error.message());
  }
  const nlohmann::json experiment = {{"name", trial.name},
                                     {"space", trial.space},
                                     {"ds_config", launchConfig},
                                     {"gpus", gpus},
                                     {"command", command}};
  for (const auto& [path, content] : std::vector<std::pair<fs::path, std::string>>{
           {paths.protocol.config, launchConfig.dump(2) + "\n"},
           {paths.directory / "cmd.txt", tuning::shellJoin(command) + "\n"},
           {root_ / "exps" / (trial.name + ".json"), experiment.dump(2) + "\n"}}) {
    if (auto written = writeFileAtomically(path, content); !written) {
      return tl::unexpected(written.error());
    }
  }
  return {};
}

tl::expected<void, std::string> ResultsDirectory::record(
    const api::TrialRecord& record, int launchIndex,
    const std::optional<api::MeasuredModel>& measured) {
  const auto position = std::upper_bound(launchIndexes_.begin(), launchIndexes_.end(), launchIndex);
  const auto offset = position - launchIndexes_.begin();
  launchIndexes_.insert(position, launchIndex);
  records_.insert(records_.begin() + offset, record);
  if (measured) {
    measured_ = measured;
  }
  nextLaunchIndex_ = std::max(nextLaunchIndex_, launchIndex + 1);
  return save();
}

tl::expected<void, std::string> ResultsDirectory::writeFailure(const std::string& summary) {
  // What an earlier, successful run of the directory wrote is no longer its outcome.
  std::error_code ignored;
  fs::remove(optimalConfigPath(), ignored);
  fs::remove(root_ / "cmd_optimal.txt", ignored);
  return writeFileAtomically(root_ / api::kOutputSummaryFile,
                             summary + tuning::gpuHoursLine(gpuHours()) + "\n");
}

tl::expected<void, std::string> ResultsDirectory::writeOutcome(const tuning::Report& report) {
  for (const auto& [path, content] : std::vector<std::pair<fs::path, std::string>>{
           {root_ / api::kOutputSummaryFile,
            report.summary + tuning::gpuHoursLine(gpuHours()) + "\n"},
           {optimalConfigPath(), report.config},
           {root_ / "cmd_optimal.txt", report.command + "\n"}}) {
    if (auto written = writeFileAtomically(path, content); !written) {
      return tl::unexpected(written.error());
    }
  }
  return {};
}

}  // namespace autotune::executor
