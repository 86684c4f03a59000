// Kubernetes resource quantities (libcore/alloc/quantity.hpp), table-driven. Expected values
// worked out by hand from the Quantity documentation (apimachinery resource.Quantity: binary
// suffixes Ki..Ei, decimal n u m k M G T P E, exponents, Value()/MilliValue() round up), not
// from the code under test. Moved here with the parser from the kubelet stand-in's tests.

#include "libcore/alloc/quantity.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>

using namespace kc::alloc;

namespace {
constexpr std::int64_t kBad = -1;  // "an error is expected" in the tables below
}

TEST_CASE("quantities: millicores for cpu, whole units rounded up otherwise, bad text refused",
          "[alloc]") {
  auto [resource, text, expected] = GENERATE(table<std::string, std::string, std::int64_t>({
      {"cpu", "500m", 500},
      {"cpu", "2", 2000},
      {"cpu", "0.1", 100},
      {"cpu", "1.5", 1500},
      {"cpu", ".5", 500},
      {"cpu", "100u", 1},  // 0.1 millicore rounds up to 1
      {"cpu", "5n", 1},
      {"cpu", "1e-3", 1},
      {"cpu", "+3", 3000},
      {"memory", "1Gi", 1073741824},
      {"memory", "1.5Gi", 1610612736},
      {"memory", "1Ki", 1024},
      {"memory", "1k", 1000},
      {"memory", "1e3", 1000},
      {"memory", "1E3", 1000},                // exponent, not the exa suffix
      {"memory", "2E", 2000000000000000000},  // exa suffix
      {"memory", "1e-3", 1},                  // a thousandth of a byte is one byte
      {"memory", "129M", 129000000},
      {"memory", "128974848", 128974848},
      {"pods", "110", 110},
      {"pods", "0.5", 1},
      {"kubecomp.io/gpu", "0", 0},
      {"memory", "", kBad},
      {"memory", "abc", kBad},
      {"memory", "-1", kBad},
      {"memory", "1Xi", kBad},
      {"memory", "1e", kBad},
      {"memory", "1 Gi", kBad},
      {"memory", "9Ei", kBad},  // 9 * 2^60 > 2^62
      {"memory", "1.2.3", kBad},
      {"memory", "1e1000000", kBad},
  }));
  CAPTURE(resource, text);
  auto got = parseResourceAmount(resource, text);
  if (expected == kBad) {
    REQUIRE_FALSE(got);
    CHECK(got.error().code == "invalid");
  } else {
    REQUIRE(got);
    CHECK(*got == expected);
  }
}

TEST_CASE("resource amounts as the Node shows them", "[alloc]") {
  CHECK(formatResourceAmount("cpu", 1500) == "1500m");
  CHECK(formatResourceAmount("cpu", 2000) == "2");
  CHECK(formatResourceAmount("memory", 34359738368) == "34359738368");
  CHECK(formatResourceAmount("kubecomp.io/gpu", 3) == "3");
}
