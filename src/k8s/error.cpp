#include "k8s/error.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "object/read.h"

namespace autotune::k8s {
namespace {

using object::text;

using nlohmann::json;

constexpr std::size_t kBodySnippetLength = 200;

std::optional<std::int64_t> integerAt(const json& object, std::string_view key) {
  const auto found = object.find(key);
  if (found == object.end() || !found->is_number_integer()) {
    return std::nullopt;
  }
  return found->get<std::int64_t>();
}

// The reason names the condition precisely where the status code is shared (409 is both
// AlreadyExists and Conflict; 500 may be ServerTimeout), so it is asked first.
std::optional<ErrorKind> kindOfReason(std::string_view reason) {
  using Entry = std::pair<std::string_view, ErrorKind>;
  static constexpr std::array<Entry, 12> kReasons = {{
      {"NotFound", ErrorKind::kNotFound},
      {"AlreadyExists", ErrorKind::kAlreadyExists},
      {"Conflict", ErrorKind::kConflict},
      {"Gone", ErrorKind::kGone},
      {"Expired", ErrorKind::kGone},
      {"Invalid", ErrorKind::kInvalid},
      {"BadRequest", ErrorKind::kBadRequest},
      {"Unauthorized", ErrorKind::kUnauthorized},
      {"Forbidden", ErrorKind::kForbidden},
      {"TooManyRequests", ErrorKind::kTooManyRequests},
      {"Timeout", ErrorKind::kTimeout},
      {"ServerTimeout", ErrorKind::kTimeout},
  }};
  for (const auto& [name, kind] : kReasons) {
    if (name == reason) {
      return kind;
    }
  }
  return std::nullopt;
}

ErrorKind kindOfStatus(int httpStatus) {
  switch (httpStatus) {
    case 400:
      return ErrorKind::kBadRequest;
    case 401:
      return ErrorKind::kUnauthorized;
    case 403:
      return ErrorKind::kForbidden;
    case 404:
      return ErrorKind::kNotFound;
    case 409:
      return ErrorKind::kConflict;
    case 410:
      return ErrorKind::kGone;
    case 422:
      return ErrorKind::kInvalid;
    case 429:
      return ErrorKind::kTooManyRequests;
    case 504:
      return ErrorKind::kTimeout;
    default:
      return httpStatus >= 500 && httpStatus <= 599 ? ErrorKind::kServerError : ErrorKind::kOther;
  }
}

// Delta-seconds only: the API server never sends the HTTP-date form.
std::optional<std::chrono::seconds> parseRetryAfter(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  std::int64_t seconds = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc{} || end != text.data() + text.size() || seconds < 0) {
    return std::nullopt;
  }
  return std::chrono::seconds(seconds);
}

// The length of the UTF-8 sequence that `lead` starts; 1 for ASCII and for stray bytes.
std::size_t sequenceLength(unsigned char lead) {
  if ((lead & 0xE0U) == 0xC0U) {
    return 2;
  }
  if ((lead & 0xF0U) == 0xE0U) {
    return 3;
  }
  if ((lead & 0xF8U) == 0xF0U) {
    return 4;
  }
  return 1;
}

// The start of a body that is not a Status, on one line: whitespace runs become one space. The
// cut never splits a UTF-8 character, because the message ends up in JSON logs, and a JSON
// encoder rejects a broken one.
std::string bodySnippet(std::string_view body) {
  std::string snippet;
  std::size_t at = 0;
  while (at < body.size()) {
    const char c = body[at];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (!snippet.empty() && snippet.back() != ' ' && snippet.size() < kBodySnippetLength) {
        snippet += ' ';
      }
      ++at;
      continue;
    }
    const std::size_t length =
        std::min(sequenceLength(static_cast<unsigned char>(c)), body.size() - at);
    if (snippet.size() + length > kBodySnippetLength) {
      break;
    }
    snippet.append(body.substr(at, length));
    at += length;
  }
  while (!snippet.empty() && snippet.back() == ' ') {
    snippet.pop_back();
  }
  return snippet;
}

std::vector<FieldCause> decodeCauses(const json& details) {
  std::vector<FieldCause> causes;
  const auto found = details.find("causes");
  if (found == details.end() || !found->is_array()) {
    return causes;
  }
  for (const auto& cause : *found) {
    if (cause.is_object()) {
      causes.push_back({text(cause, "field"), text(cause, "reason"), text(cause, "message")});
    }
  }
  return causes;
}

// Fills reason, message, causes and retryAfter from a Status object; returns the Status's code.
std::optional<int> decodeStatus(const json& status, Error& error) {
  error.reason = text(status, "reason");
  error.message = text(status, "message");
  const auto details = status.find("details");
  if (details != status.end() && details->is_object()) {
    error.causes = decodeCauses(*details);
    const auto retryAfter = integerAt(*details, "retryAfterSeconds");
    if (retryAfter && *retryAfter > 0) {
      error.retryAfter = std::chrono::seconds(*retryAfter);
    }
  }
  const auto code = integerAt(status, "code");
  if (code && *code >= 100 && *code <= 599) {
    return static_cast<int>(*code);
  }
  return std::nullopt;
}

}  // namespace

std::string_view kindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kNotFound:
      return "NotFound";
    case ErrorKind::kAlreadyExists:
      return "AlreadyExists";
    case ErrorKind::kConflict:
      return "Conflict";
    case ErrorKind::kGone:
      return "Gone";
    case ErrorKind::kInvalid:
      return "Invalid";
    case ErrorKind::kBadRequest:
      return "BadRequest";
    case ErrorKind::kUnauthorized:
      return "Unauthorized";
    case ErrorKind::kForbidden:
      return "Forbidden";
    case ErrorKind::kTooManyRequests:
      return "TooManyRequests";
    case ErrorKind::kTimeout:
      return "Timeout";
    case ErrorKind::kServerError:
      return "ServerError";
    case ErrorKind::kTransport:
      return "Transport";
    case ErrorKind::kOther:
      return "Other";
  }
  return "Other";
}

bool Error::retryable() const {
  switch (kind) {
    case ErrorKind::kTooManyRequests:
    case ErrorKind::kTimeout:
    case ErrorKind::kTransport:
      return true;
    case ErrorKind::kServerError:
      // 501 Not Implemented and 505 will not change on a second try.
      return httpStatus == 500 || httpStatus == 502 || httpStatus == 503 || httpStatus == 504;
    default:
      return false;
  }
}

Error decodeError(int httpStatus, std::string_view body,
                  std::optional<std::string_view> retryAfterHeader) {
  Error error;
  error.httpStatus = httpStatus;
  const json document = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (document.is_object() && text(document, "kind") == "Status") {
    const auto code = decodeStatus(document, error);
    if (code && httpStatus < 400) {
      error.httpStatus = *code;
    }
  } else {
    error.message = bodySnippet(body);
  }
  error.kind = kindOfReason(error.reason).value_or(kindOfStatus(error.httpStatus));
  if (retryAfterHeader) {
    if (const auto seconds = parseRetryAfter(*retryAfterHeader)) {
      error.retryAfter = seconds;
    }
  }
  return error;
}

Error transportError(std::string message) {
  Error error;
  error.kind = ErrorKind::kTransport;
  error.message = std::move(message);
  return error;
}

std::string describe(const Error& error) {
  std::string line(error.reason.empty() ? kindName(error.kind) : error.reason);
  if (error.httpStatus != 0) {
    line += " (" + std::to_string(error.httpStatus) + ")";
  }
  std::string detail = error.message;
  for (const auto& cause : error.causes) {
    const std::string& text = cause.message.empty() ? cause.reason : cause.message;
    const std::string formatted = cause.field.empty() ? text : cause.field + ": " + text;
    if (formatted.empty() || error.message.find(formatted) != std::string::npos) {
      continue;
    }
    detail += detail.empty() ? formatted : "; " + formatted;
  }
  if (!detail.empty()) {
    line += ": " + detail;
  }
  return line;
}

}  // namespace autotune::k8s
