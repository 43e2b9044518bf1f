#pragma once
// Typed requests against the Kubernetes API: get, list (paginated, by label), create, update,
// patch (merge, JSON patch, server-side apply), delete (with propagation) and the status
// subresource. Objects are JSON; every failure is an Error value (error.h), never an exception.

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "k8s/error.h"
#include "k8s/transport.h"

namespace autotune::k8s {

// Which kind of object a request is about, e.g. {"", "v1", "configmaps", true} or
// {"autotune.io", "v1alpha1", "autotunejobs", true}.
struct Resource {
  std::string group;  // empty for the core group
  std::string version;
  std::string plural;
  bool namespaced = true;
};

// Keys left out wherever they appear as an answer is parsed: fields its reader never reads (a
// Node's status.images, any object's metadata.managedFields), never held even for a moment.
using OmittedKeys = std::vector<std::string>;

struct ListOptions {
  std::string labelSelector;
  std::string fieldSelector;  // e.g. spec.nodeName=node-1; what a resource supports is its own
  int limit = 0;              // 0: no limit
  std::string continueToken;
  std::string resourceVersion;
  OmittedKeys omittedKeys;
};

struct WatchOptions {
  std::string resourceVersion;  // where to start, usually a list's metadata.resourceVersion
  std::string labelSelector;
  std::string fieldSelector;
  int timeoutSeconds = 300;  // the server ends the watch after this; callers randomise it
  std::stop_token stop;      // ends the watch early, with success
  OmittedKeys omittedKeys;   // of the objects; a Status is read whole
};

// One line of a watch stream: ADDED, MODIFIED, DELETED or BOOKMARK and the object (for a bookmark,
// only its metadata.resourceVersion matters).
struct WatchEvent {
  std::string type;
  nlohmann::json object;
};

// Called with each event; returning false ends the watch.
using WatchHandler = std::function<bool(const WatchEvent& event)>;

enum class PatchType { kMerge, kJson, kApply };
enum class Propagation { kBackground, kForeground, kOrphan };

struct ApplyOptions {
  std::string fieldManager;
  bool force = false;
};

// How requests are paced and retried. The throttle (client-side QPS and burst) is the caller's:
// the runtime supplies a token bucket. Only retryable errors (error.h) are retried, after
// Retry-After when the server gave one, else after a backoff that doubles.
struct RequestPolicy {
  std::function<void()> throttle = [] {};
  int maxRetries = 3;
  std::chrono::milliseconds initialBackoff{200};
  std::chrono::milliseconds maxBackoff{5000};
  std::function<void(std::chrono::milliseconds)> sleep = [](std::chrono::milliseconds delay) {
    std::this_thread::sleep_for(delay);
  };
  // Told of every HTTP attempt, each retry and watch included (for kube_requests_total): the
  // method, WATCH for a watch, and the status code, 0 when no answer came.
  std::function<void(std::string_view verb, int code)> observe;
};

class Client {
 public:
  explicit Client(std::shared_ptr<Transport> transport, RequestPolicy policy = {})
      : transport_(std::move(transport)), policy_(std::move(policy)) {}

  // Requests made as another user (the Impersonate-User header), for RBAC checks.
  Client impersonating(std::string user) const;

  Result<nlohmann::json> get(const Resource& resource, const std::string& ns,
                             const std::string& name) const;
  // One page; its metadata.continue names the next.
  Result<nlohmann::json> list(const Resource& resource, const std::string& ns,
                              const ListOptions& options = {}) const;
  // Every page, as one list of items.
  Result<std::vector<nlohmann::json>> listAll(const Resource& resource, const std::string& ns,
                                              ListOptions options = {}) const;
  Result<nlohmann::json> create(const Resource& resource, const std::string& ns,
                                const nlohmann::json& object) const;
  // Replaces the object; its metadata.resourceVersion makes a stale write a Conflict.
  Result<nlohmann::json> update(const Resource& resource, const std::string& ns,
                                const nlohmann::json& object) const;
  Result<nlohmann::json> updateStatus(const Resource& resource, const std::string& ns,
                                      const nlohmann::json& object) const;
  Result<nlohmann::json> patch(const Resource& resource, const std::string& ns,
                               const std::string& name, PatchType type, const nlohmann::json& patch,
                               const ApplyOptions& apply = {}) const;
  // `gracePeriodSeconds` overrides the object's own; 0 deletes at once (a kubelet confirms that
  // a Pod's containers have stopped this way). A `uid` is a precondition: an object of that name
  // with another UID (made since under the same name) is left alone, a Conflict.
  Result<nlohmann::json> remove(const Resource& resource, const std::string& ns,
                                const std::string& name,
                                Propagation propagation = Propagation::kBackground,
                                std::optional<int> gracePeriodSeconds = std::nullopt,
                                const std::string& uid = "") const;

  // Streams changes from options.resourceVersion, with bookmarks, until the server ends the watch
  // (success), `onEvent` returns false (success), or an error: an ERROR event comes back as its
  // Status (410 Gone means the version is too old: list again), a dropped connection as kTransport.
  // Nothing arriving for longer than the server timeout plus a margin counts as dropped.
  Result<void> watch(const Resource& resource, const std::string& ns, const WatchOptions& options,
                     const WatchHandler& onEvent) const;

 private:
  Result<nlohmann::json> call(const std::string& method, const std::string& target,
                              const std::string& contentType, const std::string& body,
                              const OmittedKeys& omitted = {}) const;

  Result<nlohmann::json> attempt(const HttpRequest& request, const OmittedKeys& omitted) const;

  std::shared_ptr<Transport> transport_;
  RequestPolicy policy_;
  std::optional<std::string> impersonate_;
};

// /api/v1/namespaces/NS/PLURAL/NAME/SUBRESOURCE or /apis/GROUP/VERSION/..., parts omitted when
// empty.
std::string resourcePath(const Resource& resource, const std::string& ns,
                         const std::string& name = "", const std::string& subresource = "");

// Percent-encoding for a query parameter value.
std::string encodeQueryValue(const std::string& value);

}  // namespace autotune::k8s
