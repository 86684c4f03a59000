#pragma once
// The compile-time half of the subset (internal to kc_cel): resolves identifiers (`device`,
// cel.bind variables), macros (has, cel.bind) and function overloads in the parsed tree, infers
// static types where CEL's checker would know them, and folds constant calls and lists
// (quantity("16Gi"), ["a", "b"]) so evaluation does not redo them per device.

#include <cstddef>
#include <optional>

#include "libcore/cel/ast.hpp"
#include "libcore/cel/cel.hpp"

namespace kc::cel {

// Checks and rewrites `root` in place; returns the number of cel.bind variables. Errors:
// kInvalid (an undeclared name, an unknown device field, a type mismatch between known types, a
// result that cannot be bool) before kUnsupported (including `parseUnsupported`, the parser's
// first), so an expression upstream would refuse is reported as such.
Result<std::size_t, CompileError> check(Node& root, std::optional<CompileError> parseUnsupported);

}  // namespace kc::cel
