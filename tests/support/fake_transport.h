#pragma once
// Test support: an in-process Transport that records every request and answers from a script,
// so the client's request building and error handling are tested without a server.

#include <chrono>
#include <deque>
#include <map>
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
  };

  void respond(int status, std::string body, std::map<std::string, std::string> headers = {}) {
    answers_.push_back({status, std::move(body), std::move(headers)});
  }

  tl::expected<k8s::HttpResponse, std::string> send(const k8s::HttpRequest& request) override {
    requests.push_back(request);
    if (answers_.empty()) {
      return tl::unexpected(std::string("connection refused"));
    }
    Answer answer = std::move(answers_.front());
    answers_.pop_front();
    return k8s::HttpResponse{answer.status, std::move(answer.body), std::move(answer.headers)};
  }

  tl::expected<k8s::HttpResponse, std::string> stream(const k8s::HttpRequest& request,
                                                      const k8s::LineHandler& onLine,
                                                      std::chrono::seconds idleTimeout) override {
    idleTimeouts.push_back(idleTimeout);
    auto response = send(request);
    if (!response || response->status != 200) {
      return response;
    }
    for (const auto& line : linesOfLastAnswer_) {
      if (!onLine(line)) {
        break;
      }
    }
    return response;
  }

  // Like respond(), for a watch: a 200 whose body is these lines.
  void respondWithLines(std::vector<std::string> lines) {
    linesOfLastAnswer_ = std::move(lines);
    respond(200, "");
  }

  std::vector<k8s::HttpRequest> requests;
  std::vector<std::chrono::seconds> idleTimeouts;

 private:
  std::deque<Answer> answers_;
  std::vector<std::string> linesOfLastAnswer_;
};

}  // namespace autotune::testing
