// CEL device selectors evaluated against devices: the upstream documentation's examples, then
// one table per part of the semantics (device access, missing keys, has(), in, && and ||
// absorbing errors, precedence, types, strings, lists, integers, cel.bind). Expected verdicts
// are CEL's as specified and as cel-go answers, written by hand.

#include <catch2/catch.hpp>
#include <string>
#include <tuple>

#include "tests/unit/cel/selector_support.hpp"

using kc::cel::Device;
using kc::cel::test::checkVerdict;
using kc::cel::test::makeDevice;
using kc::cel::test::verdict;

namespace {

// A composable GPU as kubecomp's driver publishes it.
Device gpu() {
  return makeDevice("gpu.kubecomp.io")
      .str("model", "a100")
      .integer("cores", 108)
      .boolean("pcie", true)
      .version("driverVersion", "535.104.5")
      .str("ext.example.com/family", "ampere")
      .capacity("memory", "80Gi")
      .capacity("slices", "7")
      .build();
}

}  // namespace

TEST_CASE("CEL selector: the examples of the upstream API and documentation", "[cel]") {
  // CELDeviceSelector's doc comment: driver "dra.example.com" with attributes "model" and
  // "ext.example.com/family" and capacity "modules".
  const Device documented = makeDevice("dra.example.com")
                                .str("model", "m1")
                                .str("ext.example.com/family", "f1")
                                .capacity("modules", "4")
                                .boolean("someBool", true)
                                .boolean("anotherBool", false)
                                .build();
  // kubernetes.io DRA examples: a device of driver.example.com of type gpu with 64Gi.
  const Device website =
      makeDevice("driver.example.com").str("type", "gpu").capacity("memory", "64Gi").build();
  const Device gpuExample =
      makeDevice("gpu.example.com").str("model", "a100").capacity("memory", "40Gi").build();

  auto [expression, expected, which] = GENERATE(table<std::string, std::string, int>({
      {R"(device.driver == "dra.example.com")", "true", 0},
      {R"(device.attributes["dra.example.com"].model == "m1")", "true", 0},
      {R"(device.attributes["ext.example.com"].family == "f1")", "true", 0},
      {R"(device.capacity["dra.example.com"].modules == quantity("4"))", "true", 0},
      {R"(cel.bind(dra, device.attributes["dra.example.com"], dra.someBool && dra.anotherBool))",
       "false", 0},
      {R"(cel.bind(dra, device.attributes["dra.example.com"], dra.someBool || dra.anotherBool))",
       "true", 0},
      {R"(device.attributes["driver.example.com"].type == "gpu" &&
          device.capacity["driver.example.com"].memory == quantity("64Gi"))",
       "true", 1},
      {R"(device.attributes["dra.example.com"].type == "gpu")", "error: no such key: type", 1},
      {R"(device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100")",
       "true", 2},
      {R"(device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0)", "true", 2},
      {R"(device.capacity["gpu.example.com"].memory.compareTo(quantity("41Gi")) >= 0)", "false", 2},
      // The driver guard absorbs the missing domain's "no such key" on another driver's device.
      {R"(device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100")",
       "false", 1},
  }));
  const Device devices[] = {documented, website, gpuExample};
  checkVerdict(expression, expected, devices[which]);
}

TEST_CASE("CEL selector: device fields, attributes by select and by index, capacity", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(device.driver == "gpu.kubecomp.io")", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].model == "a100")", "true"},
      {R"(device.attributes["gpu.kubecomp.io"]["model"] == "a100")", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].`model` == "a100")", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].cores == 108)", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].cores >= 100 && device.attributes["gpu.kubecomp.io"].cores < 200)",
       "true"},
      {R"(device.attributes["gpu.kubecomp.io"].pcie)", "true"},
      {R"(device.attributes["ext.example.com"].family == "ampere")", "true"},
      {R"(device.capacity["gpu.kubecomp.io"].memory == quantity("80Gi"))", "true"},
      {R"(device.capacity["gpu.kubecomp.io"].memory.isGreaterThan(quantity("80Gi")))", "false"},
      {R"(device.capacity["gpu.kubecomp.io"].slices.compareTo(quantity("7")) == 0)", "true"},
      {R"(device.allowMultipleAllocations == false)", "true"},
      {R"(!device.allowMultipleAllocations)", "true"},
      {R"(size(device.attributes["gpu.kubecomp.io"]) == 4)", "true"},
      {R"(size(device.attributes) == 2 && size(device.capacity) == 1)", "true"},
      // An absent domain reads as an empty map (upstream), so only its keys are missing.
      {R"(size(device.attributes["absent.example.com"]) == 0)", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].model)", "error: evaluated to string, not bool"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: a missing attribute is an error, not false", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(device.attributes["gpu.kubecomp.io"].missing == "x")", "error: no such key: missing"},
      {R"(device.attributes["gpu.kubecomp.io"]["missing"] == "x")", "error: no such key: missing"},
      {R"(device.attributes["gpu.kubecomp.io"].missing != "x")", "error: no such key"},
      {R"(!(device.attributes["gpu.kubecomp.io"].missing == "x"))", "error: no such key"},
      {R"(device.attributes["absent.example.com"].model == "a100")", "error: no such key: model"},
      {R"(device.capacity["gpu.kubecomp.io"].missing.isLessThan(quantity("1")))",
       "error: no such key: missing"},
      {R"(device.capacity["absent.example.com"].memory == quantity("1"))",
       "error: no such key: memory"},
      // Where: the position of the failing selection is named.
      {R"(device.attributes["gpu.kubecomp.io"].missing == "x")", "error: (at position 36)"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: has() tests presence without failing", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(has(device.attributes["gpu.kubecomp.io"].model))", "true"},
      {R"(has(device.attributes["gpu.kubecomp.io"].missing))", "false"},
      {R"(has(device.attributes["absent.example.com"].model))", "false"},
      {R"(has(device.capacity["gpu.kubecomp.io"].memory))", "true"},
      {R"(has(device.capacity["gpu.kubecomp.io"].compute))", "false"},
      {R"(has(device.driver) && has(device.allowMultipleAllocations))", "true"},
      // Upstream answers every domain as present (an absent one is an empty map).
      {R"(has(device.attributes.anything))", "true"},
      {R"(has(device.attributes["gpu.kubecomp.io"].missing) &&
          device.attributes["gpu.kubecomp.io"].missing == "x")",
       "false"},
      {R"(!has(device.attributes["gpu.kubecomp.io"].missing) ||
          device.attributes["gpu.kubecomp.io"].missing == "x")",
       "true"},
      {R"(has(device.attributes["gpu.kubecomp.io"].model) ?
          device.attributes["gpu.kubecomp.io"].model == "a100" : false)",
       "true"},
      {R"(has(device.attributes["gpu.kubecomp.io"].model.x))",
       "error: does not support field selection"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: in over list literals and map keys", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(device.attributes["gpu.kubecomp.io"].model in ["a100", "h100"])", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].model in ["h100", "h200"])", "false"},
      {R"(device.attributes["gpu.kubecomp.io"].model in [])", "false"},
      {R"(device.attributes["gpu.kubecomp.io"].cores in [1, 108])", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].cores in ["108"])", "false"},
      {R"(device.driver in [device.attributes["ext.example.com"].family, "gpu.kubecomp.io"])",
       "true"},
      {R"("model" in device.attributes["gpu.kubecomp.io"])", "true"},
      {R"("missing" in device.attributes["gpu.kubecomp.io"])", "false"},
      {R"("gpu.kubecomp.io" in device.attributes)", "true"},
      // Unlike lookups and has(), `in` sees only the domains the device has.
      {R"("absent.example.com" in device.attributes)", "false"},
      {R"("memory" in device.capacity["gpu.kubecomp.io"])", "true"},
      {R"(device.attributes["gpu.kubecomp.io"].cores in device.attributes["gpu.kubecomp.io"])",
       "false"},
      {R"(device.attributes["gpu.kubecomp.io"].missing in ["a"])", "error: no such key"},
      {R"("a" in device.attributes["gpu.kubecomp.io"].model)", "error: no such overload"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: && and || absorb errors from either side", "[cel]") {
  // CEL's logical operators are commutative: an operand that decides the result wins over an
  // error on either side; only without one does the error surface.
  const std::string missing = R"(device.attributes["gpu.kubecomp.io"].missing)";
  const std::string model = R"(device.attributes["gpu.kubecomp.io"].model)";
  auto [expression, expected] = GENERATE_COPY(table<std::string, std::string>({
      {"false && " + missing, "false"},
      {missing + " && false", "false"},
      {"true || " + missing, "true"},
      {missing + " || true", "true"},
      {"true && " + missing, "error: no such key: missing"},
      {missing + " && true", "error: no such key: missing"},
      {"false || " + missing, "error: no such key: missing"},
      {missing + " || " + missing + " || true", "true"},
      {missing + " && " + missing + " && false", "false"},
      {missing + " == 1 || " + missing + " == 2", "error: no such key"},
      // A non-bool operand is an error of its own, and is absorbed the same way.
      {model + " || true", "true"},
      {model + " && false", "false"},
      {model + " && true", "error: no such overload"},
      {"!" + model, "error: no such overload"},
      // ?: evaluates only the branch taken.
      {"true ? true : " + missing, "true"},
      {"false ? " + missing + " : false", "false"},
      {missing + " ? true : false", "error: no such key"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: operator precedence and associativity", "[cel]") {
  // Each row would answer differently under the wrong precedence or associativity.
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {"true || false && false", "true"},  // && binds tighter than ||
      {"!false && false", "false"},        // ! binds tighter than &&
      {"!(false && false)", "true"},
      {"1 + 2 * 3 == 7", "true"},  // * before +
      {"(1 + 2) * 3 == 9", "true"},
      {"10 - 4 - 3 == 3", "true"},  // left-associative
      {"2 * 3 % 4 == 2", "true"},   // (2 * 3) % 4
      {"100 / 10 / 5 == 2", "true"},
      {"1 < 2 == true", "true"},                       // relations are one level, left to right
      {"true ? false : true || true", "false"},        // ?: binds loosest
      {"true ? false : true ? true : true", "false"},  // ?: is right-associative
      {"1 + 1 == 2 && 2 * 2 == 4 || false", "true"},
      {"-3 + 5 == 2", "true"},
      {"--3 == 3", "true"},  // as cel-go: an even run of - is dropped
      {"---3 == -3", "true"},
      {"!!true", "true"},
      {"!!!true", "false"},
      {"-(2 - 5) == 3", "true"},
      {"7 / 2 == 3 && -7 / 2 == -3 && -7 % 3 == -1", "true"},  // truncation toward zero
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: mixed types: == is false, ordering is an error", "[cel]") {
  const std::string model = R"(device.attributes["gpu.kubecomp.io"].model)";
  const std::string cores = R"(device.attributes["gpu.kubecomp.io"].cores)";
  const std::string version = R"(device.attributes["gpu.kubecomp.io"].driverVersion)";
  auto [expression, expected] = GENERATE_COPY(table<std::string, std::string>({
      {model + " == 5", "false"},
      {model + " != 5", "true"},
      {cores + " == \"108\"", "false"},
      {model + " == null", "false"},
      {"null == null", "true"},
      {model + " < 5", "error: no such overload"},
      {cores + " > \"a\"", "error: no such overload"},
      {cores + " >= true", "error: no such overload"},
      {"false < true && \"a\" < \"b\" && \"abc\" < \"abd\" && \"\" < \"a\"", "true"},
      // A version (or quantity) compared with another type errs, whichever way cel-go's
      // receiver goes: the version's answer is an error, a string's is false.
      {version + " == \"535.104.5\"", "error: no such overload"},
      {"\"535.104.5\" == " + version, "false"},
      {version + " == semver(\"535.104.5\")", "true"},
      {cores + " + 1 == 109", "true"},
      {model + " + 1 == 109", "error: no such overload"},
      {model + ".startsWith(\"a\")", "true"},
      {cores + ".startsWith(\"1\")", "error: no such overload"},
      {version + ".major() == 535", "true"},
      {model + ".major() == 535", "error: no such overload"},
      {model + "[0] == \"a\"", "error: no such overload: '[]' applied to (string, int)"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: strings: functions, escapes, code points", "[cel]") {
  const std::string model = R"(device.attributes["gpu.kubecomp.io"].model)";
  auto [expression, expected] = GENERATE_COPY(table<std::string, std::string>({
      {model + ".startsWith(\"a1\")", "true"},
      {model + ".startsWith(\"h\")", "false"},
      {model + ".endsWith(\"00\")", "true"},
      {model + ".contains(\"10\")", "true"},
      {model + ".contains(\"x\")", "false"},
      {"size(" + model + ") == 4 && " + model + ".size() == 4", "true"},
      {"size(\"h\\u00e9llo\") == 5 && size(\"héllo\") == 5", "true"},  // code points, not bytes
      {"\"a\" + \"b\" == \"ab\"", "true"},
      {"'it\\'s' == \"it's\"", "true"},
      {"\"a\\nb\" == 'a\\x0Ab' && \"\\101\" == \"A\"", "true"},
      {"\"\\u00e9\" == \"é\" && \"\\U0001F600\" == \"😀\"", "true"},
      {"r\"\\d+\" == \"\\\\d+\"", "true"},
      {"\"\"\"two\nlines\"\"\" == \"two\\nlines\"", "true"},
      {"'''it's''' == \"it's\"", "true"},
      {"\"\\\"\\\\\\t\" == '\"\\\\\\x09'", "true"},
      {"\"a\" // a comment\n == \"a\"", "true"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: lists and integer arithmetic, with overflow as an error", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {"[1, 2, 3][1] == 2", "true"},
      {"size([1, 2]) == 2 && [1, 2].size() == 2", "true"},
      {"[1, 2] + [3] == [1, 2, 3]", "true"},
      {"[1, [2]] == [1, [2]] && [1] != [1, 1]", "true"},
      {"[device.driver][0] == \"gpu.kubecomp.io\"", "true"},
      {"[1, 2][2] == 1", "error: out of range"},
      {"[1, 2][-1] == 1", "error: out of range"},
      {"0x10 == 16 && 0XfF == 255", "true"},
      {"-9223372036854775808 < 0", "true"},
      {"9223372036854775807 + 1 > 0", "error: integer overflow"},
      {"-9223372036854775807 - 2 < 0", "error: integer overflow"},
      {"4611686018427387904 * 2 > 0", "error: integer overflow"},
      {"-9223372036854775808 / -1 > 0", "error: integer overflow"},
      {"-9223372036854775808 % -1 == 0", "error: integer overflow"},
      {"-(-9223372036854775808) > 0", "error: integer overflow"},
      {"1 / 0 == 0", "error: division by zero"},
      {"1 % 0 == 0", "error: modulus by zero"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: cel.bind names a value once, lazily as upstream", "[cel]") {
  auto [expression, expected] = GENERATE(table<std::string, std::string>({
      {R"(cel.bind(g, device.attributes["gpu.kubecomp.io"], g.model == "a100" && g.cores >= 100))",
       "true"},
      {R"(cel.bind(m, device.capacity["gpu.kubecomp.io"].memory,
                   m.isGreaterThan(quantity("40Gi")) && m.isLessThan(quantity("100Gi"))))",
       "true"},
      // An error bound but never used does not matter; used, it does.
      {R"(cel.bind(x, device.attributes["gpu.kubecomp.io"].missing, true))", "true"},
      {R"(cel.bind(x, device.attributes["gpu.kubecomp.io"].missing, false || x))",
       "error: no such key: missing"},
      {R"(cel.bind(x, device.attributes["gpu.kubecomp.io"].missing, false && x))", "false"},
      {"cel.bind(x, 1, cel.bind(x, 2, x == 2))", "true"},  // the inner one shadows
      {"cel.bind(x, 1, cel.bind(y, x + 1, y == 2)) && cel.bind(x, 5, x == 5)", "true"},
      {"cel.bind(device, 5, device == 5)", "true"},
  }));
  checkVerdict(expression, expected, gpu());
}

TEST_CASE("CEL selector: one program evaluates many devices", "[cel]") {
  const auto program = kc::cel::compile(
      R"(device.attributes["gpu.kubecomp.io"].model in ["a100", "h100"] &&
         device.capacity["gpu.kubecomp.io"].memory.compareTo(quantity("40Gi")) >= 0)");
  REQUIRE(program.ok());
  CHECK(program->expression().starts_with("device.attributes"));
  const auto withMemory = [](const char* model, const char* memory) {
    return makeDevice("gpu.kubecomp.io").str("model", model).capacity("memory", memory).build();
  };
  using K = kc::cel::Outcome::Kind;
  CHECK(evaluate(*program, withMemory("a100", "80Gi")).kind == K::kTrue);
  CHECK(evaluate(*program, withMemory("h100", "40Gi")).kind == K::kTrue);
  CHECK(evaluate(*program, withMemory("h100", "39Gi")).kind == K::kFalse);
  CHECK(evaluate(*program, withMemory("t4", "16Gi")).kind == K::kFalse);
  const auto noModel = makeDevice("gpu.kubecomp.io").capacity("memory", "80Gi").build();
  const auto o = evaluate(*program, noModel);
  CHECK(o.kind == K::kError);
  CHECK_FALSE(o.matches());
  CHECK_THAT(o.error, Catch::Matchers::Contains("no such key: model"));
  // A default Program (never compiled) is an error, not a crash.
  CHECK(evaluate(kc::cel::Program{}, noModel).kind == K::kError);
}
