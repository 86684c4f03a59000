#include "libcore/cel/parser.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "libcore/cel/lexer.hpp"

namespace kc::cel {
namespace {

using NodePtr = std::unique_ptr<Node>;
using Kind = CompileError::Kind;

// CEL's reserved words: not usable as identifiers or function names.
constexpr std::array<std::string_view, 17> kReserved{
    "as",  "break", "const",   "continue",  "else",   "for", "function", "if",   "import",
    "let", "loop",  "package", "namespace", "return", "var", "void",     "while"};

bool isReserved(std::string_view name) {
  return std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end();
}

// a, a.b, a.b.c: what may precede a message construction's '{'.
bool isQualifiedName(const Node* n) {
  while (n->op == Op::kSelect) {
    n = n->args[0].get();
  }
  return n->op == Op::kIdent;
}

using OpTable = std::span<const std::pair<Tok, Op>>;

std::optional<Op> relationOp(Tok t) {
  switch (t) {
    case Tok::kLt:
      return Op::kLt;
    case Tok::kLe:
      return Op::kLe;
    case Tok::kGt:
      return Op::kGt;
    case Tok::kGe:
      return Op::kGe;
    case Tok::kEq:
      return Op::kEq;
    case Tok::kNe:
      return Op::kNe;
    case Tok::kIn:
      return Op::kIn;
    default:
      return std::nullopt;
  }
}

// Each parse function returns the subtree, or nullptr after recording the error in error_.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Result<Parsed, CompileError> run() {
    NodePtr root = expr();
    if (root && peek() != Tok::kEnd) {
      root = syntax("unexpected " + describe(tok()));
    }
    if (!root) {
      return std::move(*error_);
    }
    return Parsed{std::move(root), std::move(unsupported_)};
  }

 private:
  // Counts recursion into expr(): the only way the parser nests.
  class Nest {
   public:
    explicit Nest(int& depth) : depth_(depth) { ++depth_; }
    ~Nest() { --depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    int& depth_;
  };

  const Token& tok() const { return toks_[p_]; }
  Tok peek(std::size_t ahead = 0) const {
    return toks_[std::min(p_ + ahead, toks_.size() - 1)].kind;
  }
  const Token& advance() { return toks_[p_ < toks_.size() - 1 ? p_++ : p_]; }
  bool accept(Tok t) {
    if (peek() != t) {
      return false;
    }
    advance();
    return true;
  }

  static std::string describe(const Token& t) {
    return t.kind == Tok::kEnd ? std::string("end of expression") : "'" + t.text + "'";
  }

  NodePtr fail(Kind kind, std::size_t pos, std::string message) {
    if (!error_) {
      error_ = CompileError{kind, pos, std::move(message)};
    }
    return nullptr;
  }
  NodePtr syntax(std::string message) { return fail(Kind::kSyntax, tok().pos, std::move(message)); }
  NodePtr tooDeep(std::size_t pos) {
    return fail(Kind::kUnsupported, pos,
                "outside the supported subset: nesting deeper than " + std::to_string(kMaxNesting) +
                    " levels");
  }
  bool expect(Tok t, std::string_view what) {
    if (accept(t)) {
      return true;
    }
    syntax("expected " + std::string(what) + ", found " + describe(tok()));
    return false;
  }

  // Records the first construct outside the subset; parsing goes on.
  void unsupported(std::size_t pos, const std::string& what) {
    if (!unsupported_) {
      unsupported_ = CompileError{Kind::kUnsupported, pos, "outside the supported subset: " + what};
    }
  }

  NodePtr make(Op op, std::size_t pos, std::vector<NodePtr> args, std::string name = {}) {
    auto n = std::make_unique<Node>();
    n->op = op;
    n->pos = pos;
    n->name = std::move(name);
    for (const NodePtr& a : args) {
      n->depth = std::max(n->depth, a->depth + 1);
    }
    n->args = std::move(args);
    if (n->depth > kMaxNesting) {
      return tooDeep(pos);
    }
    return n;
  }
  NodePtr literal(std::size_t pos, Value v) {
    auto n = std::make_unique<Node>();
    n->pos = pos;
    n->value = std::move(v);
    return n;
  }
  NodePtr placeholder(std::size_t pos, std::vector<NodePtr> parts) {
    return make(Op::kUnsupported, pos, std::move(parts));
  }
  template <typename... Nodes>
  static std::vector<NodePtr> list(Nodes&&... nodes) {
    std::vector<NodePtr> v;
    (v.push_back(std::forward<Nodes>(nodes)), ...);
    return v;
  }

  NodePtr expr();
  NodePtr logical(Op op);
  NodePtr relation();
  NodePtr binary(OpTable ops, NodePtr (Parser::*operand)());
  NodePtr addition();
  NodePtr multiplication();
  NodePtr unary();
  NodePtr member(bool negativeLiteral);
  NodePtr selectOrCall(NodePtr operand);
  NodePtr primary(bool negativeLiteral);
  NodePtr identifier();
  NodePtr intLiteral(bool negative);
  enum class Entries { kNone, kMap, kMessage };
  NodePtr aggregate(Tok close, Entries entries);
  bool exprList(std::vector<NodePtr>& out);

  std::vector<Token> toks_;
  std::size_t p_ = 0;
  int nesting_ = 0;
  std::optional<CompileError> error_;
  std::optional<CompileError> unsupported_;
};

// Expr = ConditionalOr ["?" ConditionalOr ":" Expr]
NodePtr Parser::expr() {
  Nest nest(nesting_);
  if (nesting_ > kMaxNesting) {
    return tooDeep(tok().pos);
  }
  NodePtr cond = logical(Op::kOr);
  if (!cond || peek() != Tok::kQuestion) {
    return cond;
  }
  const std::size_t pos = advance().pos;
  NodePtr yes = logical(Op::kOr);
  if (!yes || !expect(Tok::kColon, "':'")) {
    return nullptr;
  }
  NodePtr no = expr();
  if (!no) {
    return nullptr;
  }
  return make(Op::kConditional, pos, list(std::move(cond), std::move(yes), std::move(no)));
}

// A chain of || (of && operands) or of && (of relations), kept as one n-ary node so that a
// long chain of alternatives does not make the tree deep.
NodePtr Parser::logical(Op op) {
  const Tok sep = op == Op::kOr ? Tok::kOr : Tok::kAnd;
  const auto operand = [&] { return op == Op::kOr ? logical(Op::kAnd) : relation(); };
  const std::size_t pos = tok().pos;
  NodePtr first = operand();
  if (!first || peek() != sep) {
    return first;
  }
  std::vector<NodePtr> terms = list(std::move(first));
  while (accept(sep)) {
    NodePtr next = operand();
    if (!next) {
      return nullptr;
    }
    terms.push_back(std::move(next));
  }
  return make(op, pos, std::move(terms));
}

NodePtr Parser::relation() {
  NodePtr lhs = addition();
  while (lhs) {
    const auto op = relationOp(peek());
    if (!op) {
      break;
    }
    const std::size_t pos = advance().pos;
    NodePtr rhs = addition();
    if (!rhs) {
      return nullptr;
    }
    lhs = make(*op, pos, list(std::move(lhs), std::move(rhs)));
  }
  return lhs;
}

// Left-associative: a - b - c is (a - b) - c.
NodePtr Parser::binary(OpTable ops, NodePtr (Parser::*operand)()) {
  NodePtr lhs = (this->*operand)();
  while (lhs) {
    const auto it =
        std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.first == peek(); });
    if (it == ops.end()) {
      break;
    }
    const std::size_t pos = advance().pos;
    NodePtr rhs = (this->*operand)();
    if (!rhs) {
      return nullptr;
    }
    lhs = make(it->second, pos, list(std::move(lhs), std::move(rhs)));
  }
  return lhs;
}

NodePtr Parser::addition() {
  static constexpr std::array<std::pair<Tok, Op>, 2> kOps{
      {{Tok::kPlus, Op::kAdd}, {Tok::kMinus, Op::kSub}}};
  return binary(kOps, &Parser::multiplication);
}

NodePtr Parser::multiplication() {
  static constexpr std::array<std::pair<Tok, Op>, 3> kOps{
      {{Tok::kStar, Op::kMul}, {Tok::kSlash, Op::kDiv}, {Tok::kPercent, Op::kMod}}};
  return binary(kOps, &Parser::unary);
}

// Unary = Member | "!" {"!"} Member | "-" {"-"} Member. As cel-go, an even run of ! or - is
// dropped, and a single - before an integer literal is the literal's sign (so the smallest
// int64 can be written).
NodePtr Parser::unary() {
  if (peek() == Tok::kMinus && peek(1) == Tok::kInt) {
    advance();
    return member(true);
  }
  if (peek() != Tok::kNot && peek() != Tok::kMinus) {
    return member(false);
  }
  const Tok op = peek();
  const std::size_t pos = tok().pos;
  int count = 0;
  while (accept(op)) {
    ++count;
  }
  // !-1: the literal's sign again.
  const bool signedLiteral = op == Tok::kNot && peek() == Tok::kMinus && peek(1) == Tok::kInt;
  if (signedLiteral) {
    advance();
  }
  NodePtr operand = member(signedLiteral);
  if (!operand || count % 2 == 0) {
    return operand;
  }
  return make(op == Tok::kNot ? Op::kNot : Op::kNegate, pos, list(std::move(operand)));
}

NodePtr Parser::member(bool negativeLiteral) {
  NodePtr node = primary(negativeLiteral);
  while (node) {
    if (peek() == Tok::kDot) {
      node = selectOrCall(std::move(node));
    } else if (peek() == Tok::kLBracket) {
      const std::size_t pos = advance().pos;
      if (accept(Tok::kQuestion)) {
        unsupported(pos, "optional index [?...]");
      }
      NodePtr index = expr();
      if (!index || !expect(Tok::kRBracket, "']'")) {
        return nullptr;
      }
      node = make(Op::kIndex, pos, list(std::move(node), std::move(index)));
    } else if (peek() == Tok::kLBrace && isQualifiedName(node.get())) {
      const std::size_t pos = tok().pos;
      unsupported(pos, "message construction " + node->name + "{...}");
      advance();
      NodePtr fields = aggregate(Tok::kRBrace, Entries::kMessage);
      // The type name is not an expression to check, only the field values are.
      node = std::move(fields);
    } else {
      break;
    }
  }
  return node;
}

// After a '.': a field selection (IDENT or `escaped`) or a member call IDENT(args).
NodePtr Parser::selectOrCall(NodePtr operand) {
  const std::size_t pos = advance().pos;
  if (accept(Tok::kQuestion)) {
    unsupported(pos, "optional field selection .?");
  }
  const Tok kind = peek();
  if (kind != Tok::kIdent && kind != Tok::kEscapedIdent) {
    return syntax("expected a field name after '.', found " + describe(tok()));
  }
  std::string name = advance().text;
  if (kind == Tok::kIdent && accept(Tok::kLParen)) {
    std::vector<NodePtr> args = list(std::move(operand));
    if (!exprList(args)) {
      return nullptr;
    }
    return make(Op::kMemberCall, pos, std::move(args), std::move(name));
  }
  return make(Op::kSelect, pos, list(std::move(operand)), std::move(name));
}

NodePtr Parser::primary(bool negativeLiteral) {
  const Token& t = tok();
  const std::size_t pos = t.pos;
  switch (t.kind) {
    case Tok::kInt:
      return intLiteral(negativeLiteral);
    case Tok::kString:
      return literal(pos, Value{advance().text});
    case Tok::kTrue:
    case Tok::kFalse:
      return literal(pos, Value{advance().kind == Tok::kTrue});
    case Tok::kNull:
      advance();
      return literal(pos, Value{Null{}});
    case Tok::kUint:
    case Tok::kDouble:
    case Tok::kBytes: {
      const char* what = t.kind == Tok::kUint     ? "uint literal "
                         : t.kind == Tok::kDouble ? "double literal "
                                                  : "bytes literal ";
      unsupported(pos, what + advance().text);
      return placeholder(pos, {});
    }
    case Tok::kIdent:
      return identifier();
    case Tok::kDot:
      advance();
      unsupported(pos, "leading-dot identifier ." + tok().text);
      return peek() == Tok::kIdent ? identifier() : syntax("expected an identifier after '.'");
    case Tok::kLParen: {
      advance();
      NodePtr inner = expr();
      return inner && expect(Tok::kRParen, "')'") ? std::move(inner) : nullptr;
    }
    case Tok::kLBracket:
      advance();
      return aggregate(Tok::kRBracket, Entries::kNone);
    case Tok::kLBrace:
      advance();
      unsupported(pos, "map literal {...}");
      return aggregate(Tok::kRBrace, Entries::kMap);
    default:
      return syntax("unexpected " + describe(t));
  }
}

NodePtr Parser::identifier() {
  const std::size_t pos = tok().pos;
  std::string name = advance().text;
  if (isReserved(name)) {
    return fail(Kind::kSyntax, pos, "reserved identifier '" + name + "'");
  }
  if (!accept(Tok::kLParen)) {
    return make(Op::kIdent, pos, {}, std::move(name));
  }
  std::vector<NodePtr> args;
  if (!exprList(args)) {
    return nullptr;
  }
  return make(Op::kCall, pos, std::move(args), std::move(name));
}

NodePtr Parser::intLiteral(bool negative) {
  const std::size_t pos = tok().pos;
  const std::uint64_t magnitude = advance().integer;
  constexpr std::uint64_t kMaxPositive = std::numeric_limits<std::int64_t>::max();
  if (magnitude > kMaxPositive + (negative ? 1 : 0)) {
    return fail(Kind::kSyntax, pos, "integer literal out of int64 range");
  }
  const std::int64_t value =
      negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return literal(pos, Value{value});
}

// After '[' (a list: elements) or '{' (a map or message: key: value entries, kept only to be
// checked). A trailing comma is allowed. Optional elements (?x) are outside the subset.
NodePtr Parser::aggregate(Tok close, Entries entries) {
  const std::size_t pos = toks_[p_ - 1].pos;
  std::vector<NodePtr> parts;
  while (peek() != close) {
    if (accept(Tok::kQuestion)) {
      unsupported(toks_[p_ - 1].pos, "optional entries ?x");
    }
    NodePtr part = entries == Entries::kMessage && peek() == Tok::kIdent
                       ? literal(tok().pos, Value{advance().text})  // a field name
                       : expr();
    if (!part) {
      return nullptr;
    }
    parts.push_back(std::move(part));
    if (entries != Entries::kNone) {
      NodePtr value = expect(Tok::kColon, "':'") ? expr() : nullptr;
      if (!value) {
        return nullptr;
      }
      parts.push_back(std::move(value));
    }
    if (!accept(Tok::kComma)) {
      break;
    }
  }
  if (!expect(close, close == Tok::kRBracket ? "']'" : "'}'")) {
    return nullptr;
  }
  return entries != Entries::kNone ? placeholder(pos, std::move(parts))
                                   : make(Op::kList, pos, std::move(parts));
}

// Call arguments after '(', through the closing ')'.
bool Parser::exprList(std::vector<NodePtr>& out) {
  if (accept(Tok::kRParen)) {
    return true;
  }
  do {
    NodePtr e = expr();
    if (!e) {
      return false;
    }
    out.push_back(std::move(e));
  } while (accept(Tok::kComma));
  return expect(Tok::kRParen, "')'");
}

}  // namespace

Result<Parsed, CompileError> parse(std::string_view source) {
  auto tokens = tokenize(source);
  if (!tokens) {
    return std::move(tokens).error();
  }
  return Parser(std::move(tokens).value()).run();
}

}  // namespace kc::cel
