#include "container.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <system_error>

namespace autotune::nodesim {
namespace {

using nlohmann::json;

// The kubelet's limits (pkg/kubelet/container/runtime.go).
constexpr std::size_t kMaxMessageBytes = 4096;
constexpr std::size_t kMaxLogTailBytes = 2048;
constexpr int kMaxLogTailLines = 80;
constexpr int kSignalExitBase = 128;

const json kEmptyObject = json::object();
// A fallback that outlives every reference member() returns to it.
const json kNull;
const json kEmptyArray = json::array();

const json& member(const json& object, const char* name, const json& fallback = kEmptyObject) {
  if (!object.is_object()) {
    return fallback;
  }
  const auto found = object.find(name);
  return found == object.end() || found->is_null() ? fallback : *found;
}

std::string text(const json& object, const char* name) {
  const json& value = member(object, name, kNull);
  return value.is_string() ? value.get<std::string>() : std::string();
}

// The key of "metadata.annotations['key']" (or with double quotes), if `path` has that form.
std::optional<std::string> subscript(const std::string& path, const std::string& prefix) {
  if (!path.starts_with(prefix + "[") || path.size() < prefix.size() + 5 || path.back() != ']') {
    return std::nullopt;
  }
  const char quote = path[prefix.size() + 1];
  if ((quote != '\'' && quote != '"') || path[path.size() - 2] != quote) {
    return std::nullopt;
  }
  return path.substr(prefix.size() + 2, path.size() - prefix.size() - 4);
}

// The downward API's rendering of a whole map: key="value" lines, sorted, values quoted.
std::string renderMap(const json& map) {
  std::string rendered;
  for (const auto& [key, value] : map.items()) {
    rendered +=
        key + "=" + json(value.is_string() ? value.get<std::string>() : value.dump()).dump() + "\n";
  }
  return rendered;
}

tl::expected<void, std::string> writeFile(const std::filesystem::path& path,
                                          const std::string& content) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) {
    return tl::unexpected("cannot write " + path.string());
  }
  return {};
}

// Writes the downward API items of one volume (or projected source) into `directory`.
tl::expected<void, std::string> writeDownwardItems(const json& pod, const json& items,
                                                   const std::filesystem::path& directory,
                                                   std::vector<std::string>& skipped) {
  for (const auto& item : items) {
    const std::string path = text(item, "path");
    const json& fieldRef = member(item, "fieldRef");
    if (fieldRef.empty()) {
      skipped.push_back(path + ": only fieldRef items are simulated");
      continue;
    }
    auto value = fieldValue(pod, text(fieldRef, "fieldPath"));
    if (!value) {
      return tl::unexpected(value.error());
    }
    if (auto written = writeFile(directory / path, *value); !written) {
      return written;
    }
  }
  return {};
}

// Creates volume `name` under `root` and returns its folder, or nullopt (with a note in
// `skipped`) for a kind the simulator does not provide.
tl::expected<std::optional<std::filesystem::path>, std::string> materialise(
    const json& pod, const json& volume, const std::filesystem::path& root,
    std::vector<std::string>& skipped) {
  const std::string name = text(volume, "name");
  const std::filesystem::path directory = root / name;
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) {
    return tl::unexpected("cannot create " + directory.string() + ": " + error.message());
  }
  if (volume.contains("emptyDir")) {
    return directory;
  }
  if (volume.contains("downwardAPI")) {
    auto written = writeDownwardItems(pod, member(volume["downwardAPI"], "items", kEmptyArray),
                                      directory, skipped);
    if (!written) {
      return tl::unexpected(written.error());
    }
    return directory;
  }
  if (volume.contains("projected")) {
    for (const auto& source : member(volume["projected"], "sources", kEmptyArray)) {
      if (!source.contains("downwardAPI")) {
        skipped.push_back(name + ": only downwardAPI sources of projected volumes are simulated");
        continue;
      }
      auto written = writeDownwardItems(pod, member(source["downwardAPI"], "items", kEmptyArray),
                                        directory, skipped);
      if (!written) {
        return tl::unexpected(written.error());
      }
    }
    return directory;
  }
  std::string kind = "unknown";
  for (const auto& [key, value] : volume.items()) {
    if (key != "name") {
      kind = key;
    }
  }
  skipped.push_back(name + ": " + kind + " volumes are not simulated");
  return std::optional<std::filesystem::path>();
}

void setCondition(json& status, const std::string& type, bool value, const std::string& reason,
                  const std::string& now) {
  if (!status.contains("conditions") || !status["conditions"].is_array()) {
    status["conditions"] = json::array();
  }
  const std::string wanted = value ? "True" : "False";
  for (auto& condition : status["conditions"]) {
    if (text(condition, "type") == type) {
      if (text(condition, "status") != wanted) {
        condition["lastTransitionTime"] = now;
      }
      condition["status"] = wanted;
      condition["lastProbeTime"] = nullptr;
      if (reason.empty()) {
        condition.erase("reason");
      } else {
        condition["reason"] = reason;
      }
      return;
    }
  }
  json condition = {
      {"type", type}, {"status", wanted}, {"lastProbeTime", nullptr}, {"lastTransitionTime", now}};
  if (!reason.empty()) {
    condition["reason"] = reason;
  }
  status["conditions"].push_back(std::move(condition));
}

std::string containerId(const json& pod) {
  return "node-sim://" + text(member(pod, "metadata"), "uid");
}

// One status per container of the spec; only the first is ever run.
json containerStatuses(const json& pod, const json& firstState, bool running) {
  json statuses = json::array();
  bool first = true;
  for (const auto& container : member(member(pod, "spec"), "containers", kEmptyArray)) {
    json status = {{"name", text(container, "name")},
                   {"image", text(container, "image")},
                   {"imageID", ""},
                   {"restartCount", 0}};
    if (first) {
      status["containerID"] = containerId(pod);
      status["ready"] = running;
      status["started"] = running;
      status["state"] = firstState;
    } else {
      status["ready"] = false;
      status["started"] = false;
      status["state"] = {{"waiting",
                          {{"reason", "NotSimulated"},
                           {"message", "the node simulator runs only a Pod's first container"}}}};
    }
    statuses.push_back(std::move(status));
    first = false;
  }
  return statuses;
}

void setHost(json& status, const std::string& hostIp) {
  status["hostIP"] = hostIp;
  status["hostIPs"] = json::array({{{"ip", hostIp}}});
}

constexpr const char* kCompletionIndex = "batch.kubernetes.io/job-completion-index";
constexpr const char* kClusterDomain = "cluster.local";

std::optional<int> completionIndex(const std::string& text) {
  int index = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || index < 0) {
    return std::nullopt;
  }
  return index;
}

// 127.x.y.z from a 64-bit FNV-1a hash of `key`: 2^16 × 254 addresses, enough that two Jobs
// running at once practically never share one.
std::string loopbackAddress(const std::string& key) {
  constexpr std::uint64_t kOffsetBasis = 14695981039346656037ULL;
  constexpr std::uint64_t kPrime = 1099511628211ULL;
  constexpr std::uint64_t kByte = 0xff;
  std::uint64_t hash = kOffsetBasis;
  for (const char letter : key) {
    hash ^= static_cast<unsigned char>(letter);
    hash *= kPrime;
  }
  const std::uint64_t second = (hash >> 8U) & kByte;
  const std::uint64_t third = (hash >> 16U) & kByte;
  std::uint64_t last = 1 + (hash >> 24U) % 254;  // neither the network's .0 nor broadcast's .255
  if (second == 0 && third == 0 && last == 1) {
    last = 2;  // 127.0.0.1 is every process's localhost
  }
  return "127." + std::to_string(second) + "." + std::to_string(third) + "." + std::to_string(last);
}

}  // namespace

std::string hostName(const json& pod) {
  const std::string hostname = text(member(pod, "spec"), "hostname");
  return hostname.empty() ? text(member(pod, "metadata"), "name") : hostname;
}

std::optional<JobMembership> jobMembership(const json& pod) {
  const json& metadata = member(pod, "metadata");
  const json& labels = member(metadata, "labels");
  JobMembership job;
  for (const auto& owner : member(metadata, "ownerReferences", kEmptyArray)) {
    if (text(owner, "kind") == "Job" && text(owner, "apiVersion").starts_with("batch/") &&
        member(owner, "controller", json(false)) == true) {
      job.name = text(owner, "name");
      job.uid = text(owner, "uid");
    }
  }
  // The labels are the Job controller's own marks; an owner reference may be missing from a Pod
  // orphaned by a deletion that keeps its Pods.
  for (const char* key : {"job-name", "batch.kubernetes.io/job-name"}) {
    if (const std::string name = text(labels, key); !name.empty()) {
      job.name = name;
    }
  }
  for (const char* key : {"controller-uid", "batch.kubernetes.io/controller-uid"}) {
    if (const std::string uid = text(labels, key); job.uid.empty() && !uid.empty()) {
      job.uid = uid;
    }
  }
  if (job.name.empty()) {
    return std::nullopt;
  }
  for (const char* map : {"labels", "annotations"}) {
    if (const auto index = completionIndex(text(member(metadata, map), kCompletionIndex))) {
      job.index = index;
    }
  }
  return job;
}

std::string jobAddress(const std::string& namespaceName, const JobMembership& job) {
  return loopbackAddress(job.uid.empty() ? "job:" + namespaceName + "/" + job.name : job.uid);
}

std::optional<std::string> hostsFile(const json& pod, std::optional<int> completions) {
  const std::string subdomain = text(member(pod, "spec"), "subdomain");
  if (subdomain.empty()) {
    return std::nullopt;
  }
  const json& metadata = member(pod, "metadata");
  const std::string ns = text(metadata, "namespace");
  const std::string self = hostName(pod);
  const auto job = jobMembership(pod);
  std::vector<std::string> hosts;
  if (job && completions) {
    for (int index = 0; index < *completions; ++index) {
      hosts.push_back(job->name + "-" + std::to_string(index));
    }
  }
  if (std::find(hosts.begin(), hosts.end(), self) == hosts.end()) {
    hosts.push_back(self);
  }
  // A Pod no Job controls has no peers to share an address with.
  const std::string address =
      job ? jobAddress(ns, *job) : loopbackAddress("pod:" + ns + "/" + text(metadata, "name"));
  std::string file =
      "# Kubernetes-managed hosts file (autotune-node-sim).\n"
      "127.0.0.1\tlocalhost\n"
      "::1\tlocalhost ip6-localhost ip6-loopback\n";
  for (const auto& host : hosts) {
    std::string inService = host;
    inService.append(".").append(subdomain);
    std::string inCluster = inService;
    inCluster.append(".").append(ns).append(".svc");
    file.append(address).append("\t").append(host).append(" ").append(inService).append(" ");
    file.append(inCluster).append(" ").append(inCluster).append(".").append(kClusterDomain);
    file.append("\n");
  }
  return file;
}

tl::expected<std::string, std::string> fieldValue(const json& pod, const std::string& fieldPath) {
  const json& metadata = member(pod, "metadata");
  if (fieldPath == "metadata.name") {
    return text(metadata, "name");
  }
  if (fieldPath == "metadata.namespace") {
    return text(metadata, "namespace");
  }
  if (fieldPath == "metadata.uid") {
    return text(metadata, "uid");
  }
  if (fieldPath == "spec.nodeName" || fieldPath == "spec.serviceAccountName") {
    return text(member(pod, "spec"), fieldPath.substr(5).c_str());
  }
  if (fieldPath == "status.hostIP" || fieldPath == "status.podIP") {
    return text(member(pod, "status"), fieldPath.substr(7).c_str());
  }
  if (fieldPath == "metadata.annotations") {
    return renderMap(member(metadata, "annotations"));
  }
  if (fieldPath == "metadata.labels") {
    return renderMap(member(metadata, "labels"));
  }
  for (const char* map : {"annotations", "labels"}) {
    if (const auto key = subscript(fieldPath, std::string("metadata.") + map)) {
      return text(member(metadata, map), key->c_str());
    }
  }
  return tl::unexpected("the field " + fieldPath + " is not simulated");
}

std::string expandReferences(std::string_view text, const Environment& variables) {
  std::string expanded;
  std::size_t at = 0;
  while (at < text.size()) {
    if (text[at] == '$' && at + 1 < text.size()) {
      if (text[at + 1] == '$') {
        expanded += '$';
        at += 2;
        continue;
      }
      if (text[at + 1] == '(') {
        const auto close = text.find(')', at + 2);
        if (close == std::string_view::npos) {
          expanded += text.substr(at);
          break;
        }
        const std::string_view name = text.substr(at + 2, close - at - 2);
        const auto defined = std::find_if(variables.rbegin(), variables.rend(),
                                          [&](const auto& entry) { return entry.first == name; });
        expanded += defined == variables.rend() ? text.substr(at, close - at + 1)
                                                : std::string_view(defined->second);
        at = close + 1;
        continue;
      }
    }
    expanded += text[at];
    ++at;
  }
  return expanded;
}

tl::expected<Environment, std::string> containerEnvironment(const json& pod,
                                                            const json& container) {
  Environment environment;
  for (const auto& entry : member(container, "env", kEmptyArray)) {
    const std::string name = text(entry, "name");
    if (entry.contains("value")) {
      environment.emplace_back(name, expandReferences(text(entry, "value"), environment));
      continue;
    }
    const json& from = member(entry, "valueFrom");
    if (from.empty()) {
      environment.emplace_back(name, "");
      continue;
    }
    if (!from.contains("fieldRef")) {
      return tl::unexpected("env " + name + ": only valueFrom.fieldRef is simulated");
    }
    auto value = fieldValue(pod, text(from["fieldRef"], "fieldPath"));
    if (!value) {
      return tl::unexpected("env " + name + ": " + value.error());
    }
    environment.emplace_back(name, *value);
  }
  return environment;
}

Environment deviceEnvironment(const json& container, const Environment& environment,
                              std::int64_t gpuMemoryMiB, int claimedGpus) {
  const json& limit =
      member(member(member(container, "resources"), "limits"), "nvidia.com/gpu", kNull);
  int gpus = 0;
  if (limit.is_number_integer()) {
    gpus = limit.get<int>();
  } else if (limit.is_string()) {
    const std::string count = limit.get<std::string>();
    std::from_chars(count.data(), count.data() + count.size(), gpus);
  }
  if (gpus <= 0) {
    gpus = claimedGpus;
  }
  const bool set = std::any_of(environment.begin(), environment.end(), [](const auto& entry) {
    return entry.first == "CUDA_VISIBLE_DEVICES";
  });
  if (gpus <= 0) {
    return {};
  }
  Environment devices{{"AUTOTUNE_SIM_GPU_MEMORY_MIB", std::to_string(gpuMemoryMiB)}};
  if (!set) {
    std::string visible;
    for (int index = 0; index < gpus; ++index) {
      visible += (index == 0 ? "" : ",") + std::to_string(index);
    }
    devices.emplace_back("CUDA_VISIBLE_DEVICES", visible);
  }
  return devices;
}

tl::expected<std::vector<std::string>, std::string> containerCommand(
    const json& container, const Environment& environment) {
  std::vector<std::string> argv;
  for (const char* part : {"command", "args"}) {
    for (const auto& word : member(container, part, kEmptyArray)) {
      argv.push_back(
          expandReferences(word.is_string() ? word.get<std::string>() : word.dump(), environment));
    }
  }
  if (argv.empty()) {
    return tl::unexpected(std::string("the container has neither command nor args"));
  }
  return argv;
}

tl::expected<PreparedMounts, std::string> prepareMounts(const json& pod, const json& container,
                                                        const std::filesystem::path& folder,
                                                        const std::optional<std::string>& hosts) {
  PreparedMounts prepared;
  // Each volume is made once, whatever number of mounts name it; nullopt: not simulated.
  std::map<std::string, std::optional<std::filesystem::path>> made;
  const json& volumes = member(member(pod, "spec"), "volumes", kEmptyArray);
  for (const auto& volumeMount : member(container, "volumeMounts", kEmptyArray)) {
    const std::string name = text(volumeMount, "name");
    const auto volume = std::find_if(volumes.begin(), volumes.end(),
                                     [&](const json& v) { return text(v, "name") == name; });
    if (volume == volumes.end()) {
      return tl::unexpected("the volume mount " + name + " names no volume of the Pod");
    }
    if (!made.contains(name)) {
      auto directory = materialise(pod, *volume, folder / "volumes", prepared.skipped);
      if (!directory) {
        return tl::unexpected(directory.error());
      }
      made[name] = *directory;
    }
    if (!made[name]) {
      continue;
    }
    const std::string subPath = text(volumeMount, "subPath");
    // Downward API volumes are read-only in Kubernetes whatever the mount says.
    const bool readOnly =
        !volume->contains("emptyDir") || member(volumeMount, "readOnly", json(false)) == true;
    prepared.mounts.push_back({subPath.empty() ? *made[name] : *made[name] / subPath,
                               text(volumeMount, "mountPath"), readOnly});
  }
  if (hosts) {
    const std::filesystem::path hostsPath = folder / "hosts";
    if (auto written = writeFile(hostsPath, *hosts); !written) {
      return tl::unexpected(written.error());
    }
    prepared.mounts.push_back({hostsPath, "/etc/hosts", true});
  }
  const std::filesystem::path terminationFile = folder / "termination-log";
  if (auto written = writeFile(terminationFile, ""); !written) {
    return tl::unexpected(written.error());
  }
  std::string terminationPath = text(container, "terminationMessagePath");
  prepared.mounts.push_back(
      {terminationFile, terminationPath.empty() ? "/dev/termination-log" : terminationPath, false});
  return prepared;
}

std::string readTail(const std::filesystem::path& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) {
    return "";
  }
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t start = size > limit ? size - limit : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string content(size - start, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<std::size_t>(in.gcount()));
  return content;
}

std::string logTail(const std::filesystem::path& path) {
  std::string tail = readTail(path, kMaxLogTailBytes);
  // The last line's own newline does not start another line.
  std::size_t at = tail.size();
  if (at > 0 && tail[at - 1] == '\n') {
    --at;
  }
  int lines = 0;
  while (at > 0) {
    --at;
    if (tail[at] == '\n' && ++lines == kMaxLogTailLines) {
      return tail.substr(at + 1);
    }
  }
  return tail;
}

Outcome exitOutcome(const json& container, std::optional<int> exitCode, std::optional<int> signal,
                    const std::filesystem::path& terminationFile,
                    const std::filesystem::path& log) {
  Outcome outcome;
  outcome.signal = signal;
  outcome.exitCode = exitCode.value_or(kSignalExitBase + signal.value_or(0));
  outcome.reason = outcome.exitCode == 0 ? "Completed" : "Error";
  outcome.message = readTail(terminationFile, kMaxMessageBytes);
  if (outcome.message.empty() && outcome.exitCode != 0 &&
      text(container, "terminationMessagePolicy") == "FallbackToLogsOnError") {
    outcome.message = logTail(log);
  }
  return outcome;
}

void markRunning(json& status, const json& pod, const std::string& startedAt,
                 const std::string& hostIp) {
  status["phase"] = "Running";
  setHost(status, hostIp);
  if (text(status, "startTime").empty()) {
    status["startTime"] = startedAt;
  }
  for (const char* type :
       {"PodReadyToStartContainers", "Initialized", "ContainersReady", "Ready"}) {
    setCondition(status, type, true, "", startedAt);
  }
  status["containerStatuses"] =
      containerStatuses(pod, {{"running", {{"startedAt", startedAt}}}}, true);
}

std::optional<std::string> imagePullFailure(const json& container) {
  const std::string image = text(container, "image");
  const std::string host = image.substr(0, image.find('/'));
  constexpr std::string_view kReserved = ".invalid";
  if (host.size() <= kReserved.size() || !host.ends_with(kReserved) ||
      image.find('/') == std::string::npos) {
    return std::nullopt;
  }
  return "failed to pull and unpack image \"" + image + "\": failed to resolve reference \"" +
         image + "\": dial tcp: lookup " + host + ": no such host";
}

void markWaiting(json& status, const json& pod, const std::string& reason,
                 const std::string& message, const std::string& since, const std::string& hostIp) {
  status["phase"] = "Pending";
  setHost(status, hostIp);
  if (text(status, "startTime").empty()) {
    status["startTime"] = since;
  }
  setCondition(status, "PodReadyToStartContainers", true, "", since);
  setCondition(status, "Initialized", true, "", since);
  setCondition(status, "ContainersReady", false, "ContainersNotReady", since);
  setCondition(status, "Ready", false, "ContainersNotReady", since);
  status["containerStatuses"] =
      containerStatuses(pod, {{"waiting", {{"reason", reason}, {"message", message}}}}, false);
  status["containerStatuses"][0].erase("containerID");  // no container was made
}

void markTerminated(json& status, const json& pod, const Outcome& outcome,
                    const std::string& hostIp) {
  status["phase"] = outcome.exitCode == 0 ? "Succeeded" : "Failed";
  setHost(status, hostIp);
  if (text(status, "startTime").empty()) {
    status["startTime"] = outcome.startedAt;
  }
  setCondition(status, "PodReadyToStartContainers", false, "", outcome.finishedAt);
  setCondition(status, "Initialized", true, "", outcome.finishedAt);
  setCondition(status, "ContainersReady", false, "PodCompleted", outcome.finishedAt);
  setCondition(status, "Ready", false, "PodCompleted", outcome.finishedAt);
  json terminated = {{"exitCode", outcome.exitCode},
                     {"reason", outcome.reason},
                     {"startedAt", outcome.startedAt},
                     {"finishedAt", outcome.finishedAt},
                     {"containerID", containerId(pod)}};
  if (outcome.signal) {
    terminated["signal"] = *outcome.signal;
  }
  if (!outcome.message.empty()) {
    terminated["message"] = outcome.message;
  }
  status["containerStatuses"] = containerStatuses(pod, {{"terminated", terminated}}, false);
}

}  // namespace autotune::nodesim
