// The real HTTP servers on loopback, on ports the kernel picks: a scrape returns the metrics,
// probes follow their checks, and a taken port is an error that names the address.

#include "observability/endpoints.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "observability/http_get.h"

namespace autotune::observability {
namespace {

using autotune::testing::httpGet;

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
  const auto server = MetricsServer::start("127.0.0.1:0", metrics);
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
  const auto first = MetricsServer::start("127.0.0.1:0", metrics);
  ASSERT_TRUE(first) << first.error();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());

  const auto second = MetricsServer::start(address, metrics);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find(address), std::string::npos) << second.error();

  const auto probes = ProbeServer::start(address, std::make_shared<Health>());
  ASSERT_FALSE(probes);
  EXPECT_NE(probes.error().find(address), std::string::npos) << probes.error();
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
