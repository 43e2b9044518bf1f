// The client's requests and its reading of answers, against an in-process fake transport. What
// the real server does is proven in client_integration_test.cpp; this covers what a fresh server
// will not readily produce (a 410 in a watch, a 429, garbage).

#include "k8s/client.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/resources.h"
#include "support/fake_transport.h"

namespace autotune::k8s {
namespace {

using nlohmann::json;
using testing::FakeTransport;

const Resource kJobs{"autotune.io", "v1alpha1", "autotunejobs", true};

class ClientRequests : public ::testing::Test {
 protected:
  // Retries wait on a recording sleep, and the throttle counts its calls: no test waits.
  RequestPolicy recordingPolicy() {
    RequestPolicy policy;
    policy.throttle = [this] { ++throttled_; };
    policy.sleep = [this](std::chrono::milliseconds delay) { slept_.push_back(delay); };
    policy.observe = [this](std::string_view verb, int code) {
      observed_.push_back(std::string(verb) + " " + std::to_string(code));
    };
    return policy;
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  int throttled_ = 0;
  std::vector<std::chrono::milliseconds> slept_;
  std::vector<std::string> observed_;
  Client client_{transport_, recordingPolicy()};

  const HttpRequest& last() const { return transport_->requests.back(); }
};

TEST_F(ClientRequests, PathsFollowTheGroupVersionAndNamespace) {
  EXPECT_EQ(resourcePath(kConfigMaps, "ml", "a"), "/api/v1/namespaces/ml/configmaps/a");
  EXPECT_EQ(resourcePath(kJobs, "ml", "gpt2", "status"),
            "/apis/autotune.io/v1alpha1/namespaces/ml/autotunejobs/gpt2/status");
  EXPECT_EQ(resourcePath(kNodes, "ignored", "node-1"), "/api/v1/nodes/node-1");
  EXPECT_EQ(resourcePath(kJobs, ""), "/apis/autotune.io/v1alpha1/autotunejobs");
}

TEST_F(ClientRequests, ListEncodesItsQuery) {
  transport_->respond(200, R"({"items": [], "metadata": {}})");
  ListOptions options;
  options.labelSelector = "autotune.io/job=gpt2,tier in (a,b)";
  options.limit = 50;
  ASSERT_TRUE(client_.list(kConfigMaps, "ml", options));
  EXPECT_EQ(last().method, "GET");
  EXPECT_EQ(last().target,
            "/api/v1/namespaces/ml/configmaps?labelSelector=autotune.io%2Fjob%3Dgpt2%2Ctier%20in%20"
            "%28a%2Cb%29&limit=50");
}

TEST_F(ClientRequests, AFieldSelectorIsEncodedInListsAndWatches) {
  transport_->respond(200, R"({"items": [], "metadata": {}})");
  ListOptions list;
  list.fieldSelector = "spec.nodeName=gpu-node-0";
  ASSERT_TRUE(client_.list(kConfigMaps, "ml", list));
  EXPECT_EQ(last().target,
            "/api/v1/namespaces/ml/configmaps?fieldSelector=spec.nodeName%3Dgpu-node-0");

  transport_->respondWithLines({});
  WatchOptions watch;
  watch.resourceVersion = "7";
  watch.fieldSelector = "spec.nodeName!=";
  watch.timeoutSeconds = 60;
  ASSERT_TRUE(client_.watch(kConfigMaps, "ml", watch, [](const WatchEvent&) { return true; }));
  EXPECT_EQ(last().target,
            "/api/v1/namespaces/ml/configmaps?watch=true&allowWatchBookmarks=true&"
            "resourceVersion=7&fieldSelector=spec.nodeName%21%3D&timeoutSeconds=60");
}

TEST_F(ClientRequests, ListAllFollowsContinueTokensUntilTheLastPage) {
  transport_->respond(200, R"({"items": [{"n": 1}, {"n": 2}], "metadata": {"continue": "t1"}})");
  transport_->respond(200, R"({"items": [{"n": 3}], "metadata": {}})");
  const auto items = client_.listAll(kConfigMaps, "ml");
  ASSERT_TRUE(items);
  EXPECT_EQ(items->size(), 3U);
  EXPECT_EQ(transport_->requests[1].target, "/api/v1/namespaces/ml/configmaps?continue=t1");
}

TEST_F(ClientRequests, EachPatchTypeHasItsContentType) {
  for (int i = 0; i < 3; ++i) {
    transport_->respond(200, "{}");
  }
  ASSERT_TRUE(client_.patch(kConfigMaps, "ml", "a", PatchType::kMerge, {{"data", {}}}));
  EXPECT_EQ(last().contentType, "application/merge-patch+json");
  ASSERT_TRUE(client_.patch(kConfigMaps, "ml", "a", PatchType::kJson, json::array()));
  EXPECT_EQ(last().contentType, "application/json-patch+json");
  ApplyOptions apply;
  apply.fieldManager = "autotune-operator";
  apply.force = true;
  ASSERT_TRUE(client_.patch(kConfigMaps, "ml", "a", PatchType::kApply, json::object(), apply));
  EXPECT_EQ(last().contentType, "application/apply-patch+yaml");
  EXPECT_EQ(last().target,
            "/api/v1/namespaces/ml/configmaps/a?fieldManager=autotune-operator&force=true");
}

TEST_F(ClientRequests, DeleteSendsItsPropagationPolicy) {
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.remove(kConfigMaps, "ml", "a", Propagation::kForeground));
  EXPECT_EQ(last().method, "DELETE");
  EXPECT_EQ(json::parse(last().body)["propagationPolicy"], "Foreground");
}

TEST_F(ClientRequests, DeleteSendsAGracePeriodOnlyWhenGiven) {
  transport_->respond(200, "{}");
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.remove(kConfigMaps, "ml", "a"));
  EXPECT_FALSE(json::parse(last().body).contains("gracePeriodSeconds"));
  ASSERT_TRUE(client_.remove(kConfigMaps, "ml", "a", Propagation::kBackground, 0));
  EXPECT_EQ(json::parse(last().body)["gracePeriodSeconds"], 0);
  EXPECT_EQ(json::parse(last().body)["propagationPolicy"], "Background");
}

TEST_F(ClientRequests, DeleteSendsAUidPreconditionOnlyWhenGiven) {
  transport_->respond(200, "{}");
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.remove(kConfigMaps, "ml", "a"));
  EXPECT_FALSE(json::parse(last().body).contains("preconditions"));
  ASSERT_TRUE(client_.remove(kConfigMaps, "ml", "a", Propagation::kBackground, {}, "uid-a"));
  EXPECT_EQ(json::parse(last().body)["preconditions"], json({{"uid", "uid-a"}}));
}

TEST_F(ClientRequests, UpdateStatusWritesTheStatusSubresource) {
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.updateStatus(kJobs, "ml", {{"metadata", {{"name", "gpt2"}}}}));
  EXPECT_EQ(last().method, "PUT");
  EXPECT_EQ(last().target, "/apis/autotune.io/v1alpha1/namespaces/ml/autotunejobs/gpt2/status");
}

TEST_F(ClientRequests, ImpersonationAddsItsHeader) {
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.impersonating("system:serviceaccount:ml:x").get(kConfigMaps, "ml", "a"));
  ASSERT_EQ(last().headers.size(), 1U);
  EXPECT_EQ(last().headers[0].first, "Impersonate-User");
}

// When the server keeps saying 429, the caller gets the last answer with its Retry-After.
TEST_F(ClientRequests, TooManyRequestsCarriesRetryAfter) {
  for (int i = 0; i < 4; ++i) {
    transport_->respond(429,
                        R"({"kind": "Status", "status": "Failure", "reason": "TooManyRequests",
                           "code": 429, "message": "too many requests"})",
                        {{"retry-after", "7"}});
  }
  const auto answer = client_.get(kConfigMaps, "ml", "a");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kTooManyRequests);
  EXPECT_EQ(answer.error().retryAfter, std::chrono::seconds(7));
  EXPECT_TRUE(answer.error().retryable());
  EXPECT_EQ(slept_.size(), 3U);
}

TEST_F(ClientRequests, NoAnswerIsATransportError) {
  const auto answer = client_.get(kConfigMaps, "ml", "a");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kTransport);
  EXPECT_TRUE(answer.error().retryable());
}

TEST_F(ClientRequests, RetryableErrorsAreRetriedWithADoublingBackoff) {
  transport_->respond(503, "");
  transport_->respond(500, R"({"kind": "Status", "reason": "InternalError", "code": 500})");
  transport_->respond(200, R"({"metadata": {"name": "a"}})");
  const auto answer = client_.get(kConfigMaps, "ml", "a");
  ASSERT_TRUE(answer) << describe(answer.error());
  EXPECT_EQ(slept_, (std::vector<std::chrono::milliseconds>{std::chrono::milliseconds(200),
                                                            std::chrono::milliseconds(400)}));
  EXPECT_EQ(throttled_, 3);
}

TEST_F(ClientRequests, EveryAttemptIsObservedWithItsStatusOrZeroWithoutAnswer) {
  transport_->respond(503, "");
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.get(kConfigMaps, "ml", "a"));
  transport_->respond(404, R"({"kind": "Status", "reason": "NotFound", "code": 404})");
  EXPECT_FALSE(client_.remove(kConfigMaps, "ml", "a"));
  RequestPolicy once = recordingPolicy();
  once.maxRetries = 0;
  EXPECT_FALSE(Client(transport_, once).create(kConfigMaps, "ml", json::object()));
  EXPECT_EQ(observed_, (std::vector<std::string>{"GET 503", "GET 200", "DELETE 404", "POST 0"}));
}

TEST_F(ClientRequests, WatchesAreObservedWithTheirStatus) {
  transport_->respondWithLines({std::string(R"({"type": "ADDED", "object": {}})")});
  ASSERT_TRUE(client_.watch(kConfigMaps, "ml", {}, [](const WatchEvent&) { return true; }));
  transport_->respond(403, R"({"kind": "Status", "reason": "Forbidden", "code": 403})");
  EXPECT_FALSE(client_.watch(kConfigMaps, "ml", {}, [](const WatchEvent&) { return true; }));
  EXPECT_FALSE(client_.watch(kConfigMaps, "ml", {}, [](const WatchEvent&) { return true; }));
  EXPECT_EQ(observed_, (std::vector<std::string>{"WATCH 200", "WATCH 403", "WATCH 0"}));
}

TEST_F(ClientRequests, AClientWithoutAnObserverStillWorks) {
  transport_->respond(200, "{}");
  EXPECT_TRUE(Client(transport_).get(kConfigMaps, "ml", "a"));
}

TEST_F(ClientRequests, RetryAfterSetsTheWait) {
  transport_->respond(429, R"({"kind": "Status", "reason": "TooManyRequests", "code": 429})",
                      {{"retry-after", "2"}});
  transport_->respond(200, "{}");
  ASSERT_TRUE(client_.get(kConfigMaps, "ml", "a"));
  EXPECT_EQ(slept_, (std::vector<std::chrono::milliseconds>{std::chrono::seconds(2)}));
}

TEST_F(ClientRequests, ErrorsThatAreNotRetryableComeBackAtOnce) {
  transport_->respond(404, R"({"kind": "Status", "reason": "NotFound", "code": 404})");
  transport_->respond(409, R"({"kind": "Status", "reason": "Conflict", "code": 409})");
  EXPECT_EQ(client_.get(kConfigMaps, "ml", "a").error().kind, ErrorKind::kNotFound);
  EXPECT_EQ(client_.update(kConfigMaps, "ml", {{"metadata", {{"name", "a"}}}}).error().kind,
            ErrorKind::kConflict);
  EXPECT_TRUE(slept_.empty());
  EXPECT_EQ(transport_->requests.size(), 2U);
}

TEST_F(ClientRequests, RetriesStopAfterTheLimit) {
  for (int i = 0; i < 5; ++i) {
    transport_->respond(503, "");
  }
  const auto answer = client_.get(kConfigMaps, "ml", "a");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kServerError);
  EXPECT_EQ(transport_->requests.size(), 4U);  // the first try and three retries
}

TEST_F(ClientRequests, ASuccessThatIsNotJsonIsAnError) {
  transport_->respond(200, "<html>proxy</html>");
  const auto answer = client_.get(kConfigMaps, "ml", "a");
  ASSERT_FALSE(answer);
  EXPECT_EQ(answer.error().kind, ErrorKind::kTransport);
}

TEST_F(ClientRequests, AWatchAsksForBookmarksAndHandsOverEachEvent) {
  transport_->respondWithLines(
      {R"({"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "5"}}})",
       R"({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})"});
  WatchOptions options;
  options.resourceVersion = "4";
  options.timeoutSeconds = 120;
  std::vector<std::string> seen;
  const auto watched = client_.watch(kConfigMaps, "ml", options, [&](const WatchEvent& event) {
    seen.push_back(event.type + "@" +
                   event.object["metadata"]["resourceVersion"].get<std::string>());
    return true;
  });
  ASSERT_TRUE(watched) << describe(watched.error());
  EXPECT_EQ(seen, (std::vector<std::string>{"ADDED@5", "BOOKMARK@9"}));
  EXPECT_EQ(last().target,
            "/api/v1/namespaces/ml/configmaps?watch=true&allowWatchBookmarks=true&"
            "resourceVersion=4&timeoutSeconds=120");
  EXPECT_GT(transport_->idleTimeouts.back(), std::chrono::seconds(120));
}

// Keys the reader never reads are left out as lists and watch events are parsed, at any depth,
// and nothing else is.
TEST_F(ClientRequests, OmittedKeysAreLeftOutOfListsAndWatchEvents) {
  const json node = {{"metadata", {{"name", "gpu-0"}, {"managedFields", json::array({1, 2})}}},
                     {"status",
                      {{"images", json::array({{{"names", {"a", "b"}}}})},
                       {"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  transport_->respond(200, json{{"items", {node}}, {"metadata", json::object()}}.dump());
  ListOptions options;
  options.omittedKeys = {"managedFields", "images"};
  const auto listed = client_.list(kNodes, "", options);
  ASSERT_TRUE(listed);
  const json expected = {{"metadata", {{"name", "gpu-0"}}},
                         {"status", {{"allocatable", {{"nvidia.com/gpu", "8"}}}}}};
  EXPECT_EQ((*listed)["items"][0], expected);

  transport_->respondWithLines({json{{"type", "MODIFIED"}, {"object", node}}.dump()});
  WatchOptions watch;
  watch.omittedKeys = options.omittedKeys;
  json seen;
  ASSERT_TRUE(client_.watch(kNodes, "", watch, [&](const WatchEvent& event) {
    seen = event.object;
    return true;
  }));
  EXPECT_EQ(seen, expected);
}

// A watch line is one line: a Status in an ERROR event, as the server sends a 410.
constexpr std::string_view kExpired =
    R"json({"type": "ERROR", "object": {"kind": "Status", "status": "Failure", "reason": )json"
    R"json("Expired", "code": 410, "message": "too old resource version: 4 (1200)"}})json";

TEST_F(ClientRequests, AnExpiredVersionInAWatchIsGone) {
  transport_->respondWithLines({std::string(kExpired)});
  const auto watched = client_.watch(kConfigMaps, "ml", {}, [](const WatchEvent&) { return true; });
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().kind, ErrorKind::kGone);
}

TEST_F(ClientRequests, AGarbledWatchLineEndsTheWatchWithAnError) {
  transport_->respondWithLines({"{\"type\": \"ADDED\", \"obj"});
  const auto watched = client_.watch(kConfigMaps, "ml", {}, [](const WatchEvent&) { return true; });
  ASSERT_FALSE(watched);
  EXPECT_EQ(watched.error().kind, ErrorKind::kTransport);
}

TEST_F(ClientRequests, TheHandlerCanEndAWatch) {
  transport_->respondWithLines(
      {R"({"type": "ADDED", "object": {}})", R"({"type": "MODIFIED", "object": {}})"});
  int events = 0;
  const auto watched = client_.watch(kConfigMaps, "ml", {}, [&](const WatchEvent&) {
    ++events;
    return false;
  });
  ASSERT_TRUE(watched);
  EXPECT_EQ(events, 1);
}

}  // namespace
}  // namespace autotune::k8s
