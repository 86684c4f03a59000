// Quantities and versions, the two value types Kubernetes adds to CEL for DRA: exact parsing and
// ordering on their own, then as the CEL functions quantity(), semver() and their methods
// (the upstream library's documented examples).

#include "libcore/cel/quantity.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "libcore/cel/semver.hpp"
#include "tests/unit/cel/selector_support.hpp"

using kc::cel::Quantity;
using kc::cel::Version;
using kc::cel::test::checkVerdict;
using kc::cel::test::makeDevice;

namespace {

Quantity q(const std::string& text) {
  auto parsed = Quantity::parse(text);
  REQUIRE(parsed.ok());
  return *parsed;
}

Version v(const std::string& text) {
  auto parsed = Version::parse(text);
  REQUIRE(parsed.ok());
  return *parsed;
}

}  // namespace

TEST_CASE("Quantity: Kubernetes quantity text read exactly", "[cel][quantity]") {
  // Expected values worked out by hand from the suffix definitions.
  auto [text, units] = GENERATE(table<std::string, std::string>({
      {"0", "0"},
      {"-0", "0"},
      {"0.000", "0"},
      {"2", "2"},
      {"+3", "3"},
      {"-2", "-2"},
      {"1.", "1"},
      {".5", "0.5"},
      {"500m", "0.5"},
      {"100m", "0.1"},
      {"1u", "0.000001"},
      {"1n", "0.000000001"},
      {"1k", "1000"},
      {"16G", "16000000000"},
      {"1M", "1000000"},
      {"1E", "1000000000000000000"},
      {"1e3", "1000"},
      {"1E3", "1000"},
      {"1e+3", "1000"},
      {"15e-1", "1.5"},
      {"1Ki", "1024"},
      {"0.1Ki", "102.4"},
      {"1Mi", "1048576"},
      {"1Gi", "1073741824"},
      {"1.5Gi", "1610612736"},
      {"80Gi", "85899345920"},
      {"1Ei", "1152921504606846976"},
      // Finer than a nano-unit rounds away from zero, as ParseQuantity does.
      {"0.1n", "0.000000001"},
      {"-0.1n", "-0.000000001"},
      {"1.0000000001", "1.000000001"},
      {"1e-100", "0.000000001"},
      // Binary and exponent forms are capped at 2^63-1 units, as upstream.
      {"8Ei", "9223372036854775807"},
      {"1e100", "9223372036854775807"},
      {"-1e100", "-9223372036854775807"},
      // Decimal forms are exact up to 10^28 units.
      {"10000000000000000000000000000", "10000000000000000000000000000"},
      {"9999999999999999999999999999.999999999", "9999999999999999999999999999.999999999"},
  }));
  CAPTURE(text);
  CHECK(q(text).toString() == units);
}

TEST_CASE("Quantity: text that is not a quantity is refused", "[cel][quantity]") {
  for (const std::string text : {"",
                                 "-",
                                 ".",
                                 "+.",
                                 "1K",
                                 "Mi",
                                 "Three",
                                 "1,3G",
                                 "1Gi ",
                                 " 1",
                                 "1e",
                                 "1e+",
                                 "1.2.3",
                                 "1GiB",
                                 "0x10",
                                 "1ee3",
                                 "1e3.5",
                                 "1 k",
                                 "100000000000000000000000000000",
                                 "10000000000000000000000000000.1"}) {
    CAPTURE(text);
    const auto parsed = Quantity::parse(text);
    CHECK_FALSE(parsed.ok());
    if (!parsed.ok()) {
      CHECK(parsed.error().code == kc::errc::kInvalid);
    }
  }
}

TEST_CASE("Quantity: comparison is exact across suffixes", "[cel][quantity]") {
  CHECK(q("1Gi") == q("1073741824"));
  CHECK(q("100m") == q("0.1"));
  CHECK(q("1e3") == q("1k"));
  CHECK(q("1.5Gi") == q("1536Mi"));
  CHECK(q("0.2G") == q("200M"));
  CHECK(q("50M") < q("50Mi"));
  CHECK(q("999m") < q("1"));
  CHECK(q("1000000001n") > q("1"));
  CHECK(q("-1") < q("0"));
  CHECK(q("80Gi") > q("80G"));
}

TEST_CASE("Quantity: sign, integers and arithmetic", "[cel][quantity]") {
  CHECK(q("-3").sign() == -1);
  CHECK(q("0").sign() == 0);
  CHECK(q("1n").sign() == 1);
  CHECK(q("50k").asInteger() == std::optional<std::int64_t>(50000));
  CHECK(q("-3").asInteger() == std::optional<std::int64_t>(-3));
  CHECK(q("1000m").asInteger() == std::optional<std::int64_t>(1));
  CHECK(q("8Ei").asInteger() == std::numeric_limits<std::int64_t>::max());
  CHECK_FALSE(q("1.5").isInteger());
  CHECK_FALSE(q("10000000000000000000000000000").isInteger());
  CHECK(Quantity::fromUnits(-5).toString() == "-5");
  CHECK(q("50k").plus(q("20k")).value() == q("70k"));
  CHECK(q("1Gi").minus(q("1Mi")).value() == q("1023Mi"));
  const Quantity huge = q("10000000000000000000000000000");
  CHECK_FALSE(huge.plus(huge).ok());
  CHECK_FALSE(q("-10000000000000000000000000000").minus(huge).ok());
}

TEST_CASE("Version: semver 2.0.0 text as blang/semver reads it", "[cel][semver]") {
  for (const std::string text :
       {"1.2.3", "0.0.0", "1.2.3-alpha.1+build.5", "1.2.3+build", "1.0.0-0.3.7", "1.0.0-x-y-z.--",
        "1.2.3+build-1.x", "18446744073709551615.0.0"}) {
    CAPTURE(text);
    const auto parsed = Version::parse(text);
    REQUIRE(parsed.ok());
    CHECK(parsed->toString() == text);
  }
  for (const std::string text :
       {"", "1", "1.2", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", "1.2.3-", "1.2.3+", "1.2.3-01",
        "1.2.3-a..b", "1.2.3.4", "18446744073709551616.0.0", "1.2.3-a_b", "1.2.-3", "a.b.c"}) {
    CAPTURE(text);
    CHECK_FALSE(Version::parse(text).ok());
  }
  const Version parsed = v("1.2.3-rc.1+b7");
  CHECK(parsed.major == 1);
  CHECK(parsed.minor == 2);
  CHECK(parsed.patch == 3);
  CHECK(parsed.prerelease == std::vector<std::string>{"rc", "1"});
  CHECK(parsed.build == std::vector<std::string>{"b7"});
}

TEST_CASE("Version: precedence is semver.org's", "[cel][semver]") {
  // semver.org section 11's example, in ascending order.
  const std::vector<std::string> ascending = {"1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta",
                                              "1.0.0-beta",  "1.0.0-beta.2",  "1.0.0-beta.11",
                                              "1.0.0-rc.1",  "1.0.0",         "1.0.1",
                                              "1.1.0",       "2.0.0",         "10.0.0"};
  for (std::size_t i = 0; i < ascending.size(); ++i) {
    for (std::size_t j = 0; j < ascending.size(); ++j) {
      CAPTURE(ascending[i], ascending[j]);
      const int expected = i < j ? -1 : (i > j ? 1 : 0);
      CHECK(kc::cel::compareVersions(v(ascending[i]), v(ascending[j])) == expected);
    }
  }
  CHECK(kc::cel::compareVersions(v("1.0.0+a"), v("1.0.0+b")) == 0);  // build does not count
}

TEST_CASE("CEL quantity and semver functions: the upstream library's examples", "[cel]") {
  const auto device = makeDevice("gpu.kubecomp.io")
                          .capacity("memory", "80Gi")
                          .version("driverVersion", "535.104.5")
                          .build();
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(quantity("1Gi") == quantity("1073741824"))", "true"},
      {R"(quantity("100m") == quantity("0.1"))", "true"},
      {R"(quantity("1e3") == quantity("1k"))", "true"},
      {R"(quantity("200M").compareTo(quantity("0.2G")) == 0)", "true"},
      {R"(quantity("50M").compareTo(quantity("50Mi")) == -1)", "true"},
      {R"(quantity("50Mi").compareTo(quantity("50M")) == 1)", "true"},
      {R"(quantity("150Mi").isGreaterThan(quantity("100Mi")))", "true"},
      {R"(quantity("50Mi").isGreaterThan(quantity("100Mi")))", "false"},
      {R"(quantity("50M").isLessThan(quantity("100M")))", "true"},
      {R"(quantity("100M").isLessThan(quantity("50M")))", "false"},
      {R"(quantity("50k").add(quantity("20k")) == quantity("70k"))", "true"},
      {R"(quantity("50k").add(20) == quantity("50020"))", "true"},
      {R"(quantity("50k").sub(quantity("20k")) == quantity("30k"))", "true"},
      {R"(quantity("50k").sub(20000) == quantity("30k"))", "true"},
      {R"(quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20"))", "true"},
      {R"(quantity("50k").asInteger() == 50000)", "true"},
      {R"(quantity("50000000G").isInteger() && quantity("50k").isInteger())", "true"},
      {R"(quantity("1.5").asInteger() == 1)", "error: cannot convert value to integer"},
      {R"(sign(quantity("-1")) == -1 && sign(quantity("0")) == 0)", "true"},
      {R"(isQuantity("1.3G") && isQuantity("1.3Gi") && isQuantity("10000k"))", "true"},
      {R"(isQuantity("1,3G") || isQuantity("200K") || isQuantity("Three") || isQuantity("Mi"))",
       "false"},
      {R"(quantity("200K") == quantity("200k"))", "error: unknown suffix"},
      {R"(device.capacity["gpu.kubecomp.io"].memory.compareTo(quantity("40Gi")) >= 0)", "true"},
      {R"(device.capacity["gpu.kubecomp.io"].memory.isLessThan(quantity("85899345921")))", "true"},
      {R"(device.capacity["gpu.kubecomp.io"].memory == quantity("85899345920"))", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].driverVersion.isGreaterThan(semver("535.0.0")))",
       "true"},
      {R"(device.attributes["gpu.kubecomp.io"].driverVersion.compareTo(semver("535.104.5")) == 0)",
       "true"},
      {R"(device.attributes["gpu.kubecomp.io"].driverVersion.isLessThan(semver("535.104.5-rc.1")))",
       "false"},
      {R"(semver("1.0.0-alpha").isLessThan(semver("1.0.0")))", "true"},
      {R"(semver("1.0.0-alpha.1").compareTo(semver("1.0.0-alpha.beta")) == -1)", "true"},
      {R"(semver("1.0.0+a") == semver("1.0.0+b"))", "true"},
      {R"(semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 &&
          semver("1.2.3").patch() == 3)",
       "true"},
      {R"(isSemver("1.2.3") && !isSemver("v1.2.3") && !isSemver("1.2"))", "true"},
      {R"(semver("v1") == semver("1.0.0"))", "error: version 'v1'"},
  }));
  checkVerdict(expression, expected, device);
}
