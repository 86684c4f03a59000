#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "libcore/base/result.hpp"

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
