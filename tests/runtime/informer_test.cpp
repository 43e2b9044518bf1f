// The store and the watcher's state machine, against an in-process fake transport: every
// transition (list, watch, re-watch, relist on 410, backoff after failures) one step at a time.

#include "runtime/informer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "k8s/resources.h"
#include "object/read.h"
#include "runtime/clock.h"
#include "support/fake_transport.h"

namespace autotune::runtime {
namespace {

using k8s::kConfigMaps;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::FakeTransport;

json configMap(const std::string& name, const std::string& version, const std::string& ns = "ns",
               const json& labels = json::object()) {
  return {{"metadata",
           {{"name", name}, {"namespace", ns}, {"resourceVersion", version}, {"labels", labels}}}};
}

std::string listBody(const std::vector<json>& items, const std::string& version,
                     const std::string& continueToken = "") {
  return json{{"metadata", {{"resourceVersion", version}, {"continue", continueToken}}},
              {"items", items}}
      .dump();
}

std::string event(const std::string& type, const json& object) {
  return json{{"type", type}, {"object", object}}.dump();
}

std::string goneEvent() {
  return event("ERROR", {{"kind", "Status"},
                         {"status", "Failure"},
                         {"reason", "Expired"},
                         {"code", 410},
                         {"message", "too old resource version: 5 (20)"}});
}

// --- Store --------------------------------------------------------------------------------------

TEST(Store, ReplaceSwapsInTheWholeSet) {
  auto store = rawStore();
  store->replace({configMap("a", "1"), configMap("b", "1")});
  store->replace({configMap("c", "2")});
  EXPECT_EQ(store->size(), 1U);
  EXPECT_FALSE(store->get("ns/a"));
  ASSERT_TRUE(store->get("ns/c"));
  EXPECT_EQ((*store->get("ns/c"))["metadata"]["resourceVersion"], "2");
}

TEST(Store, UpsertAndEraseChangeOneObject) {
  auto store = rawStore();
  store->upsert(configMap("a", "1"));
  store->upsert(configMap("a", "2"));
  store->upsert(configMap("b", "3"));
  store->erase(configMap("b", "4"));
  ASSERT_EQ(store->list().size(), 1U);
  EXPECT_EQ((*store->list()[0])["metadata"]["resourceVersion"], "2");
}

// A write's own result stored before the watch delivers an earlier event: the older event does
// not take the store back.
TEST(Store, AnOlderVersionDoesNotReplaceANewerOne) {
  auto store = rawStore();
  store->upsert(configMap("a", "12"));
  store->upsert(configMap("a", "9"));
  EXPECT_EQ((*store->get("ns/a"))["metadata"]["resourceVersion"], "12");
  store->upsert(configMap("a", "not-a-number"));
  EXPECT_EQ((*store->get("ns/a"))["metadata"]["resourceVersion"], "not-a-number");
}

// What a caller learned of an object it deleted, stored after the watch said the object went:
// it stays gone. Over an object still held, it is stored as put stores it.
TEST(Store, PutIfPresentNeverBringsBackAnObjectTheWatchRemoved) {
  auto store = rawStore();
  store->upsert(configMap("a", "5"));
  store->erase(configMap("a", "6"));
  store->putIfPresent(std::make_shared<const json>(configMap("a", "5")));
  EXPECT_FALSE(store->get("ns/a"));
  store->upsert(configMap("b", "7"));
  store->putIfPresent(std::make_shared<const json>(configMap("b", "8")));
  ASSERT_TRUE(store->get("ns/b"));
  EXPECT_EQ((*store->get("ns/b"))["metadata"]["resourceVersion"], "8");
  store->putIfPresent(std::make_shared<const json>(configMap("b", "3")));
  EXPECT_EQ((*store->get("ns/b"))["metadata"]["resourceVersion"], "8");
}

TEST(Store, FindsObjectsByIndexAndDropsThemFromItWhenTheyChange) {
  auto store = rawStore();
  store->addIndex("job", [](const json& object) {
    const std::string job =
        object::text(object::member(metadataOf(object), "labels"), "autotune.io/job");
    return job.empty() ? std::vector<std::string>{} : std::vector<std::string>{job};
  });
  store->replace({configMap("a", "1", "x", {{"autotune.io/job", "gpt2"}}),
                  configMap("b", "1", "y", {{"autotune.io/job", "gpt2"}}),
                  configMap("c", "1", "x", {{"autotune.io/job", "bert"}}),
                  configMap("d", "1", "x")});
  EXPECT_EQ(store->byIndex("job", "gpt2").size(), 2U);
  store->upsert(configMap("a", "2", "x", {{"autotune.io/job", "bert"}}));
  const auto gpt2 = store->byIndex("job", "gpt2");
  ASSERT_EQ(gpt2.size(), 1U);
  EXPECT_EQ(keyOf(*gpt2[0]), "y/b");
  EXPECT_EQ(store->byIndex("job", "bert").size(), 2U);
  EXPECT_TRUE(store->byIndex("job", "none").empty());
  EXPECT_TRUE(store->byIndex("no-such-index", "gpt2").empty());
}

TEST(Store, ListenersHearEachChangeWithTheObjectBeforeAndAfter) {
  auto store = rawStore();
  std::vector<std::string> heard;
  store->listen([&heard](const json* before, const json* after) {
    heard.push_back((before != nullptr ? versionOf(*before) : "-") + ">" +
                    (after != nullptr ? versionOf(*after) : "-"));
  });
  store->upsert(configMap("a", "1"));
  store->upsert(configMap("a", "2"));
  store->erase(configMap("a", "3"));
  store->erase(configMap("a", "3"));  // gone already: nothing to tell
  EXPECT_EQ(heard, (std::vector<std::string>{"->1", "1>2", "2>-"}));
}

TEST(Store, DecodesEachObjectOnceAndLeavesOutWhatItCannotDecode) {
  Indexed<int> sizes(
      [](const json& object) -> std::optional<int> {
        const json& data = object::member(object, "data");
        return data.is_object() ? std::optional(static_cast<int>(data.size())) : std::nullopt;
      },
      [](const int& size) { return std::to_string(size); });
  sizes.replace({json{{"metadata", {{"name", "x"}}}, {"data", {{"k", "v"}}}},
                 json{{"metadata", {{"name", "y"}}}, {"data", "not an object"}}});
  EXPECT_EQ(sizes.size(), 1U);
  ASSERT_TRUE(sizes.get("1"));
  EXPECT_EQ(*sizes.get("1"), 1);
}

TEST(Store, KeysAreNamespaceSlashNameOrTheNameAlone) {
  EXPECT_EQ(keyOf(configMap("a", "1", "ns")), "ns/a");
  EXPECT_EQ(keyOf(json{{"metadata", {{"name", "node-1"}}}}), "node-1");
}

// --- Watcher ------------------------------------------------------------------------------------

class WatcherSteps : public ::testing::Test {
 protected:
  static k8s::RequestPolicy noRetries() {
    k8s::RequestPolicy policy;
    policy.maxRetries = 0;
    return policy;
  }

  static WatcherOptions options() {
    WatcherOptions options;
    options.random = [] { return 0.5; };  // watch timeouts of 450 s, backoffs of 1.5x
    options.backoff.jitter = 0.0;
    return options;
  }

  WatchPhase step() { return watcher_.step(stop_.get_token()); }

  std::string lastTarget() const { return transport_->sent().back().target; }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  k8s::Client client_{transport_, noRetries()};
  FakeClock clock_;
  std::unique_ptr<Indexed<json>> store_ = rawStore();
  std::vector<std::string> changed_;
  std::vector<RestartReason> restarts_;
  std::stop_source stop_;
  Watcher watcher_{client_, {kConfigMaps, "ns", "app=x"}, *store_, clock_, options()};

  void SetUp() override {
    store_->listen([this](const json* before, const json* after) {
      changed_.push_back(keyOf(after != nullptr ? *after : *before));
    });
    watcher_.onRestart([this](RestartReason reason) { restarts_.push_back(reason); });
  }
};

TEST_F(WatcherSteps, ListsEveryPageThenWatchesFromTheListsVersion) {
  transport_->respond(200, listBody({configMap("a", "7")}, "10", "page-2"));
  transport_->respond(200, listBody({configMap("b", "8")}, "10"));
  EXPECT_FALSE(watcher_.hasSynced());

  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_TRUE(watcher_.hasSynced());
  EXPECT_EQ(store_->size(), 2U);
  EXPECT_EQ(changed_, (std::vector<std::string>{"ns/a", "ns/b"}));
  EXPECT_EQ(watcher_.resourceVersion(), "10");
  const auto requests = transport_->sent();
  EXPECT_NE(requests[0].target.find("limit=100"), std::string::npos);
  EXPECT_NE(requests[0].target.find("labelSelector=app%3Dx"), std::string::npos);
  EXPECT_NE(requests[1].target.find("continue=page-2"), std::string::npos);

  transport_->respondWithLines({});
  step();
  EXPECT_NE(lastTarget().find("resourceVersion=10"), std::string::npos);
  EXPECT_NE(lastTarget().find("allowWatchBookmarks=true"), std::string::npos);
  EXPECT_NE(lastTarget().find("timeoutSeconds=450"), std::string::npos);
}

// Pages are decoded as they come, yet the store changes only once the list is complete: a list
// that fails on a later page leaves the store as it was, and the next list starts afresh.
TEST_F(WatcherSteps, AListThatFailsMidwayChangesNothingAndTheNextStartsAfresh) {
  transport_->respond(200, listBody({configMap("a", "7")}, "10"));
  step();
  changed_.clear();
  transport_->respondWithLines({goneEvent()});
  EXPECT_EQ(step(), WatchPhase::kList);

  transport_->respond(200, listBody({configMap("b", "20")}, "30", "page-2"));
  transport_->respond(500, R"({"kind":"Status","code":500,"message":"etcd down"})");
  EXPECT_EQ(step(), WatchPhase::kBackoff);
  EXPECT_TRUE(changed_.empty());
  EXPECT_TRUE(store_->get("ns/a"));
  EXPECT_FALSE(store_->get("ns/b"));

  step();
  transport_->respond(200, listBody({configMap("c", "31")}, "32"));
  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_EQ(changed_, (std::vector<std::string>{"ns/c", "ns/a"}));
  EXPECT_EQ(store_->size(), 1U);
  EXPECT_TRUE(store_->get("ns/c"));
}

TEST_F(WatcherSteps, AppliesEventsAndFollowsBookmarks) {
  transport_->respond(200, listBody({configMap("a", "7"), configMap("b", "8")}, "10"));
  step();
  changed_.clear();
  transport_->respondWithLines({event("ADDED", configMap("c", "11")),
                                event("MODIFIED", configMap("a", "12")),
                                event("DELETED", configMap("b", "13")),
                                event("BOOKMARK", {{"metadata", {{"resourceVersion", "20"}}}})});
  EXPECT_EQ(step(), WatchPhase::kWatch);

  EXPECT_EQ(changed_, (std::vector<std::string>{"ns/c", "ns/a", "ns/b"}));
  EXPECT_FALSE(store_->get("ns/b"));
  EXPECT_EQ((*store_->get("ns/a"))["metadata"]["resourceVersion"], "12");
  EXPECT_EQ(watcher_.resourceVersion(), "20");
  EXPECT_EQ(restarts_, std::vector<RestartReason>{RestartReason::kExpired});

  transport_->respondWithLines({});
  step();
  EXPECT_NE(lastTarget().find("resourceVersion=20"), std::string::npos);
}

// Nothing a real API server sends, but nothing to stop on either: what cannot be keyed is skipped.
TEST_F(WatcherSteps, ObjectsWithoutANameOrWithFieldsOfTheWrongTypeAreSkipped) {
  transport_->respond(200, json{{"metadata", {{"resourceVersion", 10}}},
                                {"items",
                                 {configMap("a", "7"),
                                  {{"metadata", {{"namespace", "ns"}}}},
                                  {{"metadata", {{"name", 5}, {"namespace", "ns"}}}},
                                  {{"metadata", {{"name", "b"}, {"namespace", 6}}}}}}}
                               .dump());
  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_EQ(store_->size(), 2U);
  EXPECT_TRUE(store_->get("ns/a"));
  EXPECT_TRUE(store_->get("b"));

  transport_->respondWithLines({event("ADDED", {{"metadata", {{"resourceVersion", "11"}}}}),
                                event("ADDED", json::array()), event("MODIFIED", "text")});
  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_EQ(store_->size(), 2U);
  EXPECT_EQ(watcher_.resourceVersion(), "11");
}

TEST_F(WatcherSteps, A410RelistsAtOnceAndReportsWhatVanishedMeanwhile) {
  transport_->respond(200, listBody({configMap("a", "7"), configMap("b", "8")}, "10"));
  step();
  transport_->respondWithLines({event("MODIFIED", configMap("a", "11")), goneEvent()});
  EXPECT_EQ(step(), WatchPhase::kList);
  EXPECT_EQ(restarts_, std::vector<RestartReason>{RestartReason::kGone});

  changed_.clear();
  transport_->respond(200, listBody({configMap("a", "30"), configMap("c", "29")}, "31"));
  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_EQ(changed_, (std::vector<std::string>{"ns/a", "ns/c", "ns/b"}));
  EXPECT_FALSE(store_->get("ns/b"));
  EXPECT_EQ(store_->size(), 2U);
  EXPECT_EQ(watcher_.resourceVersion(), "31");
}

TEST_F(WatcherSteps, ADroppedConnectionBacksOffThenWatchesFromTheLastVersionSeen) {
  transport_->respond(200, listBody({}, "10"));
  step();
  // No answer scripted: the fake refuses the connection.
  EXPECT_EQ(step(), WatchPhase::kBackoff);
  EXPECT_EQ(watcher_.backoff(), milliseconds(800));
  EXPECT_EQ(restarts_, std::vector<RestartReason>{RestartReason::kDropped});

  EXPECT_EQ(step(), WatchPhase::kWatch);
  transport_->respondWithLines({event("ADDED", configMap("a", "11"))});
  step();
  EXPECT_NE(transport_->sent().back().target.find("resourceVersion=10"), std::string::npos);
  EXPECT_TRUE(store_->get("ns/a"));
}

TEST_F(WatcherSteps, AFailedListBacksOffLongerEachTimeThenListsAgain) {
  transport_->respond(500, R"({"kind":"Status","code":500,"message":"etcd down"})");
  EXPECT_EQ(step(), WatchPhase::kBackoff);
  EXPECT_EQ(watcher_.backoff(), milliseconds(800));
  EXPECT_FALSE(watcher_.hasSynced());
  EXPECT_EQ(step(), WatchPhase::kList);

  transport_->respond(500, R"({"kind":"Status","code":500,"message":"etcd down"})");
  step();
  EXPECT_EQ(watcher_.backoff(), milliseconds(1600));
  EXPECT_EQ(restarts_,
            (std::vector<RestartReason>{RestartReason::kListFailed, RestartReason::kListFailed}));

  step();
  transport_->respond(200, listBody({configMap("a", "7")}, "10"));
  EXPECT_EQ(step(), WatchPhase::kWatch);
  EXPECT_TRUE(watcher_.hasSynced());
}

TEST_F(WatcherSteps, TheBackoffStartsOverAfterAHealthyPeriod) {
  transport_->respond(200, listBody({}, "10"));
  step();
  step();  // refused
  step();
  step();  // refused again
  EXPECT_EQ(watcher_.backoff(), milliseconds(1600));
  clock_.advance(seconds(121));
  step();
  step();  // refused after two healthy minutes
  EXPECT_EQ(watcher_.backoff(), milliseconds(800));
}

TEST_F(WatcherSteps, AForbiddenWatchBacksOffThenRelists) {
  transport_->respond(200, listBody({}, "10"));
  step();
  transport_->respond(403, R"({"kind":"Status","code":403,"reason":"Forbidden"})");
  EXPECT_EQ(step(), WatchPhase::kBackoff);
  EXPECT_EQ(restarts_, std::vector<RestartReason>{RestartReason::kWatchFailed});
  EXPECT_EQ(step(), WatchPhase::kList);
}

TEST_F(WatcherSteps, RunEndsPromptlyWhenStoppedDuringAQuietWatch) {
  transport_->respond(200, listBody({configMap("a", "7")}, "10"));
  transport_->respondWithLinesAndHoldOpen({event("ADDED", configMap("b", "11"))});
  std::jthread running([this](std::stop_token stop) { watcher_.run(stop); });
  while (!store_->get("ns/b")) {
    std::this_thread::yield();
  }
  running.request_stop();
  running.join();
  EXPECT_EQ(watcher_.phase(), WatchPhase::kWatch);
  EXPECT_EQ(transport_->unanswered(), 0U);
}

}  // namespace
}  // namespace autotune::runtime
