// What compile() refuses and how it says so: not CEL (kSyntax), CEL that upstream refuses too
// (kInvalid), valid CEL outside the subset (kUnsupported, which the scheduler reports rather
// than blaming the user), and the limits on length, nesting and evaluation cost.

#include <catch2/catch.hpp>
#include <string>

#include "libcore/cel/cel.hpp"
#include "tests/unit/cel/selector_support.hpp"

using kc::cel::compile;
using kc::cel::CompileError;
using kc::cel::test::makeDevice;
using kc::cel::test::verdict;
using Kind = CompileError::Kind;

namespace {

std::string kindName(Kind k) {
  switch (k) {
    case Kind::kSyntax:
      return "syntax";
    case Kind::kInvalid:
      return "invalid";
    case Kind::kUnsupported:
      return "unsupported";
    default:
      return "too long";
  }
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    out += s;
  }
  return out;
}

}  // namespace

TEST_CASE("CEL compile: each refusal is classified and explained", "[cel]") {
  auto [expression, kind, fragment] = GENERATE(table<std::string, std::string, std::string>({
      // Not CEL.
      {"", "syntax", "unexpected end of expression"},
      {R"(device.driver ==)", "syntax", "unexpected end of expression"},
      {R"((device.driver == "a")", "syntax", "expected ')'"},
      {R"(device.driver == "a"))", "syntax", "unexpected ')'"},
      {R"(device.driver = "a")", "syntax", "unexpected character '='"},
      {R"(device.driver == "a)", "syntax", "unterminated string"},
      {"device.driver == \"a\nb\"", "syntax", "unterminated string"},
      {R"(1 +* 2 == 3)", "syntax", "unexpected '*'"},
      {R"(device..driver == "a")", "syntax", "expected a field name"},
      {R"([1, 2 == [1])", "syntax", "expected ']'"},
      {R"(size(1,) == 1)", "syntax", "unexpected ')'"},
      {R"("\q" == "q")", "syntax", "invalid escape"},
      {R"("\uD800" == "x")", "syntax", "not a Unicode code point"},
      {R"(9223372036854775808 > 0)", "syntax", "out of int64 range"},
      {R"(device.driver == "a" @)", "syntax", "unexpected character '@'"},
      {R"(if > 1)", "syntax", "reserved identifier 'if'"},
      {R"("a" "b")", "syntax", "unexpected 'b'"},
      {"\"\xff\" == \"a\"", "syntax", "not valid UTF-8"},
      // CEL, but refused upstream as well.
      {R"(nodevice.driver == "a")", "invalid", "undeclared reference to 'nodevice'"},
      {R"(device.model == "a")", "invalid", "undefined field 'model' of device"},
      {R"(device.driver == 1)", "invalid",
       "no matching overload for '==' applied to (string, int)"},
      {R"(device.driver)", "invalid", "must evaluate to bool, not string"},
      {R"(device.attributes["d"])", "invalid", "must evaluate to bool, not map(string, dyn)"},
      {R"(1 + 1)", "invalid", "must evaluate to bool, not int"},
      {R"(device.attributes["d"].cores + "x")", "invalid", "must evaluate to bool, not string"},
      {R"(quantity("1") < quantity("2"))", "invalid", "'<' applied to (Quantity, Quantity)"},
      {R"(device.capacity["d"].memory == "1Gi")", "invalid", "(Quantity, string)"},
      {R"(quantity(1) == quantity("1"))", "invalid", "'quantity' applied to (int)"},
      {R"("a".compareTo("b") == 0)", "invalid", "'compareTo' applied to (string, string)"},
      {R"(has(device))", "invalid", "has() takes one field selection"},
      {R"(5 in device.attributes["d"])", "invalid", "'in' applied to (int"},
      {R"(device.driver.size.x == 1)", "invalid", "does not support field selection"},
      {R"(device["driver"] == "x")", "invalid", "'[]' applied to (device, string)"},
      {R"(!5)", "invalid", "'!' applied to (int)"},
      {R"(true ? 1 : "a")", "invalid", "'?:' applied to (bool, int, string)"},
      {R"(cel.bind(1, 2, true))", "invalid", "cel.bind() takes a variable name"},
      {R"(device.attributes["d"].x > 1.5 && undeclared)", "invalid", "undeclared reference"},
      // Valid CEL outside the subset.
      {R"(device.attributes["d"].models.exists(m, m == "a"))", "unsupported", "macro 'exists'"},
      {R"(device.attributes["d"].models.all(m, m == "a"))", "unsupported", "macro 'all'"},
      {R"(device.attributes["d"].model.matches("^a"))", "unsupported", "function 'matches'"},
      {R"(device.attributes["d"].model.lowerAscii() == "a")", "unsupported", "'lowerAscii'"},
      {R"(device.attributes["d"].models.includes("a"))", "unsupported", "'includes'"},
      {R"(device.attributes["d"].memory > 1.5)", "unsupported", "double literal 1.5"},
      {R"(device.attributes["d"].count > 1u)", "unsupported", "uint literal 1u"},
      {R"(b"abc" == b"abc")", "unsupported", "bytes literal"},
      {R"({"a": 1}["a"] == 1)", "unsupported", "map literal"},
      {R"(device.attributes["d"].?model.orValue("") == "a")", "unsupported", "optional field"},
      {R"(int(device.attributes["d"].x) == 1)", "unsupported", "function 'int'"},
      {R"(type(device.driver) == string)", "unsupported", "function 'type'"},
      {R"(device.driver == string)", "unsupported", "type identifier 'string'"},
      {R"(timestamp("2024-01-01T00:00:00Z") < timestamp("2025-01-01T00:00:00Z"))", "unsupported",
       "function 'timestamp'"},
      {R"(math.greatest(1, 2) == 2)", "unsupported", "function 'math.greatest'"},
      {R"(.device.driver == "a")", "unsupported", "leading-dot"},
      {R"(google.protobuf.Int64Value{value: 1} == 1)", "unsupported", "message construction"},
      {R"(semver("1.2.3", true).major() == 1)", "unsupported", "function 'semver' with 2"},
      {repeat("(", 70) + "true" + repeat(")", 70), "unsupported", "nesting deeper than 64"},
      {"true" + repeat(" && (1" + repeat(" + 1", 70) + " > 0)", 1), "unsupported", "nesting"},
      // A syntax error wins over an unsupported construct before it.
      {R"(1.5 > ()", "syntax", "unexpected end of expression"},
  }));
  CAPTURE(expression);
  const auto program = compile(expression);
  REQUIRE_FALSE(program.ok());
  const CompileError& e = program.error();
  CHECK(kindName(e.kind) == kind);
  CHECK_THAT(e.message, Catch::Matchers::Contains(fragment));
  CHECK(e.position <= expression.size());
  CHECK(e.unsupported() == (kind == "unsupported"));
  if (e.unsupported()) {
    CHECK_THAT(e.message, Catch::Matchers::StartsWith("outside the supported subset: "));
  }
}

TEST_CASE("CEL compile: errors as kc::Error name code and position", "[cel]") {
  const auto unsupported = compile(R"(device.attributes["d"].models.exists(m, m == "a"))");
  REQUIRE_FALSE(unsupported.ok());
  const kc::Error e = unsupported.error().toError();
  CHECK(e.code == kc::errc::kUnsupported);
  CHECK(e.message ==
        "CEL selector at position 29: outside the supported subset: macro "
        "'exists' with 2 argument(s)");
  const auto syntax = compile("device.driver ==");
  REQUIRE_FALSE(syntax.ok());
  CHECK(syntax.error().position == 16);
  CHECK(syntax.error().toError().code == kc::errc::kInvalid);
  // Result<Program, CompileError> reads as Result<Program> where only the report matters.
  const kc::Result<kc::cel::Program> plain = compile("device.driver == 1");
  REQUIRE_FALSE(plain.ok());
  CHECK(plain.error().code == kc::errc::kInvalid);
}

TEST_CASE("CEL compile: the length limit is upstream's 10 KiB", "[cel]") {
  const std::string base = R"(device.driver == "gpu.kubecomp.io")";
  const std::string atLimit = base + std::string(kc::cel::kMaxExpressionLength - base.size(), ' ');
  REQUIRE(atLimit.size() == kc::cel::kMaxExpressionLength);
  CHECK(verdict(atLimit, makeDevice("gpu.kubecomp.io").build()) == "true");
  const auto over = compile(atLimit + " ");
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().kind == Kind::kTooLong);
  CHECK(over.error().toError().code == kc::errc::kTooLarge);
}

TEST_CASE("CEL compile: nesting is bounded, long flat chains are not", "[cel]") {
  const auto device = makeDevice("gpu.kubecomp.io").str("model", "a100").build();
  // 60 levels of parentheses are fine; 10,000 are refused without recursing 10,000 deep.
  CHECK(verdict(repeat("(", 60) + "true" + repeat(")", 60), device) == "true");
  for (const std::string& deep :
       {repeat("(", 10000), repeat("[", 10000), repeat("!(", 5000) + "true", repeat("f(", 5000),
        repeat("true ? true : ", 700) + "false", "device" + repeat(".a", 5000) + " == 1",
        repeat("-", 9000) + "1 == 1"}) {
    const auto program = compile(deep);
    if (!program.ok()) {
      CHECK(program.error().kind != Kind::kTooLong);
    }
  }
  const auto nested = compile(repeat("(", 10000));
  REQUIRE_FALSE(nested.ok());
  CHECK(nested.error().unsupported());
  // Runs of ! and - are not nesting (and an even run cancels out, as cel-go).
  CHECK(verdict(repeat("!", 5000) + "true", device) == "true");
  CHECK(verdict(repeat("-", 5000) + "1 == 1", device) == "true");
  // A chain of || is one level however long: 500 alternatives.
  std::string alternatives = R"(cel.bind(m, device.attributes["gpu.kubecomp.io"].model, )";
  for (int i = 0; i < 500; ++i) {
    alternatives += "m == \"m" + std::to_string(i) + "\" || ";
  }
  CHECK(verdict(alternatives + R"(m == "a100"))", device) == "true");
  CHECK(verdict(alternatives + R"(m == "h100"))", device) == "false");
}

TEST_CASE("CEL evaluate: the cost budget stops runaway growth", "[cel]") {
  // Each binding doubles a string: 2^25 copies of ten characters would be 320 MiB.
  std::string expression = R"(cel.bind(s0, "0123456789", )";
  for (int i = 1; i <= 25; ++i) {
    expression += "cel.bind(s" + std::to_string(i) + ", s" + std::to_string(i - 1) + " + s" +
                  std::to_string(i - 1) + ", ";
  }
  expression += "size(s25) > 0" + repeat(")", 26);
  const auto device = makeDevice("gpu.kubecomp.io").build();
  CHECK_THAT(verdict(expression, device), Catch::Matchers::Contains("cost limit"));
  // The same shape within budget evaluates.
  std::string small = R"(cel.bind(s0, "0123456789", cel.bind(s1, s0 + s0, size(s1) == 20)))";
  CHECK(verdict(small, device) == "true");
  // A search is charged by the product of the lengths, before it runs.
  const std::string search =
      R"(cel.bind(a, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", )"
      R"(cel.bind(b, a + a + a + a + a + a + a + a, cel.bind(c, b + b + b + b + b + b + b + b, )"
      R"(cel.bind(d, c + c + c + c + c + c + c + c, cel.bind(e, d + d + d + d + d + d + d + d, )"
      R"(e.contains(d + "b")))))))";
  CHECK_THAT(verdict(search, device), Catch::Matchers::Contains("cost limit"));
}
