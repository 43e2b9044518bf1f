// Events off the reconcile path: each job and reason at most once a window, what came meanwhile
// told in one Event, a budget of their own, and a bound past which the oldest are dropped.

#include "controller/apply/event_sender.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/decision/events.h"
#include "support/fake_transport.h"

namespace autotune::controller {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using testing::FakeTransport;

json jobMetadata(const std::string& name) {
  return {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}};
}

json eventOf(const std::string& job, const std::string& reason, const std::string& message,
             const std::string& type = "Normal") {
  return eventObject(jobMetadata(job), {reason, type, message, message}, Timestamp{});
}

class Sender : public ::testing::Test {
 protected:
  static k8s::RequestPolicy noRetries() {
    k8s::RequestPolicy policy;
    policy.maxRetries = 0;
    return policy;
  }

  // The Events posted so far.
  std::vector<json> posted() const {
    std::vector<json> events;
    for (const auto& request : transport_->sent()) {
      events.push_back(json::parse(request.body));
    }
    return events;
  }

  void answerCreated(int times) {
    for (int i = 0; i < times; ++i) {
      transport_->respond(201, "{}");
    }
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  k8s::Client client_{transport_, noRetries()};
  runtime::FakeClock clock_;
};

// The first Event of a job and reason goes at once; those that follow within the window wait for
// its end and go as one, saying each; another reason or another job has a window of its own.
TEST_F(Sender, OneEventAWindowPerJobAndReasonWithWhatCameMeanwhileToldInOne) {
  EventSender sender(client_, clock_, {.qps = 100, .burst = 100, .window = seconds(10)});
  answerCreated(10);
  sender.send(eventOf("gpt2", "TrialLaunched", "Trial a launched as Pod p"));
  EXPECT_EQ(sender.sendDue(), 1U);

  sender.send(eventOf("gpt2", "TrialLaunched", "Trial b launched as Pod q"));
  sender.send(eventOf("gpt2", "TrialLaunched", "Trial c launched as Pod r"));
  sender.send(eventOf("gpt2", "TrialSucceeded", "Trial a succeeded"));
  sender.send(eventOf("bert", "TrialLaunched", "Trial x launched as Pod y"));
  EXPECT_EQ(sender.sendDue(), 2U) << "the other reason and the other job";
  EXPECT_EQ(sender.queued(), 2U);

  clock_.advance(seconds(9));
  EXPECT_EQ(sender.sendDue(), 0U);
  clock_.advance(seconds(1));
  EXPECT_EQ(sender.sendDue(), 2U);
  EXPECT_EQ(sender.queued(), 0U);

  const auto events = posted();
  ASSERT_EQ(events.size(), 4U);
  EXPECT_EQ(events[0]["message"], "Trial a launched as Pod p");
  EXPECT_EQ(events[3]["reason"], "TrialLaunched");
  EXPECT_EQ(events[3]["message"], "Trial b launched as Pod q; Trial c launched as Pod r");
  EXPECT_EQ(events[3]["count"], 2);
  EXPECT_EQ(transport_->sent()[3].target, "/api/v1/namespaces/ml/events");
}

// Reports are joined only as far as an Event's message holds them whole.
TEST(MergedEvents, JoinReportsWhileTheMessageHoldsThemWhole) {
  const auto joined = mergedEvents(
      {eventOf("gpt2", "R", "one"), eventOf("gpt2", "R", "two"), eventOf("gpt2", "R", "three")});
  ASSERT_EQ(joined.size(), 1U);
  EXPECT_EQ(joined[0]["message"], "one; two; three");
  EXPECT_EQ(joined[0]["count"], 3);

  const auto apart =
      mergedEvents({eventOf("gpt2", "R", std::string(800, 'a')),
                    eventOf("gpt2", "R", std::string(800, 'b')), eventOf("gpt2", "R", "c")});
  ASSERT_EQ(apart.size(), 2U);
  EXPECT_EQ(apart[0]["message"], std::string(800, 'a'));
  EXPECT_EQ(apart[1]["message"], std::string(800, 'b') + "; c");
  EXPECT_EQ(mergedEvents({eventOf("gpt2", "R", "one")})[0], eventOf("gpt2", "R", "one"));
}

// A Warning names a problem someone must read: it goes at once and on its own, however many of
// its job and reason came just before.
TEST_F(Sender, WarningsGoAtOnceEachOnItsOwn) {
  EventSender sender(client_, clock_, {.qps = 100, .burst = 100, .window = seconds(10)});
  answerCreated(3);
  sender.send(eventOf("gpt2", "MeasurementIgnored", "ConfigMap a bears no seal", "Warning"));
  EXPECT_EQ(sender.sendDue(), 1U);
  sender.send(eventOf("gpt2", "MeasurementIgnored", "ConfigMap b bears no seal", "Warning"));
  sender.send(eventOf("gpt2", "MeasurementIgnored", "ConfigMap c bears no seal", "Warning"));
  EXPECT_EQ(sender.sendDue(), 2U);
  const auto events = posted();
  ASSERT_EQ(events.size(), 3U);
  EXPECT_EQ(events[2]["message"], "ConfigMap c bears no seal");
}

// A job whose search ended has its story told at once: its last Event takes the job's queued ones
// with it, windows or not; another job's wait on.
TEST_F(Sender, AJobsLastEventTakesItsQueuedEventsWithIt) {
  EventSender sender(client_, clock_, {.qps = 100, .burst = 100, .window = seconds(10)});
  answerCreated(10);
  sender.send(eventOf("gpt2", "TrialSucceeded", "Trial a succeeded"));
  sender.send(eventOf("bert", "TrialSucceeded", "Trial x succeeded"));
  EXPECT_EQ(sender.sendDue(), 2U);
  sender.send(eventOf("gpt2", "TrialSucceeded", "Trial b succeeded"));
  sender.send(eventOf("bert", "TrialSucceeded", "Trial y succeeded"));
  EXPECT_EQ(sender.sendDue(), 0U);

  sender.send(eventOf("gpt2", "Completed", "Best trial b"));
  EXPECT_EQ(sender.sendDue(), 2U);
  const auto events = posted();
  ASSERT_EQ(events.size(), 4U);
  EXPECT_EQ(events[2]["message"], "Trial b succeeded");
  EXPECT_EQ(events[3]["reason"], "Completed");
  EXPECT_EQ(sender.queued(), 1U) << "bert's waits for its window";
}

// The Events of a job deleted meanwhile (its namespace with it, say) are not posted.
TEST_F(Sender, TheEventsOfAJobThatIsGoneAreNotPosted) {
  EventSender sender(client_, clock_, {},
                     {.failed = nullptr, .dropped = nullptr, .exists = [](const json& involved) {
                        return involved["name"] != "gone";
                      }});
  answerCreated(1);
  sender.send(eventOf("gone", "TrialLaunched", "launched"));
  sender.send(eventOf("here", "TrialLaunched", "launched"));
  sender.sendDue();
  const auto events = posted();
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0]["involvedObject"]["name"], "here");
}

// The budget is the sender's own: past its burst, Events wait for tokens, not for the reconciles.
TEST_F(Sender, EventsBeyondTheBudgetWaitForIt) {
  EventSender sender(client_, clock_, {.qps = 1, .burst = 2, .window = seconds(10)});
  answerCreated(3);
  for (const auto* job : {"a", "b", "c"}) {
    sender.send(eventOf(job, "TrialLaunched", "launched"));
  }
  EXPECT_EQ(sender.sendDue(), 2U);
  EXPECT_EQ(sender.sendDue(), 0U);
  clock_.advance(seconds(1));
  EXPECT_EQ(sender.sendDue(), 1U);
}

TEST_F(Sender, PastItsBoundTheOldestQueuedEventsAreDroppedAndCounted) {
  std::size_t dropped = 0;
  EventSender sender(client_, clock_, {.qps = 1, .burst = 1, .window = seconds(10), .maxQueued = 3},
                     {.failed = nullptr,
                      .dropped = [&](std::size_t count) { dropped += count; },
                      .exists = nullptr});
  for (int i = 0; i < 5; ++i) {
    sender.send(eventOf("job-" + std::to_string(i), "TrialLaunched", "launched"));
  }
  EXPECT_EQ(sender.queued(), 3U);
  EXPECT_EQ(dropped, 2U);
  answerCreated(1);
  sender.sendDue();
  EXPECT_EQ(posted()[0]["involvedObject"]["name"], "job-2");
}

// A refusal other than the same Event made before is told; the sender goes on.
TEST_F(Sender, ARefusedEventIsToldAndTheSenderGoesOn) {
  std::vector<std::string> failed;
  EventSender sender(
      client_, clock_, {},
      {.failed = [&](const std::string& reason, const k8s::Error&) { failed.push_back(reason); },
       .dropped = nullptr,
       .exists = nullptr});
  transport_->respond(409, R"({"kind":"Status","code":409,"reason":"AlreadyExists"})");
  transport_->respond(403, R"({"kind":"Status","code":403,"reason":"Forbidden"})");
  sender.send(eventOf("a", "TrialLaunched", "launched"));
  sender.send(eventOf("b", "TrialOOM", "out of memory"));
  EXPECT_EQ(sender.sendDue(), 2U);
  EXPECT_EQ(failed, std::vector<std::string>{"TrialOOM"});
}

// run() posts an Event that arrives while it waits, and ends when stopped.
TEST(SenderRun, PostsWhatArrivesAndEndsWhenStopped) {
  auto transport = std::make_shared<FakeTransport>();
  transport->respond(201, "{}");
  const k8s::Client client(transport);
  const runtime::SystemClock clock;
  EventSender sender(client, clock);
  std::jthread thread([&sender](const std::stop_token& stop) { sender.run(stop); });
  sender.send(eventOf("gpt2", "TrialLaunched", "launched"));
  for (int polls = 0; polls < 500 && transport->sent().empty(); ++polls) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(transport->sent().size(), 1U);
  thread.request_stop();
}

}  // namespace
}  // namespace autotune::controller
