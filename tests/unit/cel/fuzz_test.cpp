// Fuzzed selectors: valid expressions covering the subset, mutated thousands of times (seeded,
// deterministic). compile() must answer every one with a program or a well-formed error, and
// every program must evaluate to one of the three outcomes, the same one twice.

#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "libcore/cel/cel.hpp"
#include "tests/support/text_mutator.hpp"
#include "tests/unit/cel/selector_support.hpp"

using kc::cel::CompileError;
using kc::cel::Outcome;
using kc::cel::test::makeDevice;

namespace {

const std::vector<std::string>& seeds() {
  static const std::vector<std::string> kSeeds = {
      R"(device.driver == "gpu.kubecomp.io" && device.attributes["gpu.kubecomp.io"].model == "a100")",
      R"(device.capacity["gpu.kubecomp.io"].memory.compareTo(quantity("40Gi")) >= 0)",
      R"(has(device.attributes["gpu.kubecomp.io"].model) ? device.attributes["gpu.kubecomp.io"].cores > 64 : false)",
      R"(device.attributes["gpu.kubecomp.io"].model in ["a100", 'h100', r"t4"] || !device.allowMultipleAllocations)",
      R"(cel.bind(g, device.attributes["gpu.kubecomp.io"], g.model.startsWith("a") && size(g) == 4))",
      R"("model" in device.attributes["gpu.kubecomp.io"] && device.attributes["gpu.kubecomp.io"]["model"].contains("10"))",
      R"(device.attributes["gpu.kubecomp.io"].driverVersion.isGreaterThan(semver("535.0.0-rc.1+b")))",
      R"(quantity("1.5Gi").add(1024).sub(quantity("100m")).isLessThan(device.capacity["gpu.kubecomp.io"].memory))",
      R"((1 + 2 * 3 - -4) / 2 % 5 == 1 && [1, 2, 3][1] == 2 && "a\n\u00e9" + "b" != "c")",
      R"(((((device.driver.endsWith(".io")))) ? 0x1F : 9223372036854775807) > -9223372036854775808)",
      R"(device.attributes["d"].models.exists(m, m == 1.5) || {"a": b"x"}["a"] == 1u)",
      R"(cel.bind(x, device.attributes["gpu.kubecomp.io"].missing, false && x) || isQuantity("1e3"))",
  };
  return kSeeds;
}

std::vector<kc::cel::Device> devices() {
  return {
      makeDevice("gpu.kubecomp.io")
          .str("model", "a100")
          .integer("cores", 108)
          .boolean("pcie", true)
          .version("driverVersion", "535.104.5")
          .capacity("memory", "80Gi")
          .build(),
      makeDevice("other.example.com").str("model", "x").multipleAllocations(true).build(),
      makeDevice("").build(),
  };
}

}  // namespace

TEST_CASE("CEL fuzz: mutated selectors never crash compile or evaluate", "[cel][fuzz]") {
  std::mt19937 rng(20240724);
  // CEL's punctuation and the letters of the seeds, a quote of each kind, a backslash, a
  // non-ASCII byte (invalid UTF-8 alone) and a NUL.
  const std::string alphabet =
      std::string("abcdefgilmnoqrstuvxyz._()[]{}\"'`\\!&|=<>+-*/%?:, 0123456789\n\xc3\xa9") +
      std::string(1, '\0');
  const auto targets = devices();
  int compiled = 0;
  int errors = 0;
  for (int i = 0; i < 40000; ++i) {
    const std::string& seed = seeds()[static_cast<std::size_t>(i) % seeds().size()];
    const std::string text = kc::testing::mutateText(seed, rng, alphabet, 3);
    const auto program = kc::cel::compile(text);
    if (!program.ok()) {
      const CompileError& e = program.error();
      if (e.position > text.size() || e.message.empty()) {
        FAIL("malformed compile error for: " << text);
      }
      if (e.unsupported() && e.message.rfind("outside the supported subset: ", 0) != 0) {
        FAIL("unsupported error without the marker for: " << text);
      }
      continue;
    }
    ++compiled;
    for (const auto& device : targets) {
      const Outcome first = kc::cel::evaluate(*program, device);
      const Outcome again = kc::cel::evaluate(*program, device);
      if (first.kind != again.kind || first.error != again.error) {
        FAIL("not deterministic for: " << text);
      }
      if (first.kind == Outcome::Kind::kError) {
        ++errors;
        if (first.error.empty()) {
          FAIL("an error outcome without a message for: " << text);
        }
      } else if (!first.error.empty()) {
        FAIL("a true/false outcome with a message for: " << text);
      }
    }
  }
  // The mutations must exercise both halves: some still compile, some of those then err.
  CHECK(compiled > 4000);
  CHECK(errors > 1000);
}
