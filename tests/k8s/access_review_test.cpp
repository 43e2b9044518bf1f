// The access reviewer against a scripted API server: what it asks, what it makes of the answers,
// and how long it keeps a verdict.

#include "k8s/access_review.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "support/fake_transport.h"

namespace autotune::k8s {
namespace {

using nlohmann::json;
using testing::FakeTransport;

RequestPolicy noRetries() {
  RequestPolicy policy;
  policy.maxRetries = 0;
  return policy;
}

class AccessReview : public ::testing::Test {
 protected:
  void authenticates(bool known) {
    json status = {{"authenticated", known}};
    if (known) {
      status["user"] = {{"username", "system:serviceaccount:monitoring:prometheus"},
                        {"uid", "u-1"},
                        {"groups", {"system:serviceaccounts"}}};
    }
    transport_->respond(201, json{{"status", status}}.dump());
  }
  void authorizes(bool allowed) {
    transport_->respond(201, json{{"status", {{"allowed", allowed}}}}.dump());
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  std::unique_ptr<Client> client_ = std::make_unique<Client>(transport_, noRetries());
  std::chrono::steady_clock::time_point now_;
  AccessReviewer reviewer_{*client_, "/metrics", "get", [this] { return now_; }};
};

TEST_F(AccessReview, ATokenIsReviewedThenItsUserAuthorizedForThePath) {
  authenticates(true);
  authorizes(true);
  EXPECT_EQ(reviewer_.review("token-a"), Verdict::kAllowed);
  const auto sent = transport_->sent();
  ASSERT_EQ(sent.size(), 2U);
  EXPECT_EQ(sent[0].target, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(json::parse(sent[0].body)["spec"]["token"], "token-a");
  EXPECT_EQ(sent[1].target, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
  const json spec = json::parse(sent[1].body)["spec"];
  EXPECT_EQ(spec["user"], "system:serviceaccount:monitoring:prometheus");
  EXPECT_EQ(spec["groups"], json::array({"system:serviceaccounts"}));
  EXPECT_EQ(spec["nonResourceAttributes"], (json{{"path", "/metrics"}, {"verb", "get"}}));
}

TEST_F(AccessReview, AnUnknownTokenIsUnauthenticatedAndAKnownUserWithoutTheRightForbidden) {
  authenticates(false);
  EXPECT_EQ(reviewer_.review("made-up"), Verdict::kUnauthenticated);
  EXPECT_EQ(transport_->sent().size(), 1U) << "no access review for a user nobody knows";
  authenticates(true);
  authorizes(false);
  EXPECT_EQ(reviewer_.review("token-b"), Verdict::kForbidden);
}

TEST_F(AccessReview, AVerdictIsKeptAMinuteAndAFailureNotAtAll) {
  transport_->respond(503, "");
  EXPECT_FALSE(reviewer_.review("token-a")) << "the API server could not answer";
  authenticates(true);
  authorizes(true);
  EXPECT_EQ(reviewer_.review("token-a"), Verdict::kAllowed);
  const std::size_t asked = transport_->sent().size();
  now_ += std::chrono::seconds(59);
  EXPECT_EQ(reviewer_.review("token-a"), Verdict::kAllowed);
  EXPECT_EQ(transport_->sent().size(), asked) << "kept";
  now_ += std::chrono::seconds(2);
  authenticates(true);
  authorizes(false);
  EXPECT_EQ(reviewer_.review("token-a"), Verdict::kForbidden) << "asked again: the binding is gone";
}

TEST_F(AccessReview, AFloodOfMadeUpTokensKeepsNoMoreThanABoundedFew) {
  for (int i = 0; i < 1000; ++i) {
    authenticates(false);
    ASSERT_EQ(reviewer_.review("made-up-" + std::to_string(i)), Verdict::kUnauthenticated);
  }
  const std::size_t asked = transport_->sent().size();
  authenticates(false);
  EXPECT_EQ(reviewer_.review("made-up-0"), Verdict::kUnauthenticated);
  EXPECT_EQ(transport_->sent().size(), asked + 1) << "the oldest verdicts went first";
  EXPECT_EQ(reviewer_.review("made-up-999"), Verdict::kUnauthenticated);
  EXPECT_EQ(transport_->sent().size(), asked + 1) << "the newest are kept";
}

}  // namespace
}  // namespace autotune::k8s
