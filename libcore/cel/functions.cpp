#include "libcore/cel/functions.hpp"

#include <cstdint>
#include <string>

namespace kc::cel {
namespace {

using Args = std::span<const Value>;

Error failure(std::string message) {
  return makeError(errc::kInvalid, std::move(message));
}

const std::string& str(const Value& v) {
  return *v.get<std::string>();
}
const Quantity& qty(const Value& v) {
  return *v.get<Quantity>();
}
const Version& ver(const Value& v) {
  return *v.get<Version>();
}
Value boolean(bool b) {
  return Value{b};
}
Value integer(std::int64_t i) {
  return Value{i};
}

// CEL counts a string's size in code points.
std::int64_t codePoints(const std::string& s) {
  std::int64_t n = 0;
  for (const char c : s) {
    n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  }
  return n;
}

Result<Value> size(Args a) {
  const Value& v = a[0];
  if (const auto* s = v.get<std::string>()) {
    return integer(codePoints(*s));
  }
  if (const auto* l = v.get<ListRef>()) {
    return integer(static_cast<std::int64_t>(l->items->size()));
  }
  if (isMap(v.type())) {
    return integer(static_cast<std::int64_t>(mapSize(v)));
  }
  return failure("no such overload: size(" + std::string(typeName(v.type())) + ")");
}

Result<Value> startsWith(Args a) {
  return boolean(str(a[0]).starts_with(str(a[1])));
}
Result<Value> endsWith(Args a) {
  return boolean(str(a[0]).ends_with(str(a[1])));
}
Result<Value> contains(Args a) {
  return boolean(str(a[0]).find(str(a[1])) != std::string::npos);
}

Result<Value> toQuantity(Args a) {
  auto q = Quantity::parse(str(a[0]));
  if (!q) {
    return std::move(q).error();
  }
  return Value{*q};
}
Result<Value> isQuantity(Args a) {
  return boolean(Quantity::parse(str(a[0])).ok());
}
Result<Value> quantitySign(Args a) {
  return integer(qty(a[0]).sign());
}
Result<Value> quantityCompare(Args a) {
  const auto c = qty(a[0]) <=> qty(a[1]);
  return integer(c < 0 ? -1 : (c > 0 ? 1 : 0));
}
Result<Value> quantityGreater(Args a) {
  return boolean(qty(a[0]) > qty(a[1]));
}
Result<Value> quantityLess(Args a) {
  return boolean(qty(a[0]) < qty(a[1]));
}
Result<Value> quantityIsInteger(Args a) {
  return boolean(qty(a[0]).isInteger());
}
Result<Value> quantityAsInteger(Args a) {
  const auto i = qty(a[0]).asInteger();
  if (!i) {
    return failure("cannot convert value to integer");
  }
  return integer(*i);
}

// add/sub take a quantity or an int (units).
Quantity operand(const Value& v) {
  if (const auto* i = v.get<std::int64_t>()) {
    return Quantity::fromUnits(*i);
  }
  return qty(v);
}
Result<Value> quantityAdd(Args a) {
  auto r = qty(a[0]).plus(operand(a[1]));
  if (!r) {
    return std::move(r).error();
  }
  return Value{*r};
}
Result<Value> quantitySub(Args a) {
  auto r = qty(a[0]).minus(operand(a[1]));
  if (!r) {
    return std::move(r).error();
  }
  return Value{*r};
}

Result<Value> toSemver(Args a) {
  auto v = Version::parse(str(a[0]));
  if (!v) {
    return std::move(v).error();
  }
  return Value{std::move(v).value()};
}
Result<Value> isSemver(Args a) {
  return boolean(Version::parse(str(a[0])).ok());
}
Result<Value> semverCompare(Args a) {
  return integer(compareVersions(ver(a[0]), ver(a[1])));
}
Result<Value> semverGreater(Args a) {
  return boolean(compareVersions(ver(a[0]), ver(a[1])) > 0);
}
Result<Value> semverLess(Args a) {
  return boolean(compareVersions(ver(a[0]), ver(a[1])) < 0);
}
// Versions beyond int64 read as errors rather than wrapping.
Result<Value> component(std::uint64_t n) {
  if (n > static_cast<std::uint64_t>(INT64_MAX)) {
    return failure("version component out of int range");
  }
  return integer(static_cast<std::int64_t>(n));
}
Result<Value> semverMajor(Args a) {
  return component(ver(a[0]).major);
}
Result<Value> semverMinor(Args a) {
  return component(ver(a[0]).minor);
}
Result<Value> semverPatch(Args a) {
  return component(ver(a[0]).patch);
}

constexpr Type D = Type::kDyn;
constexpr Type B = Type::kBool;
constexpr Type I = Type::kInt;
constexpr Type S = Type::kString;
constexpr Type Q = Type::kQuantity;
constexpr Type V = Type::kVersion;
constexpr CostModel kFixed = CostModel::kFixed;
constexpr CostModel kLinear = CostModel::kLinear;

constexpr std::array<Overload, 25> kOverloads{{
    // CEL standard library.
    {"size", false, 1, {D, D}, I, kLinear, size},
    {"size", true, 1, {D, D}, I, kLinear, size},
    {"startsWith", true, 2, {S, S}, B, kLinear, startsWith},
    {"endsWith", true, 2, {S, S}, B, kLinear, endsWith},
    {"contains", true, 2, {S, S}, B, CostModel::kProduct, contains},
    // Kubernetes quantity library.
    {"quantity", false, 1, {S, D}, Q, kLinear, toQuantity},
    {"isQuantity", false, 1, {S, D}, B, kLinear, isQuantity},
    {"sign", false, 1, {Q, D}, I, kFixed, quantitySign},
    {"compareTo", true, 2, {Q, Q}, I, kFixed, quantityCompare},
    {"isGreaterThan", true, 2, {Q, Q}, B, kFixed, quantityGreater},
    {"isLessThan", true, 2, {Q, Q}, B, kFixed, quantityLess},
    {"isInteger", true, 1, {Q, D}, B, kFixed, quantityIsInteger},
    {"asInteger", true, 1, {Q, D}, I, kFixed, quantityAsInteger},
    {"add", true, 2, {Q, Q}, Q, kFixed, quantityAdd},
    {"add", true, 2, {Q, I}, Q, kFixed, quantityAdd},
    {"sub", true, 2, {Q, Q}, Q, kFixed, quantitySub},
    {"sub", true, 2, {Q, I}, Q, kFixed, quantitySub},
    // Kubernetes semver library.
    {"semver", false, 1, {S, D}, V, kLinear, toSemver},
    {"isSemver", false, 1, {S, D}, B, kLinear, isSemver},
    {"compareTo", true, 2, {V, V}, I, kFixed, semverCompare},
    {"isGreaterThan", true, 2, {V, V}, B, kFixed, semverGreater},
    {"isLessThan", true, 2, {V, V}, B, kFixed, semverLess},
    {"major", true, 1, {V, D}, I, kFixed, semverMajor},
    {"minor", true, 1, {V, D}, I, kFixed, semverMinor},
    {"patch", true, 1, {V, D}, I, kFixed, semverPatch},
}};

}  // namespace

std::span<const Overload> builtinOverloads() {
  return kOverloads;
}

}  // namespace kc::cel
