// The AutotuneJob codec and validation on any bytes, read as YAML and as JSON. Decoding never
// throws; a job it accepts encodes to a document that decodes to the same job and serialises as
// JSON; a job it refuses is refused with at least one field named.

#include "api/codec.h"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "fuzz/check.h"

namespace {

using autotune::fuzz::check;
namespace api = autotune::api;

void checkDecoded(const tl::expected<api::Decoded, api::FieldErrors>& decoded) {
  if (!decoded) {
    check(!decoded.error().empty(), "a refused job names at least one field");
    return;
  }
  const nlohmann::json encoded = api::encode(decoded->job);
  // A job the operator accepts is written back to the API server: it must be valid JSON text.
  check(!encoded.dump().empty(), "an accepted job serialises");
  const auto again = api::decode(encoded);
  check(again.has_value(), "an accepted job's encoding is accepted");
  check(api::encode(again->job) == encoded, "decoding an accepted job's encoding changes nothing");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  checkDecoded(api::decodeYaml(text));
  const nlohmann::json document = nlohmann::json::parse(text, nullptr, false);
  if (!document.is_discarded()) {
    checkDecoded(api::decode(document));
  }
  return 0;
}
