#pragma once
// Test support: an in-process Transport that records every request and answers from a script,
// so the client's request building and error handling are tested without a server.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "k8s/transport.h"

namespace autotune::testing {

class FakeTransport : public k8s::Transport {
 public:
  // The next answer to send() or stream().
  struct Answer {
    int status = 200;
    std::string body;
    std::map<std::string, std::string> headers;
    std::vector<std::string> lines;  // a stream's body, line by line
    bool holdOpen = false;           // after its lines, a stream stays open until stopped
  };

  void respond(int status, std::string body, std::map<std::string, std::string> headers = {}) {
    const std::lock_guard lock(mutex_);
    answers_.push_back({status, std::move(body), std::move(headers), {}, false});
  }

  // Like respond(), for a watch: a 200 whose body is these lines.
  void respondWithLines(std::vector<std::string> lines) {
    const std::lock_guard lock(mutex_);
    answers_.push_back({200, "", {}, std::move(lines), false});
  }

  // A watch that sends these lines and then stays quiet until the caller stops it.
  void respondWithLinesAndHoldOpen(std::vector<std::string> lines) {
    const std::lock_guard lock(mutex_);
    answers_.push_back({200, "", {}, std::move(lines), true});
  }

  tl::expected<k8s::HttpResponse, std::string> send(const k8s::HttpRequest& request) override {
    auto answer = next(request);
    if (!answer) {
      return tl::unexpected(std::string("connection refused"));
    }
    return k8s::HttpResponse{answer->status, std::move(answer->body), std::move(answer->headers)};
  }

  tl::expected<k8s::HttpResponse, std::string> stream(const k8s::HttpRequest& request,
                                                      const k8s::LineHandler& onLine,
                                                      std::chrono::seconds idleTimeout,
                                                      std::stop_token stop) override {
    {
      const std::lock_guard lock(mutex_);
      idleTimeouts.push_back(idleTimeout);
    }
    auto answer = next(request);
    if (!answer) {
      return tl::unexpected(std::string("connection refused"));
    }
    const k8s::HttpResponse response{answer->status, answer->body, answer->headers};
    if (answer->status != 200) {
      return response;
    }
    for (const auto& line : answer->lines) {
      if (!onLine(line)) {
        return response;
      }
    }
    if (answer->holdOpen) {
      std::unique_lock lock(mutex_);
      stopped_.wait(lock, stop, [] { return false; });
    }
    return response;
  }

  // The requests so far, in order.
  std::vector<k8s::HttpRequest> sent() const {
    const std::lock_guard lock(mutex_);
    return requests;
  }

  std::size_t unanswered() const {
    const std::lock_guard lock(mutex_);
    return answers_.size();
  }

  std::vector<k8s::HttpRequest> requests;
  std::vector<std::chrono::seconds> idleTimeouts;

 private:
  std::optional<Answer> next(const k8s::HttpRequest& request) {
    const std::lock_guard lock(mutex_);
    requests.push_back(request);
    if (answers_.empty()) {
      return std::nullopt;
    }
    Answer answer = std::move(answers_.front());
    answers_.pop_front();
    return answer;
  }

  mutable std::mutex mutex_;
  std::condition_variable_any stopped_;
  std::deque<Answer> answers_;
};

}  // namespace autotune::testing
