#include "libcore/cel/evaluator.hpp"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "libcore/cel/functions.hpp"

namespace kc::cel {
namespace {

// Runtime errors name where in the expression they arose.
Error failure(const Node& n, const std::string& message) {
  return makeError(errc::kInvalid, message + " (at position " + std::to_string(n.pos) + ")");
}

Error noOverload(const Node& n, std::string_view op, const Value& a, const Value* b = nullptr) {
  std::string types = std::string(typeName(a.type()));
  if (b != nullptr) {
    types += ", " + std::string(typeName(b->type()));
  }
  return failure(n, "no such overload: '" + std::string(op) + "' applied to (" + types + ")");
}

// What an operation on this value touches, for the cost budget.
std::uint64_t sizeOf(const Value& v) {
  if (const auto* s = v.get<std::string>()) {
    return s->size();
  }
  if (const auto* l = v.get<ListRef>()) {
    return l->items->size();
  }
  return 0;
}

std::uint64_t callCost(CostModel model, const std::vector<Value>& args) {
  std::uint64_t sum = 0;
  std::uint64_t product = 1;
  for (const Value& v : args) {
    const std::uint64_t s = std::max<std::uint64_t>(sizeOf(v), 1);
    sum += s;
    product = product > kMaxCost * 10 / s ? kMaxCost * 10 : product * s;
  }
  switch (model) {
    case CostModel::kFixed:
      return 1;
    case CostModel::kLinear:
      return 1 + sum / 10;
    default:
      return 1 + product / 10;
  }
}

std::string_view opName(Op op) {
  switch (op) {
    case Op::kMul:
      return "*";
    case Op::kDiv:
      return "/";
    case Op::kMod:
      return "%";
    case Op::kAdd:
      return "+";
    case Op::kSub:
      return "-";
    case Op::kLt:
      return "<";
    case Op::kLe:
      return "<=";
    case Op::kGt:
      return ">";
    case Op::kGe:
      return ">=";
    case Op::kIn:
      return "in";
    case Op::kAnd:
      return "&&";
    case Op::kOr:
      return "||";
    default:
      return "==";
  }
}

}  // namespace

Result<Value> Evaluator::eval(const Node& n) {
  if (!charge(1)) {
    return failure(n, "evaluation cost limit exceeded");
  }
  return dispatch(n);
}

bool Evaluator::charge(std::uint64_t units) {
  cost_ = units > kMaxCost ? kMaxCost + 1 : std::min(cost_ + units, kMaxCost + 1);
  return cost_ <= kMaxCost;
}

Result<Value> Evaluator::dispatch(const Node& n) {
  switch (n.op) {
    case Op::kLiteral:
      return n.value;
    case Op::kDevice:
      return Value{DeviceRef{&device_}};
    case Op::kLocal:
      if (n.slot < locals_.size() && locals_[n.slot]) {
        return *locals_[n.slot];
      }
      return failure(n, "cel.bind variable used before its binding");
    case Op::kSelect:
      return select(n);
    case Op::kIndex:
      return index(n);
    case Op::kHas:
      return has(n);
    case Op::kBind:
      return bind(n);
    case Op::kBuiltin:
      return builtin(n);
    case Op::kList:
      return list(n);
    case Op::kNot:
    case Op::kNegate:
      return unary(n);
    case Op::kAnd:
    case Op::kOr:
      return logical(n);
    case Op::kConditional:
      return conditional(n);
    default:
      return binary(n);
  }
}

// A chain of && (||): the first false (true) operand decides, wherever it is; otherwise the
// first error, or a non-bool operand, is the result.
Result<Value> Evaluator::logical(const Node& n) {
  const bool isAnd = n.op == Op::kAnd;
  std::optional<Error> firstError;
  for (const auto& arg : n.args) {
    auto r = eval(*arg);
    if (!r) {
      firstError = firstError ? firstError : std::optional(r.error());
      continue;
    }
    const bool* b = r->get<bool>();
    if (b == nullptr) {
      firstError = firstError ? firstError : std::optional(noOverload(n, opName(n.op), *r));
    } else if (*b != isAnd) {
      return Value{!isAnd};
    }
  }
  if (firstError) {
    return *firstError;
  }
  return Value{isAnd};
}

Result<Value> Evaluator::conditional(const Node& n) {
  auto c = eval(*n.args[0]);
  if (!c) {
    return c;
  }
  const bool* b = c->get<bool>();
  if (b == nullptr) {
    return noOverload(n, "?:", *c);
  }
  return eval(*n.args[*b ? 1 : 2]);
}

// operand.name, or with `presence` whether has(operand.name) holds.
Result<Value> Evaluator::field(const Node& n, const Value& operand, bool presence) {
  if (const auto* d = operand.get<DeviceRef>()) {
    const Device& dev = *d->device;
    if (presence) {
      return Value{true};  // the checker admitted only the device's fields
    }
    if (n.name == "driver") {
      return Value{dev.driver};
    }
    if (n.name == "attributes") {
      return Value{AttributeDomainsRef{&dev.attributes}};
    }
    if (n.name == "capacity") {
      return Value{CapacityDomainsRef{&dev.capacity}};
    }
    if (n.name == "allowMultipleAllocations") {
      return Value{dev.allowMultipleAllocations};
    }
    return failure(n, "no such field: " + n.name);
  }
  if (!isMap(operand.type())) {
    return failure(
        n, "type " + std::string(typeName(operand.type())) + " does not support field selection");
  }
  if (presence) {
    // Upstream reads an absent domain as an empty map, so every domain is "present".
    const bool domains =
        operand.type() == Type::kAttributeDomains || operand.type() == Type::kCapacityDomains;
    return Value{domains || mapHas(operand, n.name)};
  }
  auto v = mapFind(operand, n.name);
  if (!v) {
    return failure(n, "no such key: " + n.name);
  }
  return std::move(*v);
}

Result<Value> Evaluator::select(const Node& n) {
  auto operand = eval(*n.args[0]);
  if (!operand) {
    return operand;
  }
  return field(n, *operand, false);
}

Result<Value> Evaluator::has(const Node& n) {
  auto operand = eval(*n.args[0]);
  if (!operand) {
    return operand;
  }
  return field(n, *operand, true);
}

Result<Value> Evaluator::index(const Node& n) {
  auto container = eval(*n.args[0]);
  if (!container) {
    return container;
  }
  auto key = eval(*n.args[1]);
  if (!key) {
    return key;
  }
  if (const auto* l = container->get<ListRef>()) {
    const auto* i = key->get<std::int64_t>();
    if (i == nullptr) {
      return noOverload(n, "[]", *container, &*key);
    }
    if (*i < 0 || static_cast<std::uint64_t>(*i) >= l->items->size()) {
      return failure(n, "index " + std::to_string(*i) + " out of range in a list of size " +
                            std::to_string(l->items->size()));
    }
    return (*l->items)[static_cast<std::size_t>(*i)];
  }
  if (!isMap(container->type())) {
    return noOverload(n, "[]", *container, &*key);
  }
  const auto* name = key->get<std::string>();
  auto v = name != nullptr ? mapFind(*container, *name) : std::nullopt;
  if (!v) {
    return failure(
        n, "no such key: " + (name != nullptr ? *name : std::string(typeName(key->type()))));
  }
  return std::move(*v);
}

Result<Value> Evaluator::bind(const Node& n) {
  locals_[n.slot] = eval(*n.args[0]);
  return eval(*n.args[1]);
}

Result<Value> Evaluator::builtin(const Node& n) {
  std::vector<Value> args;
  args.reserve(n.args.size());
  for (const auto& a : n.args) {
    auto r = eval(*a);
    if (!r) {
      return r;
    }
    args.push_back(std::move(r).value());
  }
  for (const Overload* o : n.overloads) {
    bool ok = true;
    for (std::size_t i = 0; i < args.size(); ++i) {
      ok = ok && accepts(o->params[i], args[i].type());
    }
    if (!ok) {
      continue;
    }
    if (!charge(callCost(o->cost, args))) {
      return failure(n, "evaluation cost limit exceeded");
    }
    auto r = o->call(args);
    if (!r) {
      return failure(n, r.error().message);
    }
    return r;
  }
  return noOverload(n, n.name, args.front(), args.size() > 1 ? &args[1] : nullptr);
}

Result<Value> Evaluator::list(const Node& n) {
  List items;
  items.reserve(n.args.size());
  for (const auto& a : n.args) {
    auto r = eval(*a);
    if (!r) {
      return r;
    }
    items.push_back(std::move(r).value());
  }
  return makeList(std::move(items));
}

Result<Value> Evaluator::unary(const Node& n) {
  auto v = eval(*n.args[0]);
  if (!v) {
    return v;
  }
  if (n.op == Op::kNot) {
    const bool* b = v->get<bool>();
    return b != nullptr ? Result<Value>(Value{!*b}) : Result<Value>(noOverload(n, "!", *v));
  }
  const auto* i = v->get<std::int64_t>();
  if (i == nullptr) {
    return noOverload(n, "-", *v);
  }
  if (*i == std::numeric_limits<std::int64_t>::min()) {
    return failure(n, "integer overflow");
  }
  return Value{-*i};
}

Result<Value> Evaluator::arithmetic(const Node& n, const Value& a, const Value& b) {
  if (n.op == Op::kAdd && a.type() == b.type() &&
      (a.type() == Type::kString || a.type() == Type::kList)) {
    return concatenate(n, a, b);
  }
  const auto* x = a.get<std::int64_t>();
  const auto* y = b.get<std::int64_t>();
  if (x == nullptr || y == nullptr) {
    return noOverload(n, opName(n.op), a, &b);
  }
  std::int64_t r = 0;
  bool overflow = false;
  switch (n.op) {
    case Op::kAdd:
      overflow = __builtin_add_overflow(*x, *y, &r);
      break;
    case Op::kSub:
      overflow = __builtin_sub_overflow(*x, *y, &r);
      break;
    case Op::kMul:
      overflow = __builtin_mul_overflow(*x, *y, &r);
      break;
    default:  // / and %: CEL truncates toward zero, as C++ does
      if (*y == 0) {
        return failure(n, n.op == Op::kDiv ? "division by zero" : "modulus by zero");
      }
      overflow = *x == std::numeric_limits<std::int64_t>::min() && *y == -1;
      r = overflow ? 0 : (n.op == Op::kDiv ? *x / *y : *x % *y);
  }
  if (overflow) {
    return failure(n, "integer overflow");
  }
  return Value{r};
}

Result<Value> Evaluator::concatenate(const Node& n, const Value& a, const Value& b) {
  if (!charge(1 + (sizeOf(a) + sizeOf(b)) / 10)) {
    return failure(n, "evaluation cost limit exceeded");
  }
  if (const auto* s = a.get<std::string>()) {
    return Value{*s + *b.get<std::string>()};
  }
  List items = *a.get<ListRef>()->items;
  const List& more = *b.get<ListRef>()->items;
  items.insert(items.end(), more.begin(), more.end());
  return makeList(std::move(items));
}

Result<Value> Evaluator::binary(const Node& n) {
  if (n.args.size() != 2) {
    return failure(n, "internal error: an unchecked expression");
  }
  auto a = eval(*n.args[0]);
  if (!a) {
    return a;
  }
  auto b = eval(*n.args[1]);
  if (!b) {
    return b;
  }
  switch (n.op) {
    case Op::kEq:
    case Op::kNe: {
      if (!charge(1 + (sizeOf(*a) + sizeOf(*b)) / 10)) {
        return failure(n, "evaluation cost limit exceeded");
      }
      const auto eq = equals(*a, *b);
      if (!eq) {
        return failure(n, eq.error().message);
      }
      return Value{*eq == (n.op == Op::kEq)};
    }
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe: {
      const auto c = order(*a, *b);
      if (!c) {
        return failure(n, c.error().message);
      }
      const int s = *c;
      return Value{n.op == Op::kLt   ? s < 0
                   : n.op == Op::kLe ? s <= 0
                   : n.op == Op::kGt ? s > 0
                                     : s >= 0};
    }
    case Op::kIn:
      return membership(n, *a, *b);
    default:
      return arithmetic(n, *a, *b);
  }
}

// element in list: some item equals it (an item whose comparison errs does not count, as
// cel-go). key in map: the key is present (a non-string key never is).
Result<Value> Evaluator::membership(const Node& n, const Value& element, const Value& container) {
  if (const auto* l = container.get<ListRef>()) {
    if (!charge(1 + l->items->size())) {
      return failure(n, "evaluation cost limit exceeded");
    }
    const bool found = std::any_of(l->items->begin(), l->items->end(), [&](const Value& item) {
      const auto eq = equals(element, item);
      return eq.ok() && *eq;
    });
    return Value{found};
  }
  if (isMap(container.type())) {
    const auto* key = element.get<std::string>();
    return Value{key != nullptr && mapHas(container, *key)};
  }
  return noOverload(n, "in", element, &container);
}

}  // namespace kc::cel
