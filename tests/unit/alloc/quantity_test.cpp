// Kubernetes resource quantities (libcore/alloc/quantity.hpp), table-driven. Expected values
// worked out by hand from the Quantity documentation (apimachinery resource.Quantity: binary
// suffixes Ki..Ei, decimal n u m k M G T P E, exponents, Value()/MilliValue() round up), not
// from the code under test. Moved here with the parser from the kubelet stand-in's tests.

#include "libcore/alloc/quantity.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <iterator>
#include <string>

#include "libcore/alloc/rng.hpp"

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
      // 34 significant digits: the last one is beyond the 100-bit mantissa and still rounds up
      {"cpu", "1.000000000000000000000000000000001", 1001},
      {"cpu", "1.000000000000000000000000000000000", 1000},
      {"memory", "1Gi", 1073741824},
      {"memory", "1.5Gi", 1610612736},
      {"memory", "1Ki", 1024},
      {"memory", "1k", 1000},
      {"memory", "1e3", 1000},
      {"memory", "1E3", 1000},                // exponent, not the exa suffix
      {"memory", "2E", 2000000000000000000},  // exa suffix
      {"memory", "1e-3", 1},                  // a thousandth of a byte is one byte
      {"memory", "129M", 129000000},
      {"memory", "1000000.5Ti", 1099512177531813888},    // 1000000.5 * 2^40: fraction after shift
      {"memory", "4194303.999Ti", 4611686017327876277},  // just below 2^62 after rounding up
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
      {"memory", "9Ei", kBad},            // 9 * 2^60 > 2^62
      {"memory", "4194304.001Ti", kBad},  // just above 2^62
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

// Property: for 2,000 seeded random quantities "<int>[.<frac>]<suffix>", the parser's value
// equals the exact product computed here from a table of suffix multipliers written out as
// numbers, rounded up, in millis (cpu) and whole units.
TEST_CASE("quantities equal the exact value rounded up, over random decimals and suffixes",
          "[alloc]") {
  __extension__ typedef __int128 i128;
  struct Multiplier {
    const char* suffix;
    i128 numerator;  // value of one unit of the suffix = numerator / denominator
    i128 denominator;
  };
  const Multiplier table[] = {
      {"", 1, 1},
      {"n", 1, 1'000'000'000},
      {"u", 1, 1'000'000},
      {"m", 1, 1'000},
      {"k", 1'000, 1},
      {"M", 1'000'000, 1},
      {"G", 1'000'000'000, 1},
      {"T", 1'000'000'000'000, 1},
      {"Ki", 1'024, 1},
      {"Mi", 1'048'576, 1},
      {"Gi", 1'073'741'824, 1},
      {"Ti", 1'099'511'627'776, 1},
      {"e2", 100, 1},
      {"e-2", 1, 100},
  };
  SplitMix64 rng(20261124);
  for (int i = 0; i < 2000; ++i) {
    const Multiplier& m = table[rng.below(std::size(table))];
    const std::uint64_t whole = rng.below(1'000'000);
    const unsigned fracDigits = static_cast<unsigned>(rng.below(4));  // 0..3 digits
    std::uint64_t fracScale = 1;
    for (unsigned d = 0; d < fracDigits; ++d) {
      fracScale *= 10;
    }
    const std::uint64_t frac = rng.below(fracScale);
    std::string text = std::to_string(whole);
    if (fracDigits > 0) {
      std::string f = std::to_string(frac);
      text += '.';
      text.append(fracDigits - f.size(), '0');
      text += f;
    }
    text += m.suffix;
    // value = (whole * fracScale + frac) / fracScale * numerator / denominator
    const i128 num = (static_cast<i128>(whole) * fracScale + frac) * m.numerator;
    const i128 den = static_cast<i128>(fracScale) * m.denominator;
    auto ceilDiv = [](i128 a, i128 b) { return (a + b - 1) / b; };
    CAPTURE(text);
    const i128 limit = static_cast<i128>(1) << 62;  // the parser's documented range
    for (const bool milli : {false, true}) {
      CAPTURE(milli);
      const i128 exact = ceilDiv(milli ? num * 1000 : num, den);
      auto got = milli ? parseQuantityMilli(text) : parseQuantity(text);
      if (exact > limit) {
        REQUIRE_FALSE(got);
        CHECK(got.error().code == "invalid");
      } else {
        REQUIRE(got);
        CHECK(*got == static_cast<std::int64_t>(exact));
      }
    }
  }
}
