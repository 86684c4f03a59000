#pragma once
// Evaluation of a checked expression tree against one device (internal to kc_cel), with CEL's
// semantics: strict functions and operators (an error operand gives an error), && and || that
// absorb errors commutatively (false && error is false, true || error is true, either way
// round), ?: that evaluates only the branch taken, and a cost budget (kMaxCost).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "libcore/cel/ast.hpp"
#include "libcore/cel/cel.hpp"

namespace kc::cel {

class Evaluator {
 public:
  Evaluator(const Device& device, std::size_t locals) : device_(device), locals_(locals) {}

  Result<Value> eval(const Node& n);
  // Whether the budget ran out: the whole evaluation is then an error, whatever it returned
  // (upstream aborts it).
  bool overBudget() const { return cost_ > kMaxCost; }

 private:
  Result<Value> dispatch(const Node& n);
  bool charge(std::uint64_t units);
  Result<Value> logical(const Node& n);
  Result<Value> conditional(const Node& n);
  Result<Value> field(const Node& n, const Value& operand, bool presence);
  Result<Value> select(const Node& n);
  Result<Value> index(const Node& n);
  Result<Value> has(const Node& n);
  Result<Value> bind(const Node& n);
  Result<Value> builtin(const Node& n);
  Result<Value> list(const Node& n);
  Result<Value> unary(const Node& n);
  Result<Value> arithmetic(const Node& n, const Value& a, const Value& b);
  Result<Value> concatenate(const Node& n, const Value& a, const Value& b);
  Result<Value> binary(const Node& n);
  Result<Value> membership(const Node& n, const Value& element, const Value& container);

  const Device& device_;
  // cel.bind values, evaluated when the bind is entered; an error is kept and only surfaces
  // where the variable is used, as upstream's lazy binding behaves.
  std::vector<std::optional<Result<Value>>> locals_;
  std::uint64_t cost_ = 0;
};

}  // namespace kc::cel
