#include "libcore/base/result.hpp"

#include <catch2/catch.hpp>
#include <memory>
#include <string>

namespace {

kc::Result<int> parsePositive(const std::string& text) {
  try {
    std::size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used != text.size() || value <= 0) {
      return kc::makeError("invalid", "not a positive integer: " + text);
    }
    return value;
  } catch (const std::exception&) {
    return kc::makeError("invalid", "not a number: " + text);
  }
}

}  // namespace

TEST_CASE("Result carries either a value or an error") {
  auto good = parsePositive("42");
  REQUIRE(good.ok());
  CHECK(*good == 42);
  CHECK(good.valueOr(7) == 42);

  auto bad = parsePositive("4x2");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
  CHECK(bad.error().message == "not a positive integer: 4x2");
  CHECK(bad.valueOr(7) == 7);
}

TEST_CASE("Result holds move-only values and moves them out") {
  kc::Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  REQUIRE(r.ok());
  std::unique_ptr<int> owned = std::move(r).value();
  REQUIRE(owned);
  CHECK(*owned == 5);
}

TEST_CASE("Status distinguishes success from a failure reason") {
  kc::Status ok = kc::okStatus();
  kc::Status failed = kc::makeError("conflict", "object was modified");
  CHECK(ok.ok());
  CHECK_FALSE(failed.ok());
  CHECK(failed.error() == kc::Error{"conflict", "object was modified"});
}

namespace {

// A richer error a layer may carry (like kube::ApiError): branchable fields plus toError().
struct HttpError {
  int status = 0;
  kc::Error toError() const {
    return kc::makeError(status >= 500 ? "unavailable" : "invalid",
                         "HTTP " + std::to_string(status));
  }
};

}  // namespace

TEST_CASE("Result with a richer error keeps it, and converts to Result<T> for reporting") {
  kc::Result<std::unique_ptr<int>, HttpError> rich = HttpError{503};
  REQUIRE_FALSE(rich.ok());
  CHECK(rich.error().status == 503);
  kc::Result<std::unique_ptr<int>> reported = std::move(rich);
  CHECK(reported.error() == kc::Error{"unavailable", "HTTP 503"});
  kc::Result<std::unique_ptr<int>, HttpError> value = std::make_unique<int>(9);
  kc::Result<std::unique_ptr<int>> moved = std::move(value);  // move-only values move over
  REQUIRE(moved.ok());
  CHECK(**moved == 9);
  // Only errors that say toError() convert; kc::Error itself needs no conversion.
  static_assert(std::is_convertible_v<kc::Result<int, HttpError>, kc::Result<int>>);
  static_assert(!std::is_convertible_v<kc::Result<int, std::string>, kc::Result<int>>);
  static_assert(!std::is_convertible_v<kc::Result<int>, kc::Result<int, HttpError>>);
}
