#pragma once
// Kubernetes resource quantities ("16Gi", "500m", "1.5", "1e3") held exactly, for CEL selectors:
// the values of device.capacity and of quantity("..."). Held as a count of nano-units in 128
// bits, which is where resource.ParseQuantity rounds to, so "1Gi" == "1073741824",
// "100m" == "0.1" and "1e3" == "1k" compare equal with no floating point anywhere.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::cel {

__extension__ typedef __int128 Int128;  // GCC/Clang extension; -Wpedantic wants the marker

class Quantity {
 public:
  Quantity() = default;

  // resource.ParseQuantity's grammar: an optional sign, digits with an optional fraction ("1.",
  // ".5" included), then one suffix: binary (Ki Mi Gi Ti Pi Ei), decimal (n u m "" k M G T P E)
  // or a decimal exponent (e3, E-2, e+6). Finer than a nano-unit rounds away from zero, as
  // upstream does. Binary and exponent forms above 2^63-1 units are capped there, as upstream
  // does; a decimal form above 10^28 units (which upstream keeps exactly) is refused here.
  static Result<Quantity> parse(std::string_view text);
  static Quantity fromUnits(std::int64_t units);

  // -1, 0 or 1: the sign of the value.
  int sign() const;
  // Whether the value is a whole number of units within int64 (upstream's isInteger()).
  bool isInteger() const;
  // The value in whole units when isInteger(), else nothing.
  std::optional<std::int64_t> asInteger() const;
  // Sum and difference; an error when the result leaves the range parse() accepts.
  Result<Quantity> plus(const Quantity& other) const;
  Result<Quantity> minus(const Quantity& other) const;

  // Plain decimal units, fraction trimmed: "1073741824", "0.1", "-2.5". For messages and tests.
  std::string toString() const;

  friend auto operator<=>(const Quantity&, const Quantity&) = default;
  friend bool operator==(const Quantity&, const Quantity&) = default;

 private:
  explicit Quantity(Int128 nanos) : nanos_(nanos) {}
  Int128 nanos_ = 0;
};

}  // namespace kc::cel
