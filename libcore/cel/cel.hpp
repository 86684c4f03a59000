#pragma once
// DRA device selectors (resource.k8s.io/v1 CELDeviceSelector.expression) compiled once and
// evaluated against many devices, in-process and without cel-go: the subset of CEL that
// selectors use, with upstream's semantics (docs/cel.md lists what is in and out).
//
//   auto program = kc::cel::compile(R"(device.attributes["gpu.kubecomp.io"].model == "a100")");
//   if (!program) { ... program.error().unsupported() ... }
//   kc::cel::Outcome o = kc::cel::evaluate(*program, device);   // kTrue / kFalse / kError
//
// Pure: no I/O, threads or clocks. A Program is immutable; evaluate() may run on one Program from
// many threads at once.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"
#include "libcore/cel/device.hpp"

namespace kc::cel {

// Upstream's CELSelectorExpressionMaxLength: a longer expression is refused (kTooLong).
inline constexpr std::size_t kMaxExpressionLength = 10 * 1024;
// Deepest nesting of the expression tree (parentheses, operands, arguments; a chain of && or ||
// counts once). Ours: upstream's parser allows more, so deeper is kUnsupported. Bounds every
// recursion of the parser and the evaluator.
inline constexpr int kMaxNesting = 64;
// Evaluation budget per device, upstream's CELSelectorExpressionMaxCost in number; our units
// are one per node evaluated plus one per ten characters or elements an operation touches.
inline constexpr std::uint64_t kMaxCost = 1'000'000;

struct CompileError {
  enum class Kind : std::uint8_t {
    kSyntax,       // not CEL at all
    kInvalid,      // CEL, but wrong here: an undeclared name, an unknown device field, a type
                   // mismatch, a result that cannot be bool
    kUnsupported,  // valid CEL (as far as we can tell) using a construct this evaluator does not
                   // implement: the caller cannot decide the selector, which is not the user's
                   // fault
    kTooLong,      // over kMaxExpressionLength
  };
  Kind kind = Kind::kSyntax;
  std::size_t position = 0;  // byte offset into the expression
  std::string message;       // names what is wrong; for kUnsupported it says "outside the
                             // supported subset: <construct>"

  bool unsupported() const { return kind == Kind::kUnsupported; }
  // code: errc::kUnsupported, errc::kTooLarge or errc::kInvalid; message with the position.
  Error toError() const;
};

struct Node;  // the checked expression tree (ast.hpp)
struct Outcome;

class Program {
 public:
  const std::string& expression() const { return expression_; }

 private:
  friend Result<Program, CompileError> compile(std::string_view expression);
  friend Outcome evaluate(const Program& program, const Device& device);

  std::shared_ptr<const Node> root_;
  std::string expression_;
  std::size_t locals_ = 0;  // cel.bind variables
};

Result<Program, CompileError> compile(std::string_view expression);

// The three answers a selector gives for one device. Upstream, kError makes allocation fail
// with the message; a caller treats it as "does not match" and reports it.
struct Outcome {
  enum class Kind : std::uint8_t { kTrue, kFalse, kError };
  Kind kind = Kind::kError;
  std::string error;  // for kError

  bool matches() const { return kind == Kind::kTrue; }
};

Outcome evaluate(const Program& program, const Device& device);

}  // namespace kc::cel
