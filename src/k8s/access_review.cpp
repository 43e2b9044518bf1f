#include "k8s/access_review.h"

#include <openssl/evp.h>

#include <array>
#include <utility>

#include "object/read.h"

namespace autotune::k8s {
namespace {

using object::member;
using object::text;

using nlohmann::json;

const Resource kTokenReviews{"authentication.k8s.io", "v1", "tokenreviews", false};
const Resource kSubjectAccessReviews{"authorization.k8s.io", "v1", "subjectaccessreviews", false};

// How long a verdict holds: a token revoked, or a binding removed, takes effect within this.
constexpr auto kVerdictLifetime = std::chrono::seconds(60);
// Scrapers are few; a flood of made-up tokens must not grow the process.
constexpr std::size_t kKeptVerdicts = 256;

std::string digestOf(std::string_view token) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  EVP_Digest(token.data(), token.size(), digest.data(), &length, EVP_sha256(), nullptr);
  return {reinterpret_cast<const char*>(digest.data()), length};
}

}  // namespace

AccessReviewer::AccessReviewer(const Client& client, std::string path, std::string verb,
                               Clock clock)
    : client_(client), path_(std::move(path)), verb_(std::move(verb)), clock_(std::move(clock)) {}

Result<Verdict> AccessReviewer::review(std::string_view token) {
  const std::string key = digestOf(token);
  const auto now = clock_();
  {
    const std::lock_guard lock(mutex_);
    if (const auto found = kept_.find(key); found != kept_.end() && found->second.until > now) {
      return found->second.verdict;
    }
  }
  auto verdict = ask(token);
  if (!verdict) {
    return verdict;
  }
  const std::lock_guard lock(mutex_);
  if (kept_.insert_or_assign(key, Kept{*verdict, now + kVerdictLifetime}).second) {
    order_.push_back(key);
  }
  while (order_.size() > kKeptVerdicts) {
    kept_.erase(order_.front());
    order_.pop_front();
  }
  return verdict;
}

Result<Verdict> AccessReviewer::ask(std::string_view token) const {
  const json tokenReview = {{"apiVersion", "authentication.k8s.io/v1"},
                            {"kind", "TokenReview"},
                            {"spec", {{"token", token}}}};
  auto reviewed = client_.create(kTokenReviews, "", tokenReview);
  if (!reviewed) {
    return tl::make_unexpected(reviewed.error());
  }
  const json& status = member(*reviewed, "status");
  if (!member(status, "authenticated").is_boolean() || !status.at("authenticated").get<bool>()) {
    return Verdict::kUnauthenticated;
  }
  const json& user = member(status, "user");
  json spec = {{"user", text(user, "username")},
               {"uid", text(user, "uid")},
               {"nonResourceAttributes", {{"path", path_}, {"verb", verb_}}}};
  if (member(user, "groups").is_array()) {
    spec["groups"] = user.at("groups");
  }
  if (member(user, "extra").is_object()) {
    spec["extra"] = user.at("extra");
  }
  const json accessReview = {{"apiVersion", "authorization.k8s.io/v1"},
                             {"kind", "SubjectAccessReview"},
                             {"spec", std::move(spec)}};
  auto authorized = client_.create(kSubjectAccessReviews, "", accessReview);
  if (!authorized) {
    return tl::make_unexpected(authorized.error());
  }
  const json& allowed = member(member(*authorized, "status"), "allowed");
  return allowed.is_boolean() && allowed.get<bool>() ? Verdict::kAllowed : Verdict::kForbidden;
}

}  // namespace autotune::k8s
