// A watch as the API server (or whatever stands in its place) could stream it: the input is a
// list answer, then the watch body, split into lines as the transport splits them. The watcher
// never throws, keeps only objects it can key, and after the stream is in one of its phases.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/check.h"
#include "k8s/client.h"
#include "k8s/resources.h"
#include "runtime/clock.h"
#include "runtime/informer.h"
#include "support/fake_transport.h"

namespace {

using autotune::fuzz::check;
namespace runtime = autotune::runtime;

// The list body comes first, up to the first NUL byte; then the watch body, one line per "\n".
struct Stream {
  std::string listBody;
  std::vector<std::string> lines;
};

Stream split(std::string_view input) {
  Stream stream;
  const std::size_t end = input.find('\0');
  stream.listBody = std::string(input.substr(0, end));
  if (end == std::string_view::npos) {
    return stream;
  }
  std::string_view body = input.substr(end + 1);
  while (!body.empty()) {
    const std::size_t newline = body.find('\n');
    stream.lines.emplace_back(body.substr(0, newline));
    body = newline == std::string_view::npos ? std::string_view{} : body.substr(newline + 1);
  }
  return stream;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Stream stream = split({reinterpret_cast<const char*>(data), size});
  auto transport = std::make_shared<autotune::testing::FakeTransport>();
  transport->respond(200, std::move(stream.listBody));
  transport->respondWithLines(std::move(stream.lines));
  autotune::k8s::RequestPolicy policy;
  policy.maxRetries = 0;
  const autotune::k8s::Client client(transport, policy);
  runtime::FakeClock clock;
  auto store = runtime::rawStore();
  std::size_t changes = 0;
  store->listen(
      [&changes](const nlohmann::json* /*before*/, const nlohmann::json* /*after*/) { ++changes; });
  runtime::Watcher watcher(client, {autotune::k8s::kConfigMaps, "ns", ""}, *store, clock);
  const std::stop_source stop;
  for (int step = 0; step < 3 && transport->unanswered() > 0; ++step) {
    const runtime::WatchPhase phase = watcher.step(stop.get_token());
    check(phase == runtime::WatchPhase::kList || phase == runtime::WatchPhase::kWatch ||
              phase == runtime::WatchPhase::kBackoff,
          "the watcher is in one of its phases");
  }
  for (const auto& object : store->list()) {
    check(!runtime::keyOf(*object).empty(), "every stored object has a key");
  }
  return 0;
}
