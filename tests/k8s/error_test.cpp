#include "k8s/error.h"

#include <gtest/gtest.h>

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "object/read.h"

namespace autotune::k8s {
// Failure messages name the kind instead of printing its number.
void PrintTo(ErrorKind kind, std::ostream* out) { *out << kindName(kind); }
}  // namespace autotune::k8s

namespace {

using autotune::k8s::decodeError;
using autotune::k8s::describe;
using autotune::k8s::Error;
using autotune::k8s::ErrorKind;
using autotune::k8s::FieldCause;
using autotune::k8s::transportError;
using autotune::object::exceededQuota;
using std::chrono::seconds;

// Bodies as kube-apiserver sends them (one line of JSON; only the indentation here is ours).

constexpr std::string_view kInvalidBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"AutotuneJob.autotune.io \"x\" is invalid: [spec.parallelism: Invalid value: 0: )"
    R"(spec.parallelism in body should be greater than or equal to 1, spec.search.metric: )"
    R"(Unsupported value: \"speed\": supported values: \"throughput\", \"latency\", \"flops\"]",)"
    R"("reason":"Invalid","details":{"name":"x","group":"autotune.io","kind":"AutotuneJob",)"
    R"("causes":[{"reason":"FieldValueInvalid","message":"Invalid value: 0: spec.parallelism in )"
    R"(body should be greater than or equal to 1","field":"spec.parallelism"},)"
    R"({"reason":"FieldValueNotSupported","message":"Unsupported value: \"speed\": supported )"
    R"(values: \"throughput\", \"latency\", \"flops\"","field":"spec.search.metric"}]},"code":422})";

constexpr std::string_view kAlreadyExistsBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"pods \"gpt2-large-z1-gas1-tmbspg3\" already exists","reason":"AlreadyExists",)"
    R"("details":{"name":"gpt2-large-z1-gas1-tmbspg3","kind":"pods"},"code":409})";

constexpr std::string_view kConflictBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"Operation cannot be fulfilled on autotunejobs.autotune.io \"gpt2-large\": the )"
    R"(object has been modified; please apply your changes to the latest version and try again",)"
    R"("reason":"Conflict","details":{"name":"gpt2-large","group":"autotune.io",)"
    R"("kind":"autotunejobs"},"code":409})";

// The object of a watch's ERROR event when the watch started from a compacted resourceVersion.
constexpr std::string_view kExpiredWatchStatus =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"json("message":"too old resource version: 1043 (2311)","reason":"Expired","code":410})json";

constexpr std::string_view kTooManyRequestsBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"Too many requests, please try again later.","reason":"TooManyRequests",)"
    R"("details":{"causes":[{"message":"Too many requests, please try again later."}],)"
    R"("retryAfterSeconds":1},"code":429})";

constexpr std::string_view kNotFoundBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"pods \"missing\" not found","reason":"NotFound",)"
    R"("details":{"name":"missing","kind":"pods"},"code":404})";

constexpr std::string_view kBadRequestBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"json: cannot unmarshal string into Go struct field PodSpec.spec.containers of )"
    R"(type []v1.Container","reason":"BadRequest","code":400})";

constexpr std::string_view kUnauthorizedBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"Unauthorized","reason":"Unauthorized","code":401})";

constexpr std::string_view kForbiddenBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"pods is forbidden: User \"system:serviceaccount:autotune-system:)"
    R"(autotune-operator\" cannot create resource \"pods\" in API group \"\" in the namespace )"
    R"(\"default\"","reason":"Forbidden","details":{"kind":"pods"},"code":403})";

constexpr std::string_view kTimeoutBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"Timeout: request did not complete within requested timeout - context )"
    R"(deadline exceeded","reason":"Timeout","details":{},"code":504})";

constexpr std::string_view kServerTimeoutBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"The list operation against pods could not be completed at this time, please )"
    R"(try again.","reason":"ServerTimeout","details":{"name":"list","kind":"pods",)"
    R"("retryAfterSeconds":2},"code":500})";

constexpr std::string_view kInternalErrorBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"Internal error occurred: failed calling webhook \"validate.autotune.io\": )"
    R"(context deadline exceeded","reason":"InternalError","details":{"causes":[{"message":)"
    R"("failed calling webhook \"validate.autotune.io\": context deadline exceeded"}]},)"
    R"("code":500})";

constexpr std::string_view kServiceUnavailableBody =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
    R"("message":"the server is currently unable to handle the request","reason":)"
    R"("ServiceUnavailable","code":503})";

constexpr std::string_view kBadGatewayHtml =
    "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx/1.25.3</center>\r\n"
    "</body>\r\n</html>\r\n";

// --- decodeError: Status bodies -----------------------------------------------------------------

TEST(DecodeError, AValidationFailureKeepsEveryFieldCause) {
  const Error error = decodeError(422, kInvalidBody, std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kInvalid);
  EXPECT_EQ(error.httpStatus, 422);
  EXPECT_EQ(error.reason, "Invalid");
  EXPECT_TRUE(error.message.starts_with(R"(AutotuneJob.autotune.io "x" is invalid: [)"));
  ASSERT_EQ(error.causes.size(), 2U);
  EXPECT_EQ(error.causes[0].field, "spec.parallelism");
  EXPECT_EQ(error.causes[0].reason, "FieldValueInvalid");
  EXPECT_EQ(error.causes[0].message,
            "Invalid value: 0: spec.parallelism in body should be greater than or equal to 1");
  EXPECT_EQ(error.causes[1].field, "spec.search.metric");
  EXPECT_EQ(error.causes[1].reason, "FieldValueNotSupported");
  EXPECT_FALSE(error.retryable());
}

TEST(DecodeError, ACreateOfATakenNameIsAlreadyExistsNotConflict) {
  const Error error = decodeError(409, kAlreadyExistsBody, std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kAlreadyExists);
  EXPECT_EQ(error.message, R"(pods "gpt2-large-z1-gas1-tmbspg3" already exists)");
  EXPECT_FALSE(error.retryable());
}

TEST(DecodeError, AStaleResourceVersionOnUpdateIsConflict) {
  const Error error = decodeError(409, kConflictBody, std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kConflict);
  EXPECT_EQ(error.reason, "Conflict");
  EXPECT_FALSE(error.retryable());
}

TEST(DecodeError, AnExpiredResourceVersionIsGone) {
  const Error error = decodeError(410, kExpiredWatchStatus, std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kGone);
  EXPECT_EQ(error.reason, "Expired");
  EXPECT_EQ(error.message, "too old resource version: 1043 (2311)");
  EXPECT_FALSE(error.retryable());
}

TEST(DecodeError, AWatchErrorEventInsideA200AnswerTakesTheStatusOwnCode) {
  const Error fromEvent = decodeError(0, kExpiredWatchStatus, std::nullopt);
  EXPECT_EQ(fromEvent.kind, ErrorKind::kGone);
  EXPECT_EQ(fromEvent.httpStatus, 410);

  const Error fromOk = decodeError(200, kExpiredWatchStatus, std::nullopt);
  EXPECT_EQ(fromOk.kind, ErrorKind::kGone);
  EXPECT_EQ(fromOk.httpStatus, 410);
}

TEST(DecodeError, ThrottlingWaitsAsLongAsTheRetryAfterHeaderSays) {
  const Error error = decodeError(429, kTooManyRequestsBody, "5");
  EXPECT_EQ(error.kind, ErrorKind::kTooManyRequests);
  EXPECT_EQ(error.retryAfter, seconds(5));
  EXPECT_TRUE(error.retryable());
}

TEST(DecodeError, ThrottlingWithoutTheHeaderWaitsRetryAfterSecondsFromTheBody) {
  const Error error = decodeError(429, kTooManyRequestsBody, std::nullopt);
  EXPECT_EQ(error.retryAfter, seconds(1));
}

TEST(DecodeError, AnUnreadableRetryAfterHeaderIsIgnored) {
  EXPECT_EQ(decodeError(429, kTooManyRequestsBody, "soon").retryAfter, seconds(1));
  EXPECT_EQ(decodeError(429, "", "Wed, 21 Oct 2015 07:28:00 GMT").retryAfter, std::nullopt);
  EXPECT_EQ(decodeError(429, "", " 3 ").retryAfter, seconds(3));
}

TEST(DecodeError, EachStatusReasonGivesItsKind) {
  struct Case {
    std::string_view body;
    int status;
    ErrorKind kind;
  };
  const std::vector<Case> cases = {
      {kNotFoundBody, 404, ErrorKind::kNotFound},
      {kBadRequestBody, 400, ErrorKind::kBadRequest},
      {kUnauthorizedBody, 401, ErrorKind::kUnauthorized},
      {kForbiddenBody, 403, ErrorKind::kForbidden},
      {kTimeoutBody, 504, ErrorKind::kTimeout},
      {kServerTimeoutBody, 500, ErrorKind::kTimeout},
      {kInternalErrorBody, 500, ErrorKind::kServerError},
      {kServiceUnavailableBody, 503, ErrorKind::kServerError},
  };
  for (const auto& [body, status, kind] : cases) {
    const Error error = decodeError(status, body, std::nullopt);
    EXPECT_EQ(error.kind, kind) << body;
    EXPECT_EQ(error.httpStatus, status) << body;
    EXPECT_FALSE(error.message.empty()) << body;
  }
}

TEST(DecodeError, AServerTimeoutCarriesItsRetryAfter) {
  const Error error = decodeError(500, kServerTimeoutBody, std::nullopt);
  EXPECT_EQ(error.retryAfter, seconds(2));
  EXPECT_TRUE(error.retryable());
}

// --- decodeError: bodies that are not a Status --------------------------------------------------

TEST(DecodeError, AProxyHtmlPageGetsItsKindFromTheHttpStatus) {
  const Error error = decodeError(502, kBadGatewayHtml, std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kServerError);
  EXPECT_TRUE(error.reason.empty());
  EXPECT_EQ(error.message,
            "<html> <head><title>502 Bad Gateway</title></head> <body> <center><h1>502 Bad "
            "Gateway</h1></center> <hr><center>nginx/1.25.3</center> </body> </html>");
  EXPECT_TRUE(error.retryable());
}

TEST(DecodeError, PlainTextFromTheServerBecomesTheMessage) {
  const Error error = decodeError(404, "404 page not found\n", std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kNotFound);
  EXPECT_EQ(error.message, "404 page not found");
}

TEST(DecodeError, AnEmptyBodyStillGetsItsKind) {
  struct Case {
    int status;
    ErrorKind kind;
  };
  const std::vector<Case> cases = {
      {400, ErrorKind::kBadRequest},  {401, ErrorKind::kUnauthorized},
      {403, ErrorKind::kForbidden},   {404, ErrorKind::kNotFound},
      {409, ErrorKind::kConflict},    {410, ErrorKind::kGone},
      {422, ErrorKind::kInvalid},     {429, ErrorKind::kTooManyRequests},
      {500, ErrorKind::kServerError}, {502, ErrorKind::kServerError},
      {503, ErrorKind::kServerError}, {504, ErrorKind::kTimeout},
      {405, ErrorKind::kOther},       {418, ErrorKind::kOther},
  };
  for (const auto& [status, kind] : cases) {
    const Error error = decodeError(status, "", std::nullopt);
    EXPECT_EQ(error.kind, kind) << status;
    EXPECT_EQ(error.httpStatus, status);
    EXPECT_TRUE(error.message.empty());
  }
}

TEST(DecodeError, JsonThatIsNotAStatusIsTreatedAsText) {
  const Error error = decodeError(500, R"({"error":"upstream connect error"})", std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kServerError);
  EXPECT_TRUE(error.reason.empty());
  EXPECT_EQ(error.message, R"({"error":"upstream connect error"})");
}

TEST(DecodeError, ALongBodyIsCutTo200Characters) {
  const std::string body = "<html>" + std::string(1000, 'x') + "</html>";
  const Error error = decodeError(502, body, std::nullopt);
  EXPECT_EQ(error.message, body.substr(0, 200));
}

TEST(DecodeError, TheCutNeverSplitsAUtf8Character) {
  const std::string body = std::string(199, 'x') + "\xC3\xA9" + "tail";  // é across the cut
  const Error error = decodeError(502, body, std::nullopt);
  EXPECT_EQ(error.message, std::string(199, 'x'));
}

TEST(DecodeError, FieldsOfTheWrongTypeAreIgnored) {
  const Error error = decodeError(
      409, R"({"kind":"Status","reason":7,"message":["x"],"details":{"causes":"no"},"code":"409"})",
      std::nullopt);
  EXPECT_EQ(error.kind, ErrorKind::kConflict);
  EXPECT_TRUE(error.reason.empty());
  EXPECT_TRUE(error.message.empty());
  EXPECT_TRUE(error.causes.empty());
}

// --- retryable ----------------------------------------------------------------------------------

TEST(Retryable, ThrottlingTimeoutsUnavailableServersAndBrokenConnectionsAreRetried) {
  EXPECT_TRUE(decodeError(429, "", std::nullopt).retryable());
  EXPECT_TRUE(decodeError(504, "", std::nullopt).retryable());
  EXPECT_TRUE(decodeError(500, "", std::nullopt).retryable());
  EXPECT_TRUE(decodeError(502, "", std::nullopt).retryable());
  EXPECT_TRUE(decodeError(503, "", std::nullopt).retryable());
  EXPECT_TRUE(transportError("connection reset by peer").retryable());
}

TEST(Retryable, AnswersThatWillNotChangeOnASecondTryAreNot) {
  for (const int status : {400, 401, 403, 404, 405, 409, 410, 422, 501, 505}) {
    EXPECT_FALSE(decodeError(status, "", std::nullopt).retryable()) << status;
  }
  EXPECT_FALSE(decodeError(409, kAlreadyExistsBody, std::nullopt).retryable());
}

// --- transportError -----------------------------------------------------------------------------

TEST(TransportError, HasNoHttpStatus) {
  const Error error = transportError("connect to 10.96.0.1:443: Connection refused");
  EXPECT_EQ(error.kind, ErrorKind::kTransport);
  EXPECT_EQ(error.httpStatus, 0);
  EXPECT_EQ(error.message, "connect to 10.96.0.1:443: Connection refused");
}

// --- describe -----------------------------------------------------------------------------------

TEST(Describe, NamesTheReasonAndStatusAndDoesNotRepeatCausesTheMessageSpellsOut) {
  const Error error = decodeError(422, kInvalidBody, std::nullopt);
  EXPECT_EQ(describe(error), "Invalid (422): " + error.message);
}

TEST(Describe, ASingleCauseAlreadyInTheMessageIsNotRepeated) {
  Error error;
  error.kind = ErrorKind::kInvalid;
  error.httpStatus = 422;
  error.reason = "Invalid";
  error.message =
      R"(AutotuneJob.autotune.io "x" is invalid: spec.parallelism: Invalid value: 0: should be )"
      R"(at least 1)";
  error.causes = {FieldCause{"spec.parallelism", "FieldValueInvalid",
                             "Invalid value: 0: should be at least 1"}};
  EXPECT_EQ(describe(error),
            R"(Invalid (422): AutotuneJob.autotune.io "x" is invalid: spec.parallelism: Invalid )"
            R"(value: 0: should be at least 1)");
}

TEST(Describe, AppendsCausesTheMessageLeavesOut) {
  Error error;
  error.kind = ErrorKind::kInvalid;
  error.httpStatus = 422;
  error.reason = "Invalid";
  error.message = R"(AutotuneJob.autotune.io "x" is invalid)";
  error.causes = {FieldCause{"spec.parallelism", "FieldValueInvalid", "must be at least 1"},
                  FieldCause{"spec.search.metric", "FieldValueRequired", ""}};
  EXPECT_EQ(describe(error),
            R"(Invalid (422): AutotuneJob.autotune.io "x" is invalid; spec.parallelism: must be )"
            R"(at least 1; spec.search.metric: FieldValueRequired)");
}

TEST(Describe, WithoutAStatusBodyNamesTheKind) {
  EXPECT_EQ(describe(decodeError(404, "", std::nullopt)), "NotFound (404)");
  EXPECT_EQ(describe(decodeError(502, "<html>bad gateway</html>", std::nullopt)),
            "ServerError (502): <html>bad gateway</html>");
  EXPECT_EQ(describe(transportError("TLS handshake failed: certificate verify failed")),
            "Transport: TLS handshake failed: certificate verify failed");
}

TEST(Describe, ACauseWithoutAFieldThatTheMessageSpellsOutIsNotRepeated) {
  const Error error = decodeError(429, kTooManyRequestsBody, std::nullopt);
  EXPECT_EQ(describe(error), "TooManyRequests (429): Too many requests, please try again later.");

  const Error webhook = decodeError(500, kInternalErrorBody, std::nullopt);
  EXPECT_EQ(describe(webhook),
            R"(InternalError (500): Internal error occurred: failed calling webhook )"
            R"("validate.autotune.io": context deadline exceeded)");
}

// The quota admission's words, as the API server writes them for a refused Pod create.
TEST(ExceededQuota, NamesTheQuotaOfAQuotaRefusalAndNothingElse) {
  EXPECT_EQ(exceededQuota(R"(pods "gpt2-large-z1-gas1-tmbspg3" is forbidden: exceeded quota: )"
                          R"(gpus, requested: requests.nvidia.com/gpu=16, used: )"
                          R"(requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16)"),
            "gpus");
  EXPECT_EQ(exceededQuota(R"(pods "x" is forbidden: User "u" cannot create resource "pods")"),
            std::nullopt);
}

}  // namespace
