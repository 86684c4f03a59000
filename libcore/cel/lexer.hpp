#pragma once
// CEL tokens (internal to kc_cel), after the lexical grammar of cel-go's CEL.g4: every token CEL
// has is recognised, including those outside our subset (uint, double and bytes literals), so
// the parser can tell "not CEL" from "CEL we do not evaluate".

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/cel/cel.hpp"

namespace kc::cel {

enum class Tok : std::uint8_t {
  kEnd,
  kIdent,
  kEscapedIdent,  // `name-with.dots`
  kInt,
  kUint,    // outside the subset
  kDouble,  // outside the subset
  kString,
  kBytes,  // outside the subset
  kTrue,
  kFalse,
  kNull,
  kIn,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kDot,
  kComma,
  kColon,
  kQuestion,
  kPlus,
  kMinus,
  kStar,
  kSlash,
  kPercent,
  kNot,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kAnd,
  kOr,
};

struct Token {
  Tok kind = Tok::kEnd;
  std::size_t pos = 0;
  std::string text;           // kIdent/kEscapedIdent: the name; kString: the decoded value;
                              // others: the source text
  std::uint64_t integer = 0;  // kInt: the magnitude, at most 2^63 (the parser checks the sign)
};

// The tokens of `source`, ending with one kEnd. Errors are kSyntax: an unknown character, an
// unterminated string, a bad escape, an integer literal beyond 2^63.
Result<std::vector<Token>, CompileError> tokenize(std::string_view source);

}  // namespace kc::cel
