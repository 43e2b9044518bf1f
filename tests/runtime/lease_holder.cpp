// Test equipment: one replica campaigning for a Lease, for the two-process election test.
// Prints "leading" when it takes the lease and "stopped" when its leadership ends; exits 0 after
// SIGTERM (having released the lease) and 3 when the lease was lost.
//
//   lease_holder KUBECONFIG NAMESPACE LEASE IDENTITY

#include <pthread.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <stop_token>
#include <thread>

#include "k8s/client.h"
#include "k8s/config.h"
#include "runtime/clock.h"
#include "runtime/leader_election.h"

int main(int argc, char** argv) {
  using namespace autotune;
  using std::chrono::milliseconds;
  constexpr int kArguments = 5;
  constexpr int kLost = 3;
  if (argc != kArguments) {
    std::cerr << "usage: lease_holder KUBECONFIG NAMESPACE LEASE IDENTITY\n";
    return 2;
  }
  const std::vector<std::string> args(argv + 1, argv + argc);
  auto config = k8s::loadKubeconfig(args[0]);
  if (!config) {
    std::cerr << k8s::describe(config.error()) << "\n";
    return 2;
  }
  sigset_t terminate;
  sigemptyset(&terminate);
  sigaddset(&terminate, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &terminate, nullptr);

  const k8s::Client client(k8s::makeHttpTransport(*config));
  const runtime::SystemClock clock;
  // Short periods keep the test quick; the proportions are client-go's.
  runtime::LeaderElector elector(
      client,
      {args[1], args[2], args[3], milliseconds(4000), milliseconds(3000), milliseconds(500)},
      clock);
  std::stop_source stop;
  std::thread([&stop, terminate] {
    int received = 0;
    sigwait(&terminate, &received);
    stop.request_stop();
  }).detach();
  const bool lost = elector.run(stop.get_token(), [](const std::stop_token& leadership) {
    std::cout << "leading" << std::endl;
    runtime::sleepFor(std::chrono::hours(24), leadership);
    std::cout << "stopped" << std::endl;
  });
  return lost ? kLost : 0;
}
