#include "libcore/alloc/quantity.hpp"

#include <array>
#include <cctype>
#include <utility>

namespace kc::alloc {
namespace {

__extension__ typedef __int128 i128;  // exact products of up to 100-bit mantissas
constexpr i128 kLimit = static_cast<i128>(1) << 62;

struct Suffix {
  std::string_view text;
  int base10;  // power of ten
  int base2;   // power of two
};

// Binary (Ki..Ei) and decimal (n, u, m, "", k, M, G, T, P, E) suffixes.
constexpr std::array<Suffix, 15> kSuffixes{{
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
    {"n", -9, 0},
    {"u", -6, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
}};

Error bad(std::string_view text, std::string_view why) {
  return makeError(kc::errc::kInvalid, "quantity '" + std::string(text) + "': " + std::string(why));
}

// The decimal number at the start of a quantity: mantissa * 10^pow10. Digits past 100 bits
// are not kept; `dropped` remembers a non-zero fraction digit among them (it still rounds up).
struct Decimal {
  bool negative = false;
  i128 mantissa = 0;
  int pow10 = 0;
  std::size_t digits = 0;
  bool dropped = false;
  std::size_t end = 0;  // index of the first character after the number
};

Decimal parseDecimal(std::string_view text, int extraPow10) {
  Decimal d;
  d.pow10 = extraPow10;
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    d.negative = text[i] == '-';
    ++i;
  }
  bool dot = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !dot) {
      dot = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      break;
    }
    ++d.digits;
    if (d.mantissa < static_cast<i128>(1) << 100) {
      d.mantissa = d.mantissa * 10 + (c - '0');
      if (dot) {
        --d.pow10;
      }
    } else if (!dot) {
      ++d.pow10;  // more integer digits than we keep: the value is out of range anyway
    } else if (c != '0') {
      d.dropped = true;  // a fraction digit beyond what we keep: it still rounds up
    }
  }
  d.end = i;
  return d;
}

// What follows the number: 10^pow10 * 2^pow2.
struct Scale {
  int pow10 = 0;
  int pow2 = 0;
};

bool isExponent(std::string_view rest) {
  return !rest.empty() && (rest[0] == 'e' || rest[0] == 'E') && rest.size() > 1 &&
         (std::isdigit(static_cast<unsigned char>(rest[1])) || rest[1] == '-' || rest[1] == '+');
}

// A decimal exponent ("e3", "E-2"), the whole of `rest`.
Result<Scale> parseExponent(std::string_view text, std::string_view rest) {
  std::size_t j = 1;
  bool expNeg = false;
  if (rest[j] == '-' || rest[j] == '+') {
    expNeg = rest[j] == '-';
    ++j;
  }
  int exp = 0;
  std::size_t expDigits = 0;
  for (; j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])); ++j) {
    exp = exp * 10 + (rest[j] - '0');
    ++expDigits;
    if (exp > 1000) {
      return bad(text, "exponent out of range");
    }
  }
  if (expDigits == 0 || j != rest.size()) {
    return bad(text, "malformed exponent");
  }
  return Scale{expNeg ? -exp : exp, 0};
}

// An exponent, one of kSuffixes, or nothing.
Result<Scale> parseScale(std::string_view text, std::string_view rest) {
  if (isExponent(rest)) {
    return parseExponent(text, rest);
  }
  if (rest.empty()) {
    return Scale{};
  }
  for (const auto& s : kSuffixes) {
    if (rest == s.text) {
      return Scale{s.base10, s.base2};
    }
  }
  return bad(text, "unknown suffix '" + std::string(rest) + "'");
}

// ceil(mantissa * 10^pow10 * 2^pow2), or "too large" past kLimit. `dropped`: digits already cut
// off were not all zero, so the result rounds up even when the division below is exact.
Result<std::int64_t> scaleRoundingUp(std::string_view text, i128 mantissa, int pow10, int pow2,
                                     bool dropped) {
  i128 value = mantissa;
  // A binary suffix with a fraction ("943870.39Ti") is divided by 10^digits after the shift,
  // so the shifted value may pass the limit on the way: bound it by what 128 bits hold then.
  const i128 shiftBound = pow10 < 0 ? static_cast<i128>(1) << 125 : kLimit / 2;
  for (int k = 0; k < pow2; ++k) {
    if (value > shiftBound) {
      return bad(text, "too large");
    }
    value <<= 1;
  }
  for (; pow10 > 0; --pow10) {
    value *= 10;
    if (value > kLimit) {
      return bad(text, "too large");
    }
  }
  bool remainder = dropped;
  for (; pow10 < 0; ++pow10) {
    remainder = remainder || value % 10 != 0;
    value /= 10;
  }
  if (remainder) {
    ++value;  // round up, as Quantity.Value() / MilliValue()
  }
  if (value > kLimit) {
    return bad(text, "too large");
  }
  return static_cast<std::int64_t>(value);
}

// ceil(value * 10^scale10 * 2^scale2) for the parsed quantity, times 10^extraPow10.
Result<std::int64_t> parseScaled(std::string_view text, int extraPow10) {
  const Decimal number = parseDecimal(text, extraPow10);
  if (number.digits == 0) {
    return bad(text, "no digits");
  }
  auto scale = parseScale(text, text.substr(number.end));
  if (!scale) {
    return scale.error();
  }
  if (number.negative && number.mantissa != 0) {
    return bad(text, "negative");
  }
  if (number.mantissa == 0) {
    return std::int64_t{0};
  }
  return scaleRoundingUp(text, number.mantissa, number.pow10 + scale->pow10, scale->pow2,
                         number.dropped);
}

}  // namespace

Result<std::int64_t> parseQuantityMilli(std::string_view text) {
  return parseScaled(text, 3);
}

Result<std::int64_t> parseQuantity(std::string_view text) {
  return parseScaled(text, 0);
}

Result<std::int64_t> parseResourceAmount(std::string_view resource, std::string_view text) {
  return resource == "cpu" ? parseQuantityMilli(text) : parseQuantity(text);
}

std::string formatResourceAmount(std::string_view resource, std::int64_t amount) {
  if (resource == "cpu") {
    return amount % 1000 == 0 ? std::to_string(amount / 1000) : std::to_string(amount) + "m";
  }
  return std::to_string(amount);
}

}  // namespace kc::alloc
