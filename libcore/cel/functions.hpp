#pragma once
// The functions of the subset (internal to kc_cel), one table: CEL's size() and string
// functions, Kubernetes' quantity and semver libraries. The checker resolves a call against
// the table by name, member-ness, arity and static types; the evaluator runs the first overload
// whose parameter types match the evaluated arguments.

#include <array>
#include <cstddef>
#include <span>
#include <string_view>

#include "libcore/cel/value.hpp"

namespace kc::cel {

// How a call is charged against kMaxCost, from the sizes (string length, list length) of its
// arguments: one unit, a tenth of their sum, or a tenth of their product (substring search).
enum class CostModel : std::uint8_t { kFixed, kLinear, kProduct };

struct Overload {
  std::string_view name;
  bool member;                 // receiver.name(args) rather than name(args)
  std::size_t arity;           // parameters, the receiver included
  std::array<Type, 2> params;  // kDyn: any (the function checks)
  Type result;
  CostModel cost;
  Result<Value> (*call)(std::span<const Value> args);
};

std::span<const Overload> builtinOverloads();

// A parameter of type `param` accepts an argument of type `arg` (statically or at run time).
inline bool accepts(Type param, Type arg) {
  return param == Type::kDyn || arg == Type::kDyn || param == arg;
}

}  // namespace kc::cel
