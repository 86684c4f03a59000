#include "libcore/cel/lexer.hpp"

#include <array>
#include <optional>
#include <utility>

namespace kc::cel {
namespace {

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isHex(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool isIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isIdentChar(char c) {
  return isIdentStart(c) || isDigit(c);
}
int hexValue(char c) {
  if (isDigit(c)) {
    return c - '0';
  }
  return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : c - 'A' + 10;
}

void appendUtf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct Punctuation {
  std::string_view text;
  Tok kind;
};

// Longest first, so "<=" wins over "<".
constexpr std::array<Punctuation, 27> kPunctuation{{
    {"==", Tok::kEq},     {"!=", Tok::kNe},       {"<=", Tok::kLe},      {">=", Tok::kGe},
    {"&&", Tok::kAnd},    {"||", Tok::kOr},       {"<", Tok::kLt},       {">", Tok::kGt},
    {"(", Tok::kLParen},  {")", Tok::kRParen},    {"[", Tok::kLBracket}, {"]", Tok::kRBracket},
    {"{", Tok::kLBrace},  {"}", Tok::kRBrace},    {".", Tok::kDot},      {",", Tok::kComma},
    {":", Tok::kColon},   {"?", Tok::kQuestion},  {"+", Tok::kPlus},     {"-", Tok::kMinus},
    {"*", Tok::kStar},    {"/", Tok::kSlash},     {"%", Tok::kPercent},  {"!", Tok::kNot},
    {"true", Tok::kTrue}, {"false", Tok::kFalse}, {"null", Tok::kNull},
}};

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {}

  Result<std::vector<Token>, CompileError> run() {
    for (;;) {
      skipSpaceAndComments();
      if (i_ >= src_.size()) {
        tokens_.push_back(Token{Tok::kEnd, i_, "", 0});
        return std::move(tokens_);
      }
      if (auto failed = next()) {
        return std::move(*failed);
      }
    }
  }

 private:
  using Failure = std::optional<CompileError>;

  char at(std::size_t k) const { return k < src_.size() ? src_[k] : '\0'; }

  Failure fail(std::size_t pos, std::string message) const {
    return CompileError{CompileError::Kind::kSyntax, pos, std::move(message)};
  }

  void push(Tok kind, std::size_t start, std::string text, std::uint64_t integer = 0) {
    tokens_.push_back(Token{kind, start, std::move(text), integer});
  }

  void skipSpaceAndComments() {
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f') {
        ++i_;
      } else if (c == '/' && at(i_ + 1) == '/') {
        while (i_ < src_.size() && src_[i_] != '\n') {
          ++i_;
        }
      } else {
        return;
      }
    }
  }

  Failure next() {
    const char c = src_[i_];
    if (isDigit(c) || (c == '.' && isDigit(at(i_ + 1)))) {
      return number();
    }
    if (c == '"' || c == '\'') {
      return string(i_, false, Tok::kString);
    }
    if ((c == 'r' || c == 'R') && (at(i_ + 1) == '"' || at(i_ + 1) == '\'')) {
      return string(i_++, true, Tok::kString);
    }
    if (c == 'b' || c == 'B') {
      const char n = at(i_ + 1);
      if (n == '"' || n == '\'') {
        return string(i_++, false, Tok::kBytes);
      }
      if ((n == 'r' || n == 'R') && (at(i_ + 2) == '"' || at(i_ + 2) == '\'')) {
        const std::size_t start = i_;
        i_ += 2;
        return string(start, true, Tok::kBytes);
      }
    }
    if (isIdentStart(c)) {
      return identifier();
    }
    if (c == '`') {
      return escapedIdentifier();
    }
    for (const Punctuation& p : kPunctuation) {
      if (isIdentStart(p.text[0])) {
        continue;  // keywords come from identifier()
      }
      if (src_.substr(i_, p.text.size()) == p.text) {
        push(p.kind, i_, std::string(p.text));
        i_ += p.text.size();
        return std::nullopt;
      }
    }
    return fail(i_, "unexpected character '" + std::string(1, c) + "'");
  }

  Failure identifier() {
    const std::size_t start = i_;
    while (i_ < src_.size() && isIdentChar(src_[i_])) {
      ++i_;
    }
    std::string name(src_.substr(start, i_ - start));
    Tok kind = Tok::kIdent;
    for (const Punctuation& p : kPunctuation) {
      if (name == p.text) {
        kind = p.kind;
      }
    }
    if (name == "in") {
      kind = Tok::kIn;
    }
    push(kind, start, std::move(name));
    return std::nullopt;
  }

  Failure escapedIdentifier() {
    const std::size_t start = i_++;
    std::string name;
    for (; i_ < src_.size() && src_[i_] != '`'; ++i_) {
      const char c = src_[i_];
      if (!isIdentChar(c) && c != '.' && c != '-' && c != '/' && c != ' ') {
        return fail(i_, "character not allowed in a quoted identifier");
      }
      name.push_back(c);
    }
    if (i_ >= src_.size() || name.empty()) {
      return fail(start, "unterminated or empty quoted identifier");
    }
    ++i_;
    push(Tok::kEscapedIdent, start, std::move(name));
    return std::nullopt;
  }

  // NUM_INT, NUM_UINT, NUM_FLOAT. Only an int's value is read; the others are out of the
  // subset and only need their extent.
  Failure number() {
    const std::size_t start = i_;
    if (src_[i_] == '0' && (at(i_ + 1) == 'x' || at(i_ + 1) == 'X') && isHex(at(i_ + 2))) {
      i_ += 2;
      return integer(start, 16);
    }
    while (isDigit(at(i_))) {
      ++i_;
    }
    bool isDouble = false;
    if (at(i_) == '.' && isDigit(at(i_ + 1))) {
      isDouble = true;
      for (++i_; isDigit(at(i_)); ++i_) {
      }
    }
    const char e = at(i_);
    const std::size_t signAt = (at(i_ + 1) == '+' || at(i_ + 1) == '-') ? i_ + 2 : i_ + 1;
    if ((e == 'e' || e == 'E') && isDigit(at(signAt))) {
      isDouble = true;
      for (i_ = signAt; isDigit(at(i_)); ++i_) {
      }
    }
    if (isDouble) {
      push(Tok::kDouble, start, std::string(src_.substr(start, i_ - start)));
      return std::nullopt;
    }
    i_ = start;
    return integer(start, 10);
  }

  Failure integer(std::size_t start, int base) {
    constexpr std::uint64_t kLimit = std::uint64_t{1} << 63;  // |INT64_MIN|
    std::uint64_t value = 0;
    bool overflow = false;
    for (; base == 16 ? isHex(at(i_)) : isDigit(at(i_)); ++i_) {
      const auto digit = static_cast<std::uint64_t>(hexValue(src_[i_]));
      overflow = overflow || value > (kLimit - digit) / static_cast<std::uint64_t>(base);
      value = value * static_cast<std::uint64_t>(base) + digit;
    }
    if (at(i_) == 'u' || at(i_) == 'U') {
      ++i_;
      push(Tok::kUint, start, std::string(src_.substr(start, i_ - start)));
      return std::nullopt;
    }
    if (overflow) {
      return fail(start, "integer literal out of int64 range");
    }
    push(Tok::kInt, start, std::string(src_.substr(start, i_ - start)), value);
    return std::nullopt;
  }

  // A quoted literal whose opening quote is at i_; `start` is where its prefix began.
  Failure string(std::size_t start, bool raw, Tok kind) {
    const char quote = src_[i_];
    const bool triple = at(i_ + 1) == quote && at(i_ + 2) == quote;
    i_ += triple ? 3 : 1;
    std::string out;
    for (;;) {
      if (i_ >= src_.size()) {
        return fail(start, "unterminated string literal");
      }
      const char c = src_[i_];
      if (c == quote && (!triple || (at(i_ + 1) == quote && at(i_ + 2) == quote))) {
        i_ += triple ? 3 : 1;
        push(kind, start, std::move(out));
        return std::nullopt;
      }
      if (!triple && (c == '\n' || c == '\r')) {
        return fail(start, "unterminated string literal (newline inside quotes)");
      }
      if (c == '\\' && !raw) {
        if (auto failed = escape(out)) {
          return failed;
        }
        continue;
      }
      out.push_back(c);
      ++i_;
    }
  }

  Failure escape(std::string& out);

  std::string_view src_;
  std::size_t i_ = 0;
  std::vector<Token> tokens_;
};

// The escape sequence at i_ (a backslash), decoded onto `out`: one of a b f n r t v " ' ? `
// or a backslash after it, \xHH, \ooo (first digit 0-3), \uHHHH or \UHHHHHHHH (code points).
Lexer::Failure Lexer::escape(std::string& out) {
  const std::size_t start = i_;
  const char c = at(i_ + 1);
  static constexpr std::string_view kSimple = "abfnrtv\"'\\?`";
  static constexpr std::string_view kDecoded = "\a\b\f\n\r\t\v\"'\\?`";
  if (const std::size_t k = kSimple.find(c); c != '\0' && k != std::string_view::npos) {
    out.push_back(kDecoded[k]);
    i_ += 2;
    return std::nullopt;
  }
  int digits = 0;
  int base = 16;
  if (c == 'x' || c == 'X') {
    digits = 2;
  } else if (c == 'u') {
    digits = 4;
  } else if (c == 'U') {
    digits = 8;
  } else if (c >= '0' && c <= '3') {
    digits = 3;
    base = 8;
  } else {
    return fail(start, "invalid escape sequence");
  }
  std::size_t k = base == 8 ? i_ + 1 : i_ + 2;
  std::uint32_t cp = 0;
  for (int d = 0; d < digits; ++d, ++k) {
    const char h = at(k);
    const bool ok = base == 8 ? (h >= '0' && h <= '7') : isHex(h);
    if (!ok) {
      return fail(start, "invalid escape sequence");
    }
    cp = cp * static_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(hexValue(h));
  }
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return fail(start, "escape is not a Unicode code point");
  }
  appendUtf8(out, cp);
  i_ = k;
  return std::nullopt;
}

}  // namespace

Result<std::vector<Token>, CompileError> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace kc::cel
