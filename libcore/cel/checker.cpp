#include "libcore/cel/checker.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "libcore/cel/functions.hpp"

namespace kc::cel {
namespace {

using Kind = CompileError::Kind;

// CEL's type names are values too (type(x) == int); none is in the subset.
constexpr std::array<std::string_view, 11> kTypeIdentifiers{
    "int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "dyn"};
// Macros and comprehension functions: their first arguments name iteration variables, so
// they are not checked as expressions.
constexpr std::array<std::string_view, 12> kMacros{
    "all",           "exists",       "exists_one",        "existsOne", "map",    "filter",
    "transformList", "transformMap", "transformMapEntry", "sortBy",    "optMap", "optFlatMap"};

std::string_view symbol(Op op) {
  switch (op) {
    case Op::kNot:
      return "!";
    case Op::kNegate:
      return "-";
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
    case Op::kEq:
      return "==";
    case Op::kNe:
      return "!=";
    case Op::kIn:
      return "in";
    case Op::kAnd:
      return "&&";
    case Op::kOr:
      return "||";
    default:
      return "?:";
  }
}

std::string typeList(const std::vector<Type>& types) {
  std::string out = "(";
  for (std::size_t i = 0; i < types.size(); ++i) {
    out += (i == 0 ? "" : ", ") + std::string(typeName(types[i]));
  }
  return out + ")";
}

// The type of `m.key` / `m["key"]` for a map-like (or dyn) `m`; nothing for other types.
std::optional<Type> entryType(Type container) {
  switch (container) {
    case Type::kAttributeDomains:
      return Type::kAttributes;
    case Type::kCapacityDomains:
      return Type::kCapacities;
    case Type::kCapacities:
      return Type::kQuantity;
    case Type::kAttributes:
    case Type::kDyn:
      return Type::kDyn;
    default:
      return std::nullopt;
  }
}

// The fields of the `device` variable (CELDeviceSelector).
std::optional<Type> deviceField(std::string_view field) {
  if (field == "driver") {
    return Type::kString;
  }
  if (field == "attributes") {
    return Type::kAttributeDomains;
  }
  if (field == "capacity") {
    return Type::kCapacityDomains;
  }
  if (field == "allowMultipleAllocations") {
    return Type::kBool;
  }
  return std::nullopt;
}

bool known(Type t) {
  return t != Type::kDyn && t != Type::kNull;
}

class Checker {
 public:
  Result<std::size_t, CompileError> run(Node& root, std::optional<CompileError> parseUnsupported) {
    unsupported_ = std::move(parseUnsupported);
    const Type t = visit(root);
    if (t != Type::kBool && t != Type::kDyn) {
      invalid(root.pos, "the expression must evaluate to bool, not " + std::string(typeName(t)));
    }
    if (invalid_) {
      return std::move(*invalid_);
    }
    if (unsupported_) {
      return std::move(*unsupported_);
    }
    return locals_;
  }

 private:
  struct Local {
    std::string name;
    std::size_t slot;
    Type type;
  };

  void invalid(std::size_t pos, std::string message) {
    if (!invalid_) {
      invalid_ = CompileError{Kind::kInvalid, pos, std::move(message)};
    }
  }
  void unsupported(std::size_t pos, const std::string& what) {
    if (!unsupported_) {
      unsupported_ = CompileError{Kind::kUnsupported, pos, "outside the supported subset: " + what};
    }
  }
  void noOverload(const Node& n, std::string_view name, const std::vector<Type>& types) {
    invalid(n.pos,
            "no matching overload for '" + std::string(name) + "' applied to " + typeList(types));
  }

  Type visit(Node& n) {
    n.type = dispatch(n);
    return n.type;
  }
  std::vector<Type> visitArgs(Node& n, std::size_t from = 0) {
    std::vector<Type> types;
    for (std::size_t i = from; i < n.args.size(); ++i) {
      types.push_back(visit(*n.args[i]));
    }
    return types;
  }

  Type dispatch(Node& n) {
    switch (n.op) {
      case Op::kLiteral:
        return n.value.type();
      case Op::kIdent:
        return ident(n);
      case Op::kSelect:
        return select(n);
      case Op::kIndex:
        return index(n);
      case Op::kCall:
        return call(n);
      case Op::kMemberCall:
        return memberCall(n);
      case Op::kList:
        return list(n);
      case Op::kNot:
      case Op::kNegate:
        return unary(n);
      case Op::kMul:
      case Op::kDiv:
      case Op::kMod:
      case Op::kAdd:
      case Op::kSub:
      case Op::kLt:
      case Op::kLe:
      case Op::kGt:
      case Op::kGe:
        return arithmeticOrOrder(n);
      case Op::kEq:
      case Op::kNe:
        return equality(n);
      case Op::kIn:
        return membership(n);
      case Op::kAnd:
      case Op::kOr:
        return logical(n);
      case Op::kConditional:
        return conditional(n);
      default:  // kUnsupported: already reported; its parts may still hold an invalid name
        visitArgs(n);
        return Type::kDyn;
    }
  }

  const Local* lookup(std::string_view name) const {
    const auto it = std::find_if(scope_.rbegin(), scope_.rend(),
                                 [&](const Local& l) { return l.name == name; });
    return it == scope_.rend() ? nullptr : &*it;
  }

  Type ident(Node& n) {
    if (const Local* local = lookup(n.name)) {
      n.op = Op::kLocal;
      n.slot = local->slot;
      return local->type;
    }
    if (n.name == "device") {
      n.op = Op::kDevice;
      return Type::kDevice;
    }
    if (std::find(kTypeIdentifiers.begin(), kTypeIdentifiers.end(), n.name) !=
        kTypeIdentifiers.end()) {
      unsupported(n.pos, "type identifier '" + n.name + "'");
    } else {
      invalid(n.pos, "undeclared reference to '" + n.name + "'");
    }
    return Type::kDyn;
  }

  // `operand.name`, also the argument of has().
  Type field(const Node& n, Type operand) {
    if (operand == Type::kDevice) {
      if (auto t = deviceField(n.name)) {
        return *t;
      }
      invalid(n.pos, "undefined field '" + n.name + "' of device");
      return Type::kDyn;
    }
    if (auto t = entryType(operand)) {
      return *t;
    }
    invalid(n.pos, "type " + std::string(typeName(operand)) + " does not support field selection");
    return Type::kDyn;
  }

  Type select(Node& n) { return field(n, visit(*n.args[0])); }

  Type index(Node& n) {
    const Type container = visit(*n.args[0]);
    const Type key = visit(*n.args[1]);
    // A dyn container may be a list or a map: any key waits for evaluation.
    const Type wantedKey = container == Type::kList  ? Type::kInt
                           : container == Type::kDyn ? Type::kDyn
                                                     : Type::kString;
    const auto entry = container == Type::kList ? std::optional(Type::kDyn) : entryType(container);
    if (!entry || !accepts(wantedKey, key)) {
      noOverload(n, "[]", {container, key});
      return Type::kDyn;
    }
    return *entry;
  }

  Type call(Node& n) {
    if (n.name == "has") {
      return has(n);
    }
    return resolve(n, false);
  }

  // has(x.f): rewritten to kHas with args {x} and name f.
  Type has(Node& n) {
    if (n.args.size() != 1 || n.args[0]->op != Op::kSelect) {
      invalid(n.pos, "has() takes one field selection, as in has(x.f)");
      visitArgs(n);
      return Type::kBool;
    }
    Node& selection = *n.args[0];
    n.name = selection.name;
    std::unique_ptr<Node> operand = std::move(selection.args[0]);
    n.args.clear();
    n.args.push_back(std::move(operand));
    n.op = Op::kHas;
    field(n, visit(*n.args[0]));
    return Type::kBool;
  }

  Type memberCall(Node& n) {
    const Node& target = *n.args[0];
    if (target.op == Op::kIdent && target.name != "device" && !lookup(target.name)) {
      // A namespace, not a value: cel.bind, or another library's function (math.greatest).
      if (target.name == "cel" && n.name == "bind") {
        return bind(n);
      }
      unsupported(n.pos, "function '" + target.name + "." + n.name + "'");
      visitArgs(n, 1);
      return Type::kDyn;
    }
    if (std::find(kMacros.begin(), kMacros.end(), n.name) != kMacros.end()) {
      unsupported(n.pos, "macro '" + n.name + "' with " + std::to_string(n.args.size() - 1) +
                             " argument(s)");
      visit(*n.args[0]);
      return Type::kDyn;
    }
    return resolve(n, true);
  }

  // cel.bind(name, init, body): args {cel, name, init, body} become {init, body}.
  Type bind(Node& n) {
    if (n.args.size() != 4 || n.args[1]->op != Op::kIdent) {
      invalid(n.pos, "cel.bind() takes a variable name, a value and an expression");
      visitArgs(n, 1);
      return Type::kDyn;
    }
    n.op = Op::kBind;
    n.name = n.args[1]->name;
    n.slot = locals_++;
    n.args.erase(n.args.begin(), n.args.begin() + 2);
    const Type init = visit(*n.args[0]);
    scope_.push_back(Local{n.name, n.slot, init});
    const Type body = visit(*n.args[1]);
    scope_.pop_back();
    return body;
  }

  Type resolve(Node& n, bool member);
  void fold(Node& n);
  Type list(Node& n);
  Type unary(Node& n);
  Type arithmeticOrOrder(Node& n);
  Type equality(Node& n);
  Type membership(Node& n);
  Type logical(Node& n);
  Type conditional(Node& n);

  std::vector<Local> scope_;
  std::size_t locals_ = 0;
  std::optional<CompileError> invalid_;
  std::optional<CompileError> unsupported_;
};

Type Checker::resolve(Node& n, bool member) {
  const std::vector<Type> types = visitArgs(n);
  bool sameArity = false;
  for (const Overload& o : builtinOverloads()) {
    if (o.name != n.name || o.member != member || o.arity != types.size()) {
      continue;
    }
    sameArity = true;
    bool ok = true;
    for (std::size_t i = 0; i < types.size(); ++i) {
      ok = ok && accepts(o.params[i], types[i]);
    }
    if (ok) {
      n.overloads.push_back(&o);
    }
  }
  if (n.overloads.empty()) {
    if (sameArity) {
      noOverload(n, n.name, types);
    } else {
      unsupported(n.pos, "function '" + n.name + "' with " +
                             std::to_string(types.size() - (member ? 1 : 0)) + " argument(s)");
    }
    return Type::kDyn;
  }
  const Type result = n.overloads.front()->result;
  const bool oneResult = std::all_of(n.overloads.begin(), n.overloads.end(),
                                     [&](const Overload* o) { return o->result == result; });
  n.op = Op::kBuiltin;
  fold(n);
  return oneResult ? result : Type::kDyn;
}

// A call on literals only is made now; a failing one is left for evaluation, where upstream
// reports it too.
void Checker::fold(Node& n) {
  std::vector<Value> args;
  for (const auto& a : n.args) {
    if (a->op != Op::kLiteral) {
      return;
    }
    args.push_back(a->value);
  }
  for (const Overload* o : n.overloads) {
    bool ok = true;
    for (std::size_t i = 0; i < args.size(); ++i) {
      ok = ok && accepts(o->params[i], args[i].type());
    }
    if (!ok) {
      continue;
    }
    auto r = o->call(args);
    if (r) {
      n.op = Op::kLiteral;
      n.value = std::move(r).value();
      n.args.clear();
      n.overloads.clear();
    }
    return;
  }
}

Type Checker::list(Node& n) {
  visitArgs(n);
  const bool constant = std::all_of(n.args.begin(), n.args.end(),
                                    [](const auto& a) { return a->op == Op::kLiteral; });
  if (constant) {
    List items;
    for (const auto& a : n.args) {
      items.push_back(a->value);
    }
    n.op = Op::kLiteral;
    n.value = makeList(std::move(items));
    n.args.clear();
  }
  return Type::kList;
}

Type Checker::unary(Node& n) {
  const Type want = n.op == Op::kNot ? Type::kBool : Type::kInt;
  const Type t = visit(*n.args[0]);
  if (!accepts(want, t)) {
    noOverload(n, symbol(n.op), {t});
  }
  return want;
}

// * / % - on ints; + also on strings and lists; < <= > >= on bools, ints and strings. Both
// operands of one type.
Type Checker::arithmeticOrOrder(Node& n) {
  const Type a = visit(*n.args[0]);
  const Type b = visit(*n.args[1]);
  const bool order = n.op == Op::kLt || n.op == Op::kLe || n.op == Op::kGt || n.op == Op::kGe;
  const auto allowed = [&](Type t) {
    if (t == Type::kDyn || t == Type::kInt) {
      return true;
    }
    if (order) {
      return t == Type::kBool || t == Type::kString;
    }
    return n.op == Op::kAdd && (t == Type::kString || t == Type::kList);
  };
  if (!allowed(a) || !allowed(b) || (a != Type::kDyn && b != Type::kDyn && a != b)) {
    noOverload(n, symbol(n.op), {a, b});
    return order ? Type::kBool : Type::kDyn;
  }
  if (order) {
    return Type::kBool;
  }
  return a != Type::kDyn ? a : b;
}

Type Checker::equality(Node& n) {
  const Type a = visit(*n.args[0]);
  const Type b = visit(*n.args[1]);
  if (known(a) && known(b) && a != b) {
    noOverload(n, symbol(n.op), {a, b});
  }
  return Type::kBool;
}

Type Checker::membership(Node& n) {
  const Type element = visit(*n.args[0]);
  const Type container = visit(*n.args[1]);
  const bool ok = container == Type::kList || container == Type::kDyn ||
                  (isMap(container) && accepts(Type::kString, element));
  if (!ok) {
    noOverload(n, "in", {element, container});
  }
  return Type::kBool;
}

Type Checker::logical(Node& n) {
  for (const Type t : visitArgs(n)) {
    if (!accepts(Type::kBool, t)) {
      noOverload(n, symbol(n.op), {t});
    }
  }
  return Type::kBool;
}

Type Checker::conditional(Node& n) {
  const Type c = visit(*n.args[0]);
  const Type yes = visit(*n.args[1]);
  const Type no = visit(*n.args[2]);
  if (!accepts(Type::kBool, c)) {
    invalid(n.pos, "the condition of ?: must be bool, not " + std::string(typeName(c)));
  }
  if (yes == no) {
    return yes;
  }
  if (known(yes) && known(no)) {
    noOverload(n, "?:", {c, yes, no});
  }
  return Type::kDyn;
}

}  // namespace

Result<std::size_t, CompileError> check(Node& root, std::optional<CompileError> parseUnsupported) {
  return Checker().run(root, std::move(parseUnsupported));
}

}  // namespace kc::cel
