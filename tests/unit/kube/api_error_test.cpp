#include "libcore/kube/api_error.hpp"

#include <catch2/catch.hpp>

using kc::kube::parseStatusError;

TEST_CASE("Status bodies become typed errors", "[kube][error]") {
  SECTION("409 Conflict vs AlreadyExists") {
    auto conflict = parseStatusError(
        409,
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Operation cannot be fulfilled on pods \"p\": the object has been modified; please apply your changes to the latest version and try again","reason":"Conflict","details":{"name":"p","kind":"pods"},"code":409})");
    CHECK(conflict.isConflict());
    CHECK_FALSE(conflict.isAlreadyExists());
    CHECK(conflict.details["name"] == "p");
    CHECK(conflict.toError().code == "conflict");
    auto exists = parseStatusError(
        409,
        R"({"kind":"Status","status":"Failure","message":"pods \"p\" already exists","reason":"AlreadyExists","code":409})");
    CHECK(exists.isAlreadyExists());
    CHECK_FALSE(exists.isConflict());
    CHECK(exists.toError().code == "already_exists");
    CHECK(exists.message == "pods \"p\" already exists");
  }
  SECTION("410 as Expired and as Gone") {
    CHECK(parseStatusError(410, R"({"kind":"Status","reason":"Expired","code":410})").isExpired());
    CHECK(parseStatusError(410, R"({"kind":"Status","reason":"Gone","code":410})").isExpired());
    auto ev = kc::kube::statusFromJson(nlohmann::json::parse(
        R"j({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 657887 (680402)","reason":"Expired","code":410})j"));
    CHECK(ev.isExpired());
    CHECK(ev.httpCode == 410);
  }
  SECTION("non-Status body keeps the HTTP code") {
    auto e = parseStatusError(502, "<html>bad gateway</html>");
    CHECK(e.httpCode == 502);
    CHECK(e.isServerError());
    CHECK(e.isRetryable());
    CHECK(e.reason.empty());
    CHECK(e.message == "<html>bad gateway</html>");
  }
  SECTION("Retry-After from header or details") {
    CHECK(parseStatusError(429, "", "7").retryAfter == std::chrono::seconds(7));
    CHECK(
        parseStatusError(
            429,
            R"({"kind":"Status","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":3}})")
            .retryAfter == std::chrono::seconds(3));
    CHECK(parseStatusError(429, "", "garbage").retryAfter == std::chrono::seconds(0));
  }
}

TEST_CASE("error codes map to kc::Error words", "[kube][error]") {
  auto [code, word] = GENERATE(table<int, std::string>({{404, "not_found"},
                                                        {410, "expired"},
                                                        {422, "invalid"},
                                                        {400, "invalid"},
                                                        {403, "forbidden"},
                                                        {401, "unauthorized"},
                                                        {429, "throttled"},
                                                        {503, "server_error"},
                                                        {418, "http_418"}}));
  CAPTURE(code);
  CHECK(parseStatusError(code, "").toError().code == word);
  CHECK(kc::kube::transportError("connect refused").toError().code == "unavailable");
}

TEST_CASE("ApiResult is kc::Result with the API error, and reports as kc::Result",
          "[kube][error]") {
  static_assert(std::is_same_v<kc::kube::ApiResult<int>, kc::Result<int, kc::kube::ApiError>>);
  static_assert(std::is_same_v<kc::kube::ApiStatus, kc::Result<kc::Ok, kc::kube::ApiError>>);
  kc::kube::ApiResult<int> good = 7;
  kc::kube::ApiResult<int> missing = parseStatusError(
      404,
      R"({"kind":"Status","status":"Failure","message":"pods \"p\" not found","reason":"NotFound","code":404})");
  REQUIRE(missing.error().isNotFound());  // callers that branch keep the typed error
  // Callers that only report get the one kc::Error shape: the value kept, the error mapped.
  kc::Result<int> reportedGood = good;
  kc::Result<int> reportedMissing = missing;
  REQUIRE(reportedGood.ok());
  CHECK(*reportedGood == 7);
  REQUIRE_FALSE(reportedMissing.ok());
  CHECK(reportedMissing.error() ==
        kc::Error{"not_found", "HTTP 404 NotFound: pods \"p\" not found"});
  kc::Status throttled = kc::kube::ApiStatus(parseStatusError(429, ""));
  CHECK(throttled.error().code == "throttled");
}
