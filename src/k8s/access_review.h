#pragma once
// Who may read an endpoint of ours, as the API server answers: a bearer token is authenticated with
// a TokenReview, and its user authorized with a SubjectAccessReview of a non-resource URL, as
// kube-apiserver itself guards /metrics. Verdicts are kept a short while per token, so that a
// scrape every few seconds costs the API server two requests a minute, not two a scrape.

#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "k8s/client.h"

namespace autotune::k8s {

enum class Verdict {
  kAllowed,
  kUnauthenticated,  // the API server does not know the token: 401
  kForbidden,        // its user may not: 403
};

class AccessReviewer {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // May the bearer of a token `verb` (get) the non-resource `path` (/metrics)?
  AccessReviewer(
      const Client& client, std::string path, std::string verb,
      Clock clock = [] { return std::chrono::steady_clock::now(); });

  // The verdict on `token`; an error when the API server could not be asked, which is not kept.
  Result<Verdict> review(std::string_view token);

 private:
  Result<Verdict> ask(std::string_view token) const;

  const Client& client_;
  std::string path_;
  std::string verb_;
  Clock clock_;
  std::mutex mutex_;
  // By SHA-256 of the token, never the token itself; the oldest go past kKeptVerdicts.
  struct Kept {
    Verdict verdict;
    std::chrono::steady_clock::time_point until;
  };
  std::map<std::string, Kept> kept_;
  std::list<std::string> order_;
};

}  // namespace autotune::k8s
