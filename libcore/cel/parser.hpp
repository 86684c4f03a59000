#pragma once
// CEL syntax to an expression tree (internal to kc_cel), after the grammar of cel-go's CEL.g4:
// precedence ?: < || < && < relations (== != < <= > >= in, one level) < + - < * / % < unary
// (! -) < member (. [] calls) < primary. Recursive descent with the nesting bounded by
// kMaxNesting, so no input recurses without bound.

#include <memory>
#include <optional>
#include <string_view>

#include "libcore/cel/ast.hpp"
#include "libcore/cel/cel.hpp"

namespace kc::cel {

struct Parsed {
  std::unique_ptr<Node> root;
  // The first construct outside the subset (map literal, double literal, optional syntax...),
  // kept as a kUnsupported node so the rest is still parsed and checked: a syntax error
  // anywhere wins over it.
  std::optional<CompileError> unsupported;
};

// Errors: kSyntax, or kUnsupported for nesting beyond kMaxNesting.
Result<Parsed, CompileError> parse(std::string_view source);

}  // namespace kc::cel
