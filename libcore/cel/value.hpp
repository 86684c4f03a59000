#pragma once
// Runtime values of the CEL evaluator and the static types the checker infers for them
// (internal to kc_cel). The device's maps are referenced, not copied: a Value lives no longer
// than the evaluate() call that made it, or is a constant the Program owns.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "libcore/base/result.hpp"
#include "libcore/cel/device.hpp"

namespace kc::cel {

// The static type of an expression. kDyn: known only at evaluation (attribute values, the
// result of a call on a dyn receiver). The others, in this order, are also the runtime kinds.
enum class Type : std::uint8_t {
  kDyn,
  kNull,
  kBool,
  kInt,
  kString,
  kQuantity,
  kVersion,
  kList,
  kDevice,            // the `device` variable
  kAttributeDomains,  // device.attributes: domain -> attributes
  kAttributes,        // one domain's attributes: id -> dyn
  kCapacityDomains,   // device.capacity: domain -> capacities
  kCapacities,        // one domain's capacities: id -> quantity
};

std::string_view typeName(Type type);
bool isMap(Type type);  // the device and its maps: what field selection and `in` apply to

struct Value;
using List = std::vector<Value>;

struct Null {};
struct ListRef {
  std::shared_ptr<const List> items;
};
struct DeviceRef {
  const Device* device;
};
struct AttributeDomainsRef {
  const std::map<std::string, AttributeMap, std::less<>>* map;
};
struct AttributesRef {
  const AttributeMap* map;  // nullptr: a domain the device does not have (an empty map)
};
struct CapacityDomainsRef {
  const std::map<std::string, CapacityMap, std::less<>>* map;
};
struct CapacitiesRef {
  const CapacityMap* map;  // nullptr: an empty map, as above
};

struct Value {
  std::variant<Null, bool, std::int64_t, std::string, Quantity, Version, ListRef, DeviceRef,
               AttributeDomainsRef, AttributesRef, CapacityDomainsRef, CapacitiesRef>
      v;

  Type type() const { return static_cast<Type>(v.index() + 1); }
  template <typename T>
  const T* get() const {
    return std::get_if<T>(&v);
  }
};

Value toValue(const AttributeValue& attribute);
Value makeList(List items);

// CEL's ==, as cel-go evaluates it: null equals only null; values of different types are not
// equal (false, not an error), except that a quantity or a version compared with anything else
// is an error ("no such overload"), as Kubernetes' types answer.
Result<bool> equals(const Value& a, const Value& b);
// <, <=, >, >= on bool, int and string pairs of one type: the sign of a - b. Other pairs: error.
Result<int> order(const Value& a, const Value& b);

// The device and its maps as CEL maps. mapSize: number of keys. mapHas: key present.
// mapFind: the value at a key, nothing when absent; device.attributes and device.capacity
// answer an empty map for an absent domain, as upstream does.
std::size_t mapSize(const Value& map);
bool mapHas(const Value& map, std::string_view key);
std::optional<Value> mapFind(const Value& map, std::string_view key);

}  // namespace kc::cel
