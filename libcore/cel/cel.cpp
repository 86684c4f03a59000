#include "libcore/cel/cel.hpp"

#include <cstdint>
#include <string>
#include <utility>

#include "libcore/cel/checker.hpp"
#include "libcore/cel/evaluator.hpp"
#include "libcore/cel/parser.hpp"

namespace kc::cel {
namespace {

// The offset of the first byte that is not part of well-formed UTF-8, or npos. Kubernetes
// strings are UTF-8; refusing anything else keeps the lexer to one encoding.
std::size_t invalidUtf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      len = 1;
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > s.size()) {
      return i;
    }
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) {
        return i;
      }
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static constexpr std::uint32_t kMinimum[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinimum[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

Error CompileError::toError() const {
  switch (kind) {
    case Kind::kUnsupported:
      return makeError(errc::kUnsupported,
                       "CEL selector at position " + std::to_string(position) + ": " + message);
    case Kind::kTooLong:
      return makeError(errc::kTooLarge, "CEL selector: " + message);
    default:
      return makeError(errc::kInvalid,
                       "CEL selector at position " + std::to_string(position) + ": " + message);
  }
}

Result<Program, CompileError> compile(std::string_view expression) {
  if (expression.size() > kMaxExpressionLength) {
    return CompileError{CompileError::Kind::kTooLong, kMaxExpressionLength,
                        "expression of " + std::to_string(expression.size()) +
                            " bytes is longer than the limit of " +
                            std::to_string(kMaxExpressionLength)};
  }
  if (const std::size_t bad = invalidUtf8(expression); bad != std::string_view::npos) {
    return CompileError{CompileError::Kind::kSyntax, bad, "not valid UTF-8"};
  }
  auto parsed = parse(expression);
  if (!parsed) {
    return std::move(parsed).error();
  }
  std::unique_ptr<Node> root = std::move(parsed->root);
  auto locals = check(*root, std::move(parsed->unsupported));
  if (!locals) {
    return std::move(locals).error();
  }
  Program program;
  program.root_ = std::move(root);
  program.expression_ = std::string(expression);
  program.locals_ = *locals;
  return program;
}

Outcome evaluate(const Program& program, const Device& device) {
  if (!program.root_) {
    return Outcome{Outcome::Kind::kError, "no compiled expression"};
  }
  Evaluator evaluator(device, program.locals_);
  const auto result = evaluator.eval(*program.root_);
  if (evaluator.overBudget()) {
    return Outcome{Outcome::Kind::kError,
                   "evaluation cost limit of " + std::to_string(kMaxCost) + " exceeded"};
  }
  if (!result) {
    return Outcome{Outcome::Kind::kError, result.error().message};
  }
  if (const bool* b = result->get<bool>()) {
    return Outcome{*b ? Outcome::Kind::kTrue : Outcome::Kind::kFalse, {}};
  }
  return Outcome{Outcome::Kind::kError, "the expression evaluated to " +
                                            std::string(typeName(result->type())) + ", not bool"};
}

}  // namespace kc::cel
