// The real HTTP servers on loopback, on ports the kernel picks: a scrape returns the metrics to a
// bearer the authorizer allows, over HTTPS when given a certificate; probes follow their checks,
// and a taken port is an error that names the address.

#include "observability/endpoints.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "observability/http_get.h"
#include "observability/serving_certificate.h"

namespace autotune::observability {
namespace {

using autotune::testing::httpGet;
using autotune::testing::httpsGet;

// Plain HTTP to anyone, at `address`.
MetricsServing servingOn(const std::string& address) {
  MetricsServing serving;
  serving.address = address;
  return serving;
}

TEST(ListenAddress, APortAloneMeansEveryInterface) {
  EXPECT_EQ(listenAddress(":8080"), "0.0.0.0:8080");
  EXPECT_EQ(listenAddress("127.0.0.1:8081"), "127.0.0.1:8081");
  EXPECT_EQ(listenAddress("127.0.0.1:0"), "127.0.0.1:0");
}

TEST(ListenAddress, AnAddressWithoutAValidPortIsAnError) {
  for (const auto* flag : {"8080", "", ":", ":http", ":70000", ":-1", "127.0.0.1:80x"}) {
    const auto address = listenAddress(flag);
    ASSERT_FALSE(address) << flag;
    EXPECT_NE(address.error().find(flag), std::string::npos) << address.error();
  }
}

TEST(MetricsServer, AScrapeReturnsTheMetrics) {
  Metrics metrics;
  metrics.trialLaunched("ml", "gpt2");
  const auto server = MetricsServer::start(servingOn("127.0.0.1:0"), metrics);
  ASSERT_TRUE(server) << server.error();
  ASSERT_GT((*server)->port(), 0);

  const auto scrape = httpGet((*server)->port(), "/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  EXPECT_NE(
      scrape->body.find(R"(autotune_trials_launched_total{autotunejob="gpt2",namespace="ml"} 1)"),
      std::string::npos)
      << scrape->body;
  EXPECT_NE(scrape->body.find("process_resident_memory_bytes"), std::string::npos);
}

TEST(MetricsServer, ATakenPortIsAnErrorNamingTheAddress) {
  const Metrics metrics;
  const auto first = MetricsServer::start(servingOn("127.0.0.1:0"), metrics);
  ASSERT_TRUE(first) << first.error();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());

  const auto second = MetricsServer::start(servingOn(address), metrics);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find(address), std::string::npos) << second.error();

  const auto probes = ProbeServer::start(address, std::make_shared<Health>());
  ASSERT_FALSE(probes);
  EXPECT_NE(probes.error().find(address), std::string::npos) << probes.error();
}

// A token the API server would answer for, as an Authorize stands for it here.
Access accessOf(std::string_view token) {
  if (token == "reader") {
    return Access::kAllowed;
  }
  if (token == "stranger") {
    return Access::kForbidden;
  }
  if (token == "while-the-api-server-is-down") {
    return Access::kUnknown;
  }
  return Access::kUnauthenticated;
}

TEST(MetricsServer, OnlyABearerTheAuthorizerAllowsGetsTheMetrics) {
  Metrics metrics;
  metrics.trialLaunched("ml", "gpt2");
  std::vector<std::string> asked;
  MetricsServing serving = servingOn("127.0.0.1:0");
  serving.authorize = [&asked](std::string_view token) {
    asked.emplace_back(token);
    return token.empty() ? Access::kUnauthenticated : accessOf(token);
  };
  const auto server = MetricsServer::start(serving, metrics);
  ASSERT_TRUE(server) << server.error();
  const int port = (*server)->port();
  const auto bearer = [](const std::string& token) {
    return "Authorization: Bearer " + token + "\r\n";
  };

  const auto anonymous = httpGet(port, "/metrics");
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
  EXPECT_EQ(anonymous->body.find("autotune_"), std::string::npos);
  EXPECT_EQ(httpGet(port, "/metrics", bearer("made-up"))->status, 401);
  EXPECT_EQ(httpGet(port, "/metrics", "Authorization: Basic cmVhZGVyOg==\r\n")->status, 401)
      << "only a bearer token counts";
  const auto forbidden = httpGet(port, "/metrics", bearer("stranger"));
  EXPECT_EQ(forbidden->status, 403);
  EXPECT_EQ(forbidden->body.find("gpt2"), std::string::npos) << "nothing of any job";
  EXPECT_EQ(httpGet(port, "/metrics", bearer("while-the-api-server-is-down"))->status, 503);
  const auto allowed = httpGet(port, "/metrics", "authorization: bearer reader\r\n");
  EXPECT_EQ(allowed->status, 200);
  EXPECT_NE(
      allowed->body.find(R"(autotune_trials_launched_total{autotunejob="gpt2",namespace="ml"} 1)"),
      std::string::npos);
  EXPECT_EQ(asked, (std::vector<std::string>{"", "made-up", "", "stranger",
                                             "while-the-api-server-is-down", "reader"}));
}

TEST(MetricsServer, ServesHttpsWithASelfSignedCertificateFromTls12On) {
  Metrics metrics;
  metrics.trialLaunched("ml", "gpt2");
  const auto certificate = servingCertificate("");
  ASSERT_TRUE(certificate) << certificate.error();
  MetricsServing serving = servingOn("127.0.0.1:0");
  serving.certificate = *certificate;
  serving.authorize = accessOf;
  const auto server = MetricsServer::start(serving, metrics);
  ASSERT_TRUE(server) << server.error();
  const int port = (*server)->port();

  const auto scrape = httpsGet(port, "/metrics", "Authorization: Bearer reader\r\n");
  ASSERT_TRUE(scrape) << "a TLS handshake and an HTTP answer";
  EXPECT_EQ(scrape->status, 200);
  EXPECT_NE(scrape->body.find("autotune_trials_launched_total"), std::string::npos);
  EXPECT_EQ(httpsGet(port, "/metrics")->status, 401);
  EXPECT_FALSE(httpGet(port, "/metrics")) << "no plain HTTP on the TLS port";
  EXPECT_FALSE(httpsGet(port, "/metrics", "Authorization: Bearer reader\r\n", TLS1_1_VERSION))
      << "nothing older than TLS 1.2";
  EXPECT_EQ(httpsGet(port, "/metrics", "Authorization: Bearer reader\r\n")->status, 200)
      << "the server serves on after refusing a handshake";
}

TEST(MetricsServer, ARequestOfAnythingElseOrTooLargeGetsNoMetrics) {
  Metrics metrics;
  metrics.trialLaunched("ml", "gpt2");
  const auto server = MetricsServer::start(servingOn("127.0.0.1:0"), metrics);
  ASSERT_TRUE(server) << server.error();
  const int port = (*server)->port();
  EXPECT_EQ(httpGet(port, "/other")->status, 404);
  EXPECT_FALSE(httpGet(port, "/metrics", "X-Padding: " + std::string(20000, 'x') + "\r\n"))
      << "a head past 16 KiB is dropped";
  EXPECT_EQ(httpGet(port, "/metrics")->status, 200);
}

TEST(ServingCertificate, AMountedKeyAndCertificateAreServedOnlyAsAPair) {
  const auto folder = std::filesystem::temp_directory_path() / "autotune-serving-test";
  std::filesystem::create_directories(folder);
  const auto made = servingCertificate("");
  ASSERT_TRUE(made) << made.error();
  const auto split = made->find("-----BEGIN CERTIFICATE-----");
  ASSERT_NE(split, std::string::npos);
  std::ofstream(folder / "tls.key") << made->substr(0, split);
  std::ofstream(folder / "tls.crt") << made->substr(split);
  const auto mounted = servingCertificate(folder.string());
  ASSERT_TRUE(mounted) << mounted.error();
  MetricsServing serving = servingOn("127.0.0.1:0");
  serving.certificate = *mounted;
  const Metrics metrics;
  const auto server = MetricsServer::start(serving, metrics);
  ASSERT_TRUE(server) << server.error();
  EXPECT_EQ(httpsGet((*server)->port(), "/metrics")->status, 200);

  const auto other = servingCertificate("");
  std::ofstream(folder / "tls.crt") << other->substr(other->find("-----BEGIN CERTIFICATE-----"));
  const auto mismatched = servingCertificate(folder.string());
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().find("tls.crt: is not the certificate of tls.key"),
            std::string::npos)
      << mismatched.error();
  std::ofstream(folder / "tls.key") << "not a key";
  EXPECT_NE(servingCertificate(folder.string()).error().find("holds no PEM private key"),
            std::string::npos);
  std::filesystem::remove_all(folder);
  EXPECT_NE(servingCertificate(folder.string()).error().find("tls.key: cannot be read"),
            std::string::npos);
  serving.certificate = "-----BEGIN PRIVATE KEY-----\nnot base64\n-----END PRIVATE KEY-----\n";
  const auto refused = MetricsServer::start(serving, metrics);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("cannot be used"), std::string::npos) << refused.error();
}

TEST(ProbeServer, HealthzFailsOnceAWorkersBeatGoesStale) {
  std::atomic<int> elapsed = 0;
  Heartbeat heartbeat(std::chrono::seconds(30),
                      [&] { return Heartbeat::TimePoint(std::chrono::seconds(elapsed.load())); });
  auto health = std::make_shared<Health>();
  health->addLiveness("reconcile-workers", [&] { return heartbeat.healthy(); });
  const auto server = ProbeServer::start("127.0.0.1:0", health);
  ASSERT_TRUE(server) << server.error();
  const int port = (*server)->port();

  auto beat = std::make_optional(heartbeat.beat());
  auto answer = httpGet(port, "/healthz");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "ok\n");

  elapsed = 31;
  answer = httpGet(port, "/healthz");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 500);
  EXPECT_EQ(answer->body, "reconcile-workers failed\n");

  beat.reset();
  answer = httpGet(port, "/healthz");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
}

TEST(ProbeServer, ReadyzFollowsItsCheck) {
  std::atomic<bool> synced = false;
  auto health = std::make_shared<Health>();
  health->addReadiness("caches-synced", [&] { return synced.load(); });
  const auto server = ProbeServer::start("127.0.0.1:0", health);
  ASSERT_TRUE(server) << server.error();
  const int port = (*server)->port();

  auto answer = httpGet(port, "/readyz");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 500);
  EXPECT_EQ(answer->body, "caches-synced failed\n");
  // Readiness does not make the process unhealthy.
  EXPECT_EQ(httpGet(port, "/healthz")->status, 200);

  synced = true;
  answer = httpGet(port, "/readyz");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "ok\n");
}

TEST(ProbeServer, OtherPathsAreNotFound) {
  const auto server = ProbeServer::start("127.0.0.1:0", std::make_shared<Health>());
  ASSERT_TRUE(server) << server.error();
  const auto answer = httpGet((*server)->port(), "/healthz/extra");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 404);
}

}  // namespace
}  // namespace autotune::observability
