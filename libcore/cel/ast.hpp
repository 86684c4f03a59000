#pragma once
// The expression tree (internal to kc_cel). The parser builds it from syntax alone; the checker
// resolves names, overloads and static types in place; the evaluator walks it. No tree is
// deeper than kMaxNesting + 1, so every recursion over it (destruction included) is bounded.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "libcore/cel/value.hpp"

namespace kc::cel {

struct Overload;  // functions.hpp

enum class Op : std::uint8_t {
  // Built by the parser.
  kLiteral,     // value
  kIdent,       // name
  kSelect,      // args[0].name
  kIndex,       // args[0][args[1]]
  kCall,        // name(args...)
  kMemberCall,  // args[0].name(args[1...])
  kList,        // [args...]
  kNot,         // !args[0]
  kNegate,      // -args[0]
  kMul,         // binary operators: args[0] op args[1]
  kDiv,
  kMod,
  kAdd,
  kSub,
  kLt,
  kLe,
  kGt,
  kGe,
  kEq,
  kNe,
  kIn,
  kAnd,          // args[0] && args[1] && ... (a chain is one node)
  kOr,           // likewise
  kConditional,  // args[0] ? args[1] : args[2]
  kUnsupported,  // a construct outside the subset, already reported; args: its parts
  // Rewritten by the checker.
  kDevice,   // the `device` variable
  kLocal,    // a cel.bind variable: slot
  kHas,      // has(args[0].name)
  kBind,     // cel.bind(name, args[0], args[1]); slot
  kBuiltin,  // a function: overloads, args (receiver first for a member call)
};

struct Node {
  Op op = Op::kLiteral;
  std::size_t pos = 0;  // byte offset of the construct in the expression
  std::string name;
  Value value;
  std::vector<std::unique_ptr<Node>> args;
  int depth = 1;  // 1 + the deepest child

  // Set by the checker.
  Type type = Type::kDyn;
  std::size_t slot = 0;
  std::vector<const Overload*> overloads;  // candidates; the first matching at run time is used
};

}  // namespace kc::cel
