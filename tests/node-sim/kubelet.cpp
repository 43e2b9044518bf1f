#include "kubelet.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "k8s/resources.h"
#include "log.h"
#include "nodes.h"
#include "object/read.h"

namespace autotune::nodesim {
namespace {

using k8s::kPods;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// Every Pod bound to some Node; ours are picked out by name. One watch serves any number of Nodes.
constexpr const char* kBoundPods = "spec.nodeName!=";
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kRetryDelay = std::chrono::seconds(1);
constexpr std::size_t kWriters = 8;  // API writes made at once
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Runs inside `unshare --mount --propagation private`, so its mounts are the container's alone.
// Arguments: SOURCE TARGET rw|ro ... -- WORKDIR COMMAND ARGS...; a mount point missing on this
// host is made (an empty folder or file, the same for every Pod). Setup failures exit 125 with
// the reason in the container's log.
constexpr const char* kContainerScript = R"sh(exec 2>&1
while [ "$1" != -- ]; do
  if [ -d "$1" ]; then mkdir -p "$2"; elif [ ! -e "$2" ]; then mkdir -p "$(dirname "$2")" && : >"$2"; fi &&
    mount --bind "$1" "$2" && { [ "$3" = rw ] || mount -o remount,bind,ro "$2"; } || exit 125
  shift 3
done
mkdir -p "$2" && cd "$2" || exit 125
shift 2
exec "$@"
)sh";

std::string text(const json& object, const char* name) {
  const auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

const json& metadataOf(const json& pod) {
  static const json kNone = json::object();
  const auto found = pod.find("metadata");
  return found != pod.end() && found->is_object() ? *found : kNone;
}

std::string uidOf(const json& pod) { return text(metadataOf(pod), "uid"); }

std::string nameOf(const json& pod) {
  return text(metadataOf(pod), "namespace") + "/" + text(metadataOf(pod), "name");
}

const json& firstContainer(const json& pod) {
  static const json kNone = json::object();
  const auto spec = pod.find("spec");
  if (spec == pod.end() || !spec->contains("containers") || !(*spec)["containers"].is_array() ||
      (*spec)["containers"].empty()) {
    return kNone;
  }
  return (*spec)["containers"][0];
}

std::string joined(const std::vector<std::string>& words) {
  std::string line;
  for (const auto& word : words) {
    line += (line.empty() ? "" : " ") + word;
  }
  return line;
}

Outcome startFailure(const std::string& message) {
  const std::string time = now();
  // What container runtimes report for a container that could not be started.
  return {128, std::nullopt, "StartError", message, time, time};
}

}  // namespace

void Kubelet::push(Seen seen) {
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(std::move(seen));
  }
  wake_.notify_one();
}

bool Kubelet::ours(const json& pod) const {
  const auto spec = pod.find("spec");
  return spec != pod.end() && spec->is_object() && options_.nodes.contains(text(*spec, "nodeName"));
}

void Kubelet::watch(const std::stop_token& stop) {
  std::mutex pauseMutex;
  std::condition_variable_any pause;
  const auto wait = [&](auto delay) {
    std::unique_lock lock(pauseMutex);
    pause.wait_for(lock, stop, delay, [] { return false; });
  };
  while (!stop.stop_requested()) {
    k8s::ListOptions listOptions;
    listOptions.fieldSelector = kBoundPods;
    auto list = watcher_.list(kPods, "", listOptions);
    if (!list) {
      logLine("listing pods failed: " + k8s::describe(list.error()));
      wait(kRetryDelay);
      continue;
    }
    Seen listed{Seen::Kind::kListed, {}, {}};
    for (auto& pod : (*list)["items"]) {
      if (ours(pod)) {
        listed.listedUids.insert(uidOf(pod));
        push({Seen::Kind::kPod, std::move(pod), {}});
      }
    }
    push(std::move(listed));
    std::string version = text(metadataOf(*list), "resourceVersion");
    while (!stop.stop_requested()) {
      k8s::WatchOptions watchOptions;
      watchOptions.resourceVersion = version;
      watchOptions.fieldSelector = kBoundPods;
      watchOptions.stop = stop;
      auto watched = watcher_.watch(kPods, "", watchOptions, [&](const k8s::WatchEvent& event) {
        if (const auto seenVersion = text(metadataOf(event.object), "resourceVersion");
            !seenVersion.empty()) {
          version = seenVersion;
        }
        if (event.type != "BOOKMARK" && ours(event.object)) {
          push({event.type == "DELETED" ? Seen::Kind::kGone : Seen::Kind::kPod, event.object, {}});
        }
        return !stop.stop_requested();
      });
      if (!watched) {
        // 410 Gone: the version is too old. Anything else may have lost events. Either way the
        // list is the truth again.
        logLine("watching pods ended: " + k8s::describe(watched.error()) + "; listing again");
        if (watched.error().kind != k8s::ErrorKind::kGone) {
          wait(kRetryDelay);
        }
        break;
      }
    }
  }
}

void Kubelet::run(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    std::deque<Seen> seen;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, stop, kTick, [this] { return !queue_.empty(); });
      seen.swap(queue_);
    }
    for (auto& one : seen) {
      apply(one);
    }
    for (auto entry = runs_.begin(); entry != runs_.end();) {
      if (step(entry->second)) {
        ++entry;
      } else {
        finished_.insert(entry->first);
        entry = runs_.erase(entry);
      }
    }
    writeDue();
  }
  stopAll();
}

void Kubelet::apply(const Seen& seen) {
  switch (seen.kind) {
    case Seen::Kind::kPod:
      see(seen.pod);
      return;
    case Seen::Kind::kGone:
      if (const auto found = runs_.find(uidOf(seen.pod)); found != runs_.end()) {
        found->second.gone = true;
      }
      return;
    case Seen::Kind::kListed:
      for (auto& [uid, run] : runs_) {
        if (!seen.listedUids.contains(uid)) {
          run.gone = true;
        }
      }
      return;
  }
}

void Kubelet::see(const json& pod) {
  const std::string uid = uidOf(pod);
  if (uid.empty() || finished_.contains(uid)) {
    return;
  }
  auto [entry, isNew] = runs_.try_emplace(uid);
  Run& run = entry->second;
  run.pod = pod;
  if (metadataOf(pod).contains("deletionTimestamp")) {
    run.deleting = true;
  }
  if (!isNew) {
    return;
  }
  run.uid = uid;
  run.folder = options_.workDir / (text(metadataOf(pod), "namespace") + "_" +
                                   text(metadataOf(pod), "name") + "_" + uid);
  const json status = pod.value("status", json::object());
  const std::string phase = text(status, "phase");
  if (phase == "Succeeded" || phase == "Failed") {
    run.runningReported = true;
    run.terminalReported = true;
    run.outcome = Outcome{};
    return;
  }
  const json containers = status.value("containerStatuses", json::array());
  if (!containers.empty() && containers[0].value("state", json::object()).contains("running")) {
    // Started before this simulator did: the process went with its predecessor. The kubelet
    // reports a container it cannot find so.
    run.startedAt = containers[0]["state"]["running"].value("startedAt", now());
    run.outcome = Outcome{137,
                          std::nullopt,
                          "ContainerStatusUnknown",
                          "The container could not be located when the pod was terminated",
                          run.startedAt,
                          now()};
    logLine("pod " + nameOf(pod) + " was running before this node simulator started: failing it");
    return;
  }
  run.wantStart = !run.deleting;
}

bool Kubelet::step(Run& run) {
  reap(run);
  const bool running = run.process && !run.outcome;
  if (run.gone) {
    if (running) {
      stopProcess(run);
      return true;
    }
    return false;
  }
  if (run.deleting) {
    if (running) {
      stopProcess(run);
    }
    return true;  // forgotten when the API server says it is gone
  }
  if (run.wantStart) {
    run.wantStart = false;
    start(run);
  }
  return true;
}

Kubelet::Write Kubelet::dueWrite(const Run& run) {
  if (run.gone || Clock::now() < run.retryAt) {
    return Write::kNone;
  }
  const bool running = run.process && !run.outcome;
  if (run.deleting) {
    return running || run.deleteConfirmed ? Write::kNone : Write::kDeletion;
  }
  if (run.pullFailure && !run.waitingReported) {
    return Write::kWaiting;
  }
  if (running && !run.runningReported) {
    return Write::kRunning;
  }
  if (run.outcome && !run.terminalReported) {
    return Write::kTerminal;
  }
  return Write::kNone;
}

void Kubelet::writeDue() {
  std::vector<std::pair<Run*, Write>> due;
  for (auto& [uid, run] : runs_) {
    if (const Write write = dueWrite(run); write != Write::kNone) {
      due.emplace_back(&run, write);
    }
  }
  const auto perform = [this](Run& run, Write write) {
    switch (write) {
      case Write::kWaiting:
        run.waitingReported = report(run, write);
        return;
      case Write::kRunning:
        run.runningReported = report(run, write);
        return;
      case Write::kTerminal:
        run.terminalReported = report(run, write);
        return;
      case Write::kDeletion:
        confirmDeletion(run);
        return;
      case Write::kNone:
        return;
    }
  };
  // Each writer takes the next due Pod until none is left: one writer per Pod, so that a Pod's
  // writes keep their order, and several Pods at once, as the kubelets of several Nodes would.
  std::atomic<std::size_t> next{0};
  const auto writer = [&] {
    for (std::size_t index = next++; index < due.size(); index = next++) {
      perform(*due[index].first, due[index].second);
    }
  };
  std::vector<std::jthread> writers;
  for (std::size_t count = 1; count < std::min(due.size(), kWriters); ++count) {
    writers.emplace_back(writer);
  }
  writer();
}

int Kubelet::claimedGpus(const json& pod, const json& container) const {
  if (options_.draDriver.empty()) {
    return 0;
  }
  const std::string ns = object::text(object::metadataOf(pod), "namespace");
  int devices = 0;
  for (const auto& used : object::member(object::member(container, "resources"), "claims")) {
    for (const auto& claimed :
         object::member(object::member(pod, "status"), "resourceClaimStatuses")) {
      if (object::text(claimed, "name") != object::text(used, "name")) {
        continue;
      }
      auto claim =
          writer_.get(k8s::kResourceClaims, ns, object::text(claimed, "resourceClaimName"));
      if (!claim) {
        logLine("cannot read ResourceClaim " + object::text(claimed, "resourceClaimName") + ": " +
                k8s::describe(claim.error()));
        continue;
      }
      const json& allocation = object::member(object::member(*claim, "status"), "allocation");
      for (const auto& result : object::member(object::member(allocation, "devices"), "results")) {
        devices += object::text(result, "driver") == options_.draDriver ? 1 : 0;
      }
    }
  }
  return devices;
}

void Kubelet::start(Run& run) const {
  const json& container = firstContainer(run.pod);
  const std::string name = nameOf(run.pod);
  const auto fail = [&](const std::string& why) {
    run.outcome = startFailure(why);
    run.startedAt = run.outcome->startedAt;
    logLine("pod " + name + " cannot start: " + why);
  };
  if (auto pullFailure = imagePullFailure(container)) {
    logLine("pod " + name + " waits: " + *pullFailure);
    run.pullFailure = std::move(pullFailure);
    run.startedAt = now();
    return;
  }
  std::error_code error;
  const std::filesystem::path scratch = run.folder / "workdir";
  std::filesystem::create_directories(scratch, error);
  if (error) {
    fail("cannot create " + scratch.string() + ": " + error.message());
    return;
  }
  auto environment = containerEnvironment(run.pod, container);
  if (!environment) {
    fail(environment.error());
    return;
  }
  auto command = containerCommand(container, *environment);
  if (!command) {
    fail(command.error());
    return;
  }
  auto mounts =
      prepareMounts(run.pod, container, run.folder, hostsFile(run.pod, jobCompletions(run.pod)));
  if (!mounts) {
    fail(mounts.error());
    return;
  }
  for (auto& skipped : mounts->skipped) {
    logLine("pod " + name + ": volume " + skipped.append("; not mounted"));
  }

  // A container sees its host name (spec.hostname, else the Pod's name), its GPUs, and its own
  // PATH, on which the simulator's bin folder comes first so that programs built with it
  // (trial-sim) are found.
  Environment variables{{"HOSTNAME", hostName(run.pod)}};
  const int claimed = claimedGpus(run.pod, container);
  if (claimed > 0) {
    logLine("pod " + name + " has " + std::to_string(claimed) + " GPUs of its ResourceClaims");
  }
  for (auto& device : deviceEnvironment(container, *environment, options_.gpuMemoryMiB, claimed)) {
    variables.push_back(std::move(device));
  }
  std::string path = kDefaultPath;
  for (const auto& [key, value] : *environment) {
    variables.emplace_back(key, value);
    if (key == "PATH") {
      path = value;
    }
  }
  variables.emplace_back("PATH", options_.binDir + ":" + path);

  executor::LaunchSpec spec;
  spec.argv = {"unshare", "--mount", "--propagation",  "private",
               "sh",      "-c",      kContainerScript, "node-sim-container"};
  for (const auto& mount : mounts->mounts) {
    spec.argv.insert(spec.argv.end(),
                     {mount.source.string(), mount.target, mount.readOnly ? "ro" : "rw"});
  }
  const std::string workingDir = text(container, "workingDir");
  spec.argv.insert(spec.argv.end(), {"--", workingDir.empty() ? scratch.string() : workingDir});
  spec.argv.insert(spec.argv.end(), command->begin(), command->end());
  spec.environment = std::move(variables);
  spec.workingDirectory = run.folder.string();
  spec.stdoutPath = (run.folder / "container.log").string();
  spec.stderrPath = (run.folder / "runtime.log").string();
  auto child = executor::ChildProcess::start(spec);
  if (!child) {
    fail(child.error());
    return;
  }
  run.process = *child;
  run.startedAt = now();
  logLine("started pod " + name + " on " + text(run.pod["spec"], "nodeName") +
          " as process group " + std::to_string(child->pid()) + ": " + joined(*command) + " (log " +
          spec.stdoutPath + ")");
}

std::optional<int> Kubelet::jobCompletions(const json& pod) const {
  const auto spec = pod.find("spec");
  if (spec == pod.end() || text(*spec, "subdomain").empty()) {
    return std::nullopt;
  }
  const auto job = jobMembership(pod);
  if (!job) {
    return std::nullopt;
  }
  const std::string ns = text(metadataOf(pod), "namespace");
  auto found = writer_.get(k8s::kBatchJobs, ns, job->name);
  std::string why;
  if (!found) {
    why = k8s::describe(found.error());
  } else if (!job->uid.empty() && uidOf(*found) != job->uid) {
    why = "the Job of that name is another one";
  } else {
    const json completions = found->value("spec", json::object()).value("completions", json());
    if (completions.is_number_integer() && completions.get<std::int64_t>() >= 0 &&
        completions.get<std::int64_t>() <= std::numeric_limits<int>::max()) {
      return completions.get<int>();
    }
    why = "it has no spec.completions";
  }
  const std::optional<int> known = job->index ? std::optional(*job->index + 1) : std::nullopt;
  logLine("pod " + nameOf(pod) + ": cannot read job " + ns + "/" + job->name + " (" + why +
          "); its hosts file names the indexes up to the pod's own");
  return known;
}

void Kubelet::reap(Run& run) {
  if (!run.process || run.outcome) {
    return;
  }
  const auto exited = run.process->poll();
  if (!exited) {
    return;
  }
  // The container's other processes end with it, as they would with its cgroup.
  run.process->signalGroup(SIGKILL);
  std::filesystem::path log = run.folder / "container.log";
  std::error_code error;
  if (std::filesystem::file_size(log, error) == 0) {
    log = run.folder / "runtime.log";  // unshare itself failed before the container's log opened
  }
  run.outcome = exitOutcome(firstContainer(run.pod), exited->exitCode, exited->signal,
                            run.folder / "termination-log", log);
  run.outcome->startedAt = run.startedAt;
  run.outcome->finishedAt = now();
  logLine("pod " + nameOf(run.pod) + " exited with code " + std::to_string(run.outcome->exitCode) +
          " (" + run.outcome->reason + ")");
}

void Kubelet::stopProcess(Run& run) const {
  const auto time = Clock::now();
  if (!run.terminatedAt) {
    run.process->signalGroup(SIGTERM);
    run.terminatedAt = time;
    logLine("pod " + nameOf(run.pod) + (run.gone ? " is gone" : " is being deleted") +
            ": SIGTERM to process group " + std::to_string(run.process->pid()));
  } else if (!run.killed && time - *run.terminatedAt >= options_.killGrace) {
    run.process->signalGroup(SIGKILL);
    run.killed = true;
    logLine("pod " + nameOf(run.pod) + ": SIGKILL to process group " +
            std::to_string(run.process->pid()) + " after the grace period");
  }
}

bool Kubelet::report(Run& run, Write write) {
  const std::string ns = text(metadataOf(run.pod), "namespace");
  const std::string name = text(metadataOf(run.pod), "name");
  // The Pod as last seen is most often the Pod as it is: it is read again only after a conflict.
  json current = run.pod;
  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    if (attempt > 0) {
      auto fresh = writer_.get(kPods, ns, name);
      if (!fresh && fresh.error().kind == k8s::ErrorKind::kNotFound) {
        return true;  // nothing left to report on
      }
      if (!fresh) {
        logLine("reading pod " + nameOf(run.pod) + " failed: " + k8s::describe(fresh.error()));
        break;
      }
      if (uidOf(*fresh) != run.uid) {
        return true;  // another Pod of the same name
      }
      current = std::move(*fresh);
    }
    json& status = current["status"];
    if (!status.is_object()) {
      status = json::object();
    }
    if (write == Write::kTerminal) {
      markTerminated(status, current, *run.outcome, std::string(kHostIp));
    } else if (write == Write::kWaiting) {
      markWaiting(status, current, "ErrImagePull", *run.pullFailure, run.startedAt,
                  std::string(kHostIp));
    } else {
      markRunning(status, current, run.startedAt, std::string(kHostIp));
    }
    auto written = writer_.updateStatus(kPods, ns, current);
    if (written) {
      logLine("pod " + nameOf(run.pod) + " is " + text(status, "phase"));
      run.pod = std::move(*written);
      return true;
    }
    if (written.error().kind == k8s::ErrorKind::kNotFound) {
      return true;
    }
    if (written.error().kind != k8s::ErrorKind::kConflict) {
      logLine("writing the status of pod " + nameOf(run.pod) +
              " failed: " + k8s::describe(written.error()));
      break;
    }
  }
  run.retryAt = Clock::now() + kRetryDelay;
  return false;
}

void Kubelet::confirmDeletion(Run& run) {
  const std::string ns = text(metadataOf(run.pod), "namespace");
  const std::string name = text(metadataOf(run.pod), "name");
  // The API server keeps a bound Pod, Terminating, until its kubelet says its containers have
  // stopped by deleting it again with no grace period.
  auto removed = writer_.remove(kPods, ns, name, k8s::Propagation::kBackground, 0);
  if (removed || removed.error().kind == k8s::ErrorKind::kNotFound) {
    run.deleteConfirmed = true;
    logLine("pod " + nameOf(run.pod) + " stopped; deletion confirmed");
    return;
  }
  logLine("confirming the deletion of pod " + nameOf(run.pod) +
          " failed: " + k8s::describe(removed.error()));
  run.retryAt = Clock::now() + kRetryDelay;
}

void Kubelet::stopAll() {
  const auto alive = [this] {
    std::vector<Run*> running;
    for (auto& [uid, run] : runs_) {
      reap(run);
      if (run.process && !run.outcome) {
        running.push_back(&run);
      }
    }
    return running;
  };
  for (Run* run : alive()) {
    run->process->signalGroup(SIGTERM);
    logLine("stopping pod " + nameOf(run->pod) + ": SIGTERM to process group " +
            std::to_string(run->process->pid()));
  }
  const auto deadline = Clock::now() + options_.killGrace;
  while (Clock::now() < deadline && !alive().empty()) {
    std::this_thread::sleep_for(kTick);
  }
  for (Run* run : alive()) {
    run->process->signalGroup(SIGKILL);
    logLine("pod " + nameOf(run->pod) + ": SIGKILL to process group " +
            std::to_string(run->process->pid()));
    run->process->wait();
  }
}

}  // namespace autotune::nodesim
