#include "libcore/cel/quantity.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <limits>
#include <utility>

namespace kc::cel {
namespace {

constexpr Int128 kNanosPerUnit = 1'000'000'000;
// 10^37 nano-units (10^28 units): the largest magnitude held. Far beyond any device, and
// leaves 128-bit headroom for a sum of two.
constexpr Int128 kMaxNanos = [] {
  Int128 v = 1;
  for (int i = 0; i < 37; ++i) {
    v *= 10;
  }
  return v;
}();
// Upstream caps binary-suffix and exponent forms at the largest int64 number of units.
constexpr Int128 kCapNanos =
    static_cast<Int128>(std::numeric_limits<std::int64_t>::max()) * kNanosPerUnit;
// 38 decimal digits always fit in 127 bits (10^38 < 2^127).
constexpr std::size_t kMaxDigits = 38;

enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

struct Suffix {
  std::string_view text;
  int pow10;
  int pow2;
};

constexpr std::array<Suffix, 16> kSuffixes{{
    {"", 0, 0},
    {"n", -9, 0},
    {"u", -6, 0},
    {"m", -3, 0},
    {"k", 3, 0},
    {"M", 6, 0},
    {"G", 9, 0},
    {"T", 12, 0},
    {"P", 15, 0},
    {"E", 18, 0},
    {"Ki", 0, 10},
    {"Mi", 0, 20},
    {"Gi", 0, 30},
    {"Ti", 0, 40},
    {"Pi", 0, 50},
    {"Ei", 0, 60},
}};

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

Error bad(std::string_view text, std::string_view why) {
  return makeError(errc::kInvalid, "quantity '" + std::string(text) + "': " + std::string(why));
}

// What follows the number: the powers of ten and two it scales by, and its format.
struct Scale {
  int pow10 = 0;
  int pow2 = 0;
  Format format = Format::kDecimalSI;
};

// A decimal exponent ("e3", "E-2", "e+6"). Exponents beyond +-100000 are held at that bound:
// every non-zero number is then capped or rounded to one nano-unit either way.
std::optional<Scale> parseExponent(std::string_view suffix) {
  if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) {
    return std::nullopt;
  }
  std::size_t i = 1;
  bool negative = false;
  if (suffix[i] == '+' || suffix[i] == '-') {
    negative = suffix[i] == '-';
    ++i;
  }
  if (i == suffix.size()) {
    return std::nullopt;
  }
  int exponent = 0;
  for (; i < suffix.size(); ++i) {
    if (!isDigit(suffix[i])) {
      return std::nullopt;
    }
    exponent = std::min(exponent * 10 + (suffix[i] - '0'), 100000);
  }
  return Scale{negative ? -exponent : exponent, 0, Format::kDecimalExponent};
}

std::optional<Scale> parseSuffix(std::string_view suffix) {
  for (const Suffix& s : kSuffixes) {
    if (suffix == s.text) {
      return Scale{s.pow10, s.pow2, s.pow2 > 0 ? Format::kBinarySI : Format::kDecimalSI};
    }
  }
  return parseExponent(suffix);
}

// `digits` (most significant first, values 0..9) times two.
void doubleDigits(std::string& digits) {
  int carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    const int d = *it * 2 + carry;
    *it = static_cast<char>(d % 10);
    carry = d / 10;
  }
  if (carry != 0) {
    digits.insert(digits.begin(), static_cast<char>(carry));
  }
}

// The magnitude in nano-units of `digits` x 10^pow10 (digits as values 0..9, no leading
// zeros), rounded away from zero; nothing when it has more than kMaxDigits digits.
std::optional<Int128> toNanos(const std::string& digits, int pow10) {
  std::size_t keep = digits.size();
  bool remainder = false;
  if (pow10 < 0) {
    const auto drop = static_cast<std::size_t>(-static_cast<long>(pow10));
    keep = drop >= digits.size() ? 0 : digits.size() - drop;
    for (std::size_t i = keep; i < digits.size(); ++i) {
      remainder = remainder || digits[i] != 0;
    }
  }
  const std::size_t zeros = pow10 > 0 ? static_cast<std::size_t>(pow10) : 0;
  if (keep + zeros > kMaxDigits) {
    return std::nullopt;
  }
  Int128 value = 0;
  for (std::size_t i = 0; i < keep; ++i) {
    value = value * 10 + digits[i];
  }
  for (std::size_t i = 0; i < zeros; ++i) {
    value *= 10;
  }
  return remainder ? value + 1 : value;
}

}  // namespace

Result<Quantity> Quantity::parse(std::string_view text) {
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    negative = text[i] == '-';
    ++i;
  }
  std::string digits;  // integer then fraction digits, as values 0..9
  std::size_t fractionDigits = 0;
  for (; i < text.size() && isDigit(text[i]); ++i) {
    digits.push_back(static_cast<char>(text[i] - '0'));
  }
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && isDigit(text[i]); ++i) {
      digits.push_back(static_cast<char>(text[i] - '0'));
      ++fractionDigits;
    }
  }
  if (digits.empty()) {
    return bad(text, "no digits");
  }
  const auto scale = parseSuffix(text.substr(i));
  if (!scale) {
    return bad(text, "unknown suffix '" + std::string(text.substr(i)) + "'");
  }
  digits.erase(0, digits.find_first_not_of('\0'));
  if (digits.empty()) {
    return Quantity{};
  }
  // The binary factor is applied to the digits exactly (at most 60 doublings); the decimal one
  // only moves the point.
  for (int k = 0; k < scale->pow2; ++k) {
    doubleDigits(digits);
  }
  const int pow10 = scale->pow10 + 9 - static_cast<int>(fractionDigits);
  std::optional<Int128> nanos = toNanos(digits, pow10);
  if (scale->format != Format::kDecimalSI && (!nanos || *nanos > kCapNanos)) {
    nanos = kCapNanos;
  }
  if (!nanos || *nanos > kMaxNanos) {
    return bad(text, "out of range (more than 10^28)");
  }
  return Quantity(negative ? -*nanos : *nanos);
}

Quantity Quantity::fromUnits(std::int64_t units) {
  return Quantity(static_cast<Int128>(units) * kNanosPerUnit);
}

int Quantity::sign() const {
  return nanos_ > 0 ? 1 : (nanos_ < 0 ? -1 : 0);
}

bool Quantity::isInteger() const {
  return asInteger().has_value();
}

std::optional<std::int64_t> Quantity::asInteger() const {
  if (nanos_ % kNanosPerUnit != 0) {
    return std::nullopt;
  }
  const Int128 units = nanos_ / kNanosPerUnit;
  if (units > std::numeric_limits<std::int64_t>::max() ||
      units < std::numeric_limits<std::int64_t>::min()) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(units);
}

Result<Quantity> Quantity::plus(const Quantity& other) const {
  // Both magnitudes are at most 10^37, so the sum cannot overflow 128 bits.
  const Int128 sum = nanos_ + other.nanos_;
  if (sum > kMaxNanos || sum < -kMaxNanos) {
    return makeError(errc::kOutOfRange, "quantity arithmetic out of range");
  }
  return Quantity(sum);
}

Result<Quantity> Quantity::minus(const Quantity& other) const {
  return plus(Quantity(-other.nanos_));
}

std::string Quantity::toString() const {
  // Digits are produced least significant first, then reversed.
  const Int128 magnitude = nanos_ < 0 ? -nanos_ : nanos_;
  std::string reversed;
  const auto emit = [&reversed](Int128 v, int minDigits) {
    for (int k = 0; k < minDigits || v != 0; ++k) {
      reversed.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
      v /= 10;
    }
  };
  if (Int128 fraction = magnitude % kNanosPerUnit; fraction != 0) {
    int digits = 9;
    for (; fraction % 10 == 0; fraction /= 10) {
      --digits;
    }
    emit(fraction, digits);
    reversed.push_back('.');
  }
  emit(magnitude / kNanosPerUnit, 1);
  if (nanos_ < 0) {
    reversed.push_back('-');
  }
  return std::string(reversed.rbegin(), reversed.rend());
}

}  // namespace kc::cel
