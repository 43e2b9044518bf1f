#pragma once
// The kubelet part of the node simulator: runs the first container of each Pod bound to one of
// its Nodes as a local process, reports the Pod's status as a kubelet does, and stops the process
// when the Pod is deleted.
//
// Two threads: watch() lists and watches Pods and only queues what it saw; run() owns every
// process, so that starting, waiting for and killing processes all happen on one thread. run()
// makes the writes (status, deletion) with a few writer threads at a time, as the kubelets of
// several Nodes would, one writer per Pod so that a Pod's writes keep their order.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

#include "container.h"
#include "executor/process.h"
#include "k8s/client.h"

namespace autotune::nodesim {

struct KubeletOptions {
  std::set<std::string> nodes;
  std::filesystem::path workDir;  // one folder per Pod: its log, termination message, volumes
  std::string binDir;             // put first on each process's PATH
  std::int64_t gpuMemoryMiB = 0;  // of each GPU of the nodes: deviceEnvironment
  std::string draDriver;          // whose devices of a Pod's ResourceClaims are its GPUs
  std::chrono::milliseconds killGrace{3000};  // from SIGTERM to SIGKILL
};

class Kubelet {
 public:
  // `writer` is used by run(), `watcher` by watch(): each thread has a client of its own.
  Kubelet(const k8s::Client& writer, const k8s::Client& watcher, KubeletOptions options)
      : writer_(writer), watcher_(watcher), options_(std::move(options)) {}

  // Lists the Pods bound to a Node (fieldSelector spec.nodeName!=, then filtered by our Nodes),
  // watches from the list's resourceVersion, and lists again after an error, until `stop`.
  void watch(const std::stop_token& stop);
  // Acts on what watch() saw until `stop`, then stops every process it started.
  void run(const std::stop_token& stop);

 private:
  struct Seen {
    enum class Kind { kPod, kGone, kListed } kind;
    nlohmann::json pod;                // kPod, kGone
    std::set<std::string> listedUids;  // kListed: the Pods a fresh list holds
  };

  // One Pod this Node has seen, from first sight until it is gone.
  struct Run {
    nlohmann::json pod;  // as last seen
    std::string uid;
    std::filesystem::path folder;
    bool wantStart = false;
    std::optional<executor::ChildProcess> process;
    std::optional<Outcome> outcome;          // once the container ended (or could not start)
    std::optional<std::string> pullFailure;  // the image cannot be pulled: it waits for ever
    bool waitingReported = false;
    std::string startedAt;
    bool runningReported = false;
    bool terminalReported = false;
    bool deleting = false;  // metadata.deletionTimestamp is set
    bool gone = false;      // no longer in the API
    bool deleteConfirmed = false;
    std::optional<std::chrono::steady_clock::time_point> terminatedAt;  // SIGTERM sent
    bool killed = false;                                                // SIGKILL sent
    std::chrono::steady_clock::time_point retryAt{};                    // after a failed write
  };

  void push(Seen seen);
  bool ours(const nlohmann::json& pod) const;
  void apply(const Seen& seen);
  void see(const nlohmann::json& pod);
  // The one API write a Pod waits for, if any.
  enum class Write { kNone, kWaiting, kRunning, kTerminal, kDeletion };

  // Moves one Pod's process on; false once the Pod can be forgotten.
  bool step(Run& run);
  static Write dueWrite(const Run& run);
  // Makes every due write, several Pods' at once.
  void writeDue();
  void start(Run& run) const;
  // The devices of options_.draDriver allocated to the ResourceClaims the container names, as
  // the driver's kubelet plugin would prepare them: the Pod's claims are named in its
  // status.resourceClaimStatuses, and each claim's allocation lists its devices.
  int claimedGpus(const nlohmann::json& pod, const nlohmann::json& container) const;
  // For a Pod with spec.subdomain in an Indexed Job, the Job's spec.completions, which its hosts
  // file needs: the Pod names its Job and its own index but not how many Pods the Job has, and the
  // Pods seen so far are no count, as the Job controller creates them one by one. Read from the
  // API server once per Pod start. When the Job cannot be read (it is gone, the API server does
  // not answer) the Pod's own index + 1, so that the file still names rank 0 and the Pod itself.
  std::optional<int> jobCompletions(const nlohmann::json& pod) const;
  void reap(Run& run);
  void stopProcess(Run& run) const;
  // Writes the Pod's status as `write` (kWaiting, kRunning or kTerminal) says.
  bool report(Run& run, Write write);
  void confirmDeletion(Run& run);
  void stopAll();

  const k8s::Client& writer_;
  const k8s::Client& watcher_;
  KubeletOptions options_;

  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::deque<Seen> queue_;

  // Owned by run()'s thread.
  std::map<std::string, Run> runs_;  // by uid
  std::set<std::string> finished_;   // uids forgotten: never started again
};

}  // namespace autotune::nodesim
