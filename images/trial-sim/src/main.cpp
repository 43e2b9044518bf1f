// trial-sim: one DeepSpeed training launch under autotuning, simulated. It reads the config the
// way DeepSpeed does (once Hugging Face's Trainer has filled its "auto" values, when the launch
// is a Trainer's), sleeps like a launch, and ends the way the run would: a model report, the
// metrics file, or PyTorch's out-of-memory error. A multi-node launch is one process per node
// meeting over TCP (rendezvous.h). The decisions are in the library; this file only reads and
// writes.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "deepspeed_config.h"
#include "options.h"
#include "profile.h"
#include "rendezvous.h"
#include "simulation.h"
#include "trainer_config.h"

namespace {

using autotune::trialsim::CheckedConfig;
using autotune::trialsim::Environment;
using autotune::trialsim::LaunchResult;
using autotune::trialsim::Options;
using autotune::trialsim::Profile;
using autotune::trialsim::RankOutcome;
using autotune::trialsim::Rendezvous;

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

std::optional<std::string> variable(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read before any thread
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

Environment processEnvironment() {
  return {variable("AUTOTUNE_DS_CONFIG"),         variable("CUDA_VISIBLE_DEVICES"),
          variable("AUTOTUNE_SIM_LAUNCH_LOG"),    variable("AUTOTUNE_TRIAL"),
          variable("AUTOTUNE_SIM_SEED"),          variable("AUTOTUNE_NUM_NODES"),
          variable("AUTOTUNE_NODE_RANK"),         variable("AUTOTUNE_MASTER_ADDR"),
          variable("AUTOTUNE_MASTER_PORT"),       variable("AUTOTUNE_SIM_OOM_RANK"),
          variable("AUTOTUNE_SIM_GPU_MEMORY_MIB")};
}

std::string systemError() {
  return std::strerror(errno);  // NOLINT(concurrency-mt-unsafe): single-threaded
}

tl::expected<std::string, std::string> readFile(const std::string& path) {
  const std::ifstream file(path);
  if (!file) {
    return tl::unexpected("cannot read " + path + ": " + systemError());
  }
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

tl::expected<void, std::string> writeFile(const std::string& path, const std::string& text) {
  std::ofstream file(path, std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    return tl::unexpected("cannot write " + path + ": " + systemError());
  }
  return {};
}

// One write() on an O_APPEND descriptor: concurrent launches never interleave their lines.
tl::expected<void, std::string> appendLine(const std::string& path, const std::string& line) {
  const int file = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (file < 0) {
    return tl::unexpected("cannot open launch log " + path + ": " + systemError());
  }
  const ssize_t written = ::write(file, line.data(), line.size());
  ::close(file);
  if (written != static_cast<ssize_t>(line.size())) {
    return tl::unexpected("cannot append to launch log " + path);
  }
  return {};
}

void sleepSeconds(double seconds) {
  if (seconds > 0) {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
}

tl::expected<Profile, std::string> loadProfile(const Options& options) {
  if (!options.profileFile) {
    return autotune::trialsim::builtInProfile(options.profileName.value_or("gpt2-large"));
  }
  const auto text = readFile(*options.profileFile);
  if (!text) {
    return tl::unexpected(text.error());
  }
  const nlohmann::json document = nlohmann::json::parse(*text, nullptr, false);
  if (document.is_discarded()) {
    return tl::unexpected(*options.profileFile + ": not valid JSON");
  }
  auto profile = autotune::trialsim::profileFromJson(document);
  if (!profile) {
    return tl::unexpected(*options.profileFile + ": " + profile.error());
  }
  return profile;
}

tl::expected<nlohmann::json, std::string> loadConfig(const Options& options,
                                                     const Environment& environment) {
  const auto path = autotune::trialsim::configPath(options, environment);
  if (!path) {
    return tl::unexpected(
        std::string("no DeepSpeed config: pass --deepspeed FILE or --deepspeed_config FILE, or set "
                    "AUTOTUNE_DS_CONFIG"));
  }
  const auto text = readFile(*path);
  if (!text) {
    return tl::unexpected(text.error());
  }
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::parse_error& error) {
    return tl::unexpected("json.decoder.JSONDecodeError: " + *path + ": " + error.what());
  }
}

int fail(const std::string& message, int status) {
  std::cerr << message << "\n";
  return status;
}

// Writes what the launch ended with, and returns its exit status.
int finish(const LaunchResult& result, const CheckedConfig& config, const Options& options) {
  if (const auto* outOfMemory = std::get_if<autotune::trialsim::OutOfMemory>(&result)) {
    return fail(outOfMemory->message, kExitFailed);
  }
  if (const auto* report = std::get_if<autotune::trialsim::ModelReport>(&result)) {
    const auto written = writeFile(config.outputs.modelInfoPath, toJson(*report).dump() + "\n");
    if (!written) {
      return fail(written.error(), kExitFailed);
    }
    std::cout << "Autotuning: model info written to " << config.outputs.modelInfoPath << "\n";
    return 0;
  }
  const auto& measurement = std::get<autotune::trialsim::Measurement>(result);
  nlohmann::json written = toJson(measurement);
  if (options.reportsEffectiveValues) {
    written["effective"] = effectiveValues(config.run);
  }
  const std::string metrics =
      options.garbageMetrics ? std::string("<<< not a metrics file >>>\n") : written.dump() + "\n";
  if (const auto written = writeFile(config.outputs.metricPath, metrics); !written) {
    return fail(written.error(), kExitFailed);
  }
  std::cout << "Autotuning: done with running current ds config.\n";
  return 0;
}

std::string helpText() {
  std::string names;
  for (const auto& profile : autotune::trialsim::builtInProfiles()) {
    names += (names.empty() ? "" : ", ") + profile.name;
  }
  return autotune::trialsim::usage() + "\nBuilt-in profiles: " + names + "\n";
}

// The checked config and what training on it ends with, or the error that stopped it first.
struct Trained {
  CheckedConfig config;
  LaunchResult result;
};

tl::expected<Trained, std::string> train(const Options& options, const Profile& profile,
                                         const nlohmann::json& document,
                                         const autotune::trialsim::Parallelism& parallelism,
                                         std::uint64_t seed, bool outOfMemory) {
  // A Hugging Face Trainer fills the config's "auto" values before DeepSpeed reads it.
  const auto handedOver =
      autotune::trialsim::applyTrainerArguments(document, options.trainer, parallelism);
  if (!handedOver) {
    return tl::unexpected(handedOver.error());
  }
  nlohmann::json given = *handedOver;
  if (options.runMicroBatch && given.is_object()) {
    given["train_micro_batch_size_per_gpu"] = *options.runMicroBatch;
    given.erase("train_batch_size");
  }
  if (options.runStage && given.is_object()) {
    given["zero_optimization"]["stage"] = *options.runStage;
  }
  auto config = autotune::trialsim::checkConfig(given, parallelism);
  if (!config) {
    return tl::unexpected(config.error());
  }
  LaunchResult result = outOfMemory ? autotune::trialsim::outOfMemoryAnyway(profile, config->run)
                                    : autotune::trialsim::simulate(profile, *config, seed);
  return Trained{std::move(*config), std::move(result)};
}

RankOutcome outcomeOf(const tl::expected<Trained, std::string>& trained) {
  if (!trained) {
    return {kExitFailed, trained.error()};
  }
  if (const auto* outOfMemory = std::get_if<autotune::trialsim::OutOfMemory>(&trained->result)) {
    return {kExitFailed, outOfMemory->message};
  }
  return {};
}

int run(const std::vector<std::string>& arguments) {
  const Environment environment = processEnvironment();
  const auto options = autotune::trialsim::parseArguments(arguments);
  if (!options) {
    return fail(options.error() + "\n(trial-sim --help shows the usage)", kExitUsage);
  }
  if (options->help) {
    std::cout << helpText();
    return 0;
  }
  const auto group = autotune::trialsim::nodeGroup(environment);
  if (!group) {
    return fail(group.error(), kExitUsage);
  }
  const auto outOfMemoryRank = autotune::trialsim::outOfMemoryRank(*options, environment);
  if (!outOfMemoryRank) {
    return fail(outOfMemoryRank.error(), kExitUsage);
  }
  const int rank = *group ? (*group)->rank : 0;
  // The ranks of a multi-node launch are one launch: rank 0 logs it for all of them.
  if (const auto log = autotune::trialsim::launchLogPath(*options, environment); log && rank == 0) {
    if (const auto appended = appendLine(*log, autotune::trialsim::launchLine(environment));
        !appended) {
      return fail(appended.error(), kExitUsage);
    }
  }
  auto profile = loadProfile(*options);
  if (!profile) {
    return fail(profile.error(), kExitUsage);
  }
  const auto gpuMemory = autotune::trialsim::gpuMemoryBytes(environment);
  if (!gpuMemory) {
    return fail(gpuMemory.error(), kExitUsage);
  }
  if (*gpuMemory) {
    profile->gpuMemoryBytes = **gpuMemory;
  }
  const auto seed = autotune::trialsim::environmentSeed(environment);
  if (!seed) {
    return fail(seed.error(), kExitUsage);
  }
  sleepSeconds(options->startupSeconds);
  if (options->failWith) {
    return fail(*options->failWith, kExitFailed);
  }
  const auto document = loadConfig(*options, environment);
  if (!document) {
    return fail(document.error(), kExitFailed);
  }
  // DeepSpeed learns the world size from torch.distributed, before it checks the config.
  std::optional<Rendezvous> rendezvous;
  if (*group) {
    auto joined = Rendezvous::join(**group, options->rendezvousTimeout);
    if (!joined) {
      return fail(joined.error(), kExitFailed);
    }
    rendezvous = std::move(*joined);
  }
  const autotune::trialsim::Parallelism parallelism{
      autotune::trialsim::worldSize(*options, environment, *profile, *group ? (*group)->nodes : 1),
      options->modelParallelSize};
  const auto trained = train(*options, *profile, *document, parallelism, *seed,
                             outOfMemoryRank->has_value() && **outOfMemoryRank == rank);
  if (trained) {
    sleepSeconds(options->stepSeconds);
  }
  if (rendezvous) {
    const RankOutcome own = outcomeOf(trained);
    const auto concluded = rendezvous->conclude(own);
    if (own.status == 0 && !concluded) {
      return fail(concluded.error(), kExitFailed);
    }
    if (own.status == 0 && rank != 0) {
      std::cout << "Autotuning: node rank " << rank << " done; rank 0 writes the results.\n";
      return 0;
    }
  }
  if (!trained) {
    return fail(trained.error(), kExitFailed);
  }
  return finish(trained->result, trained->config, *options);
}

}  // namespace

int main(int argc, char** argv) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-bounds-pointer-arithmetic): argv is an array
  const std::vector<std::string> arguments(argv + 1, argv + argc);
  return run(arguments);
}
