#include "libcore/cel/value.hpp"

#include <array>
#include <type_traits>
#include <utility>

namespace kc::cel {
namespace {

static_assert(std::variant_size_v<decltype(Value::v)> == 12, "one Type per alternative");

Error noOverload(std::string_view op, const Value& a, const Value& b) {
  return makeError(errc::kInvalid, "no such overload: " + std::string(typeName(a.type())) + " " +
                                       std::string(op) + " " + std::string(typeName(b.type())));
}

template <typename M>
std::vector<std::string_view> keysOf(const M* map) {
  std::vector<std::string_view> keys;
  if (map != nullptr) {
    for (const auto& entry : *map) {
      keys.push_back(entry.first);
    }
  }
  return keys;
}

std::vector<std::string_view> mapKeys(const Value& map) {
  if (const auto* m = map.get<AttributeDomainsRef>()) {
    return keysOf(m->map);
  }
  if (const auto* m = map.get<AttributesRef>()) {
    return keysOf(m->map);
  }
  if (const auto* m = map.get<CapacityDomainsRef>()) {
    return keysOf(m->map);
  }
  if (const auto* m = map.get<CapacitiesRef>()) {
    return keysOf(m->map);
  }
  return {};
}

// Lists: same size and no element pair unequal. As cel-go, an element comparison that errs
// does not make the lists unequal.
bool listsEqual(const List& a, const List& b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto eq = equals(a[i], b[i]);
    if (eq.ok() && !*eq) {
      return false;
    }
  }
  return true;
}

bool mapsEqual(const Value& a, const Value& b) {
  if (mapSize(a) != mapSize(b)) {
    return false;
  }
  for (std::string_view key : mapKeys(a)) {
    if (!mapHas(b, key)) {
      return false;
    }
    const auto eq = equals(*mapFind(a, key), *mapFind(b, key));
    if (eq.ok() && !*eq) {
      return false;
    }
  }
  return true;
}

template <typename M>
std::optional<Value> findIn(const M* map, std::string_view key) {
  if (map == nullptr) {
    return std::nullopt;
  }
  const auto it = map->find(key);
  if (it == map->end()) {
    return std::nullopt;
  }
  if constexpr (std::is_same_v<M, AttributeMap>) {
    return toValue(it->second);
  } else {
    return Value{it->second};
  }
}

}  // namespace

std::string_view typeName(Type type) {
  static constexpr std::array<std::string_view, 13> kNames{"dyn",
                                                           "null_type",
                                                           "bool",
                                                           "int",
                                                           "string",
                                                           "Quantity",
                                                           "Semver",
                                                           "list",
                                                           "device",
                                                           "map(string, map(string, dyn))",
                                                           "map(string, dyn)",
                                                           "map(string, map(string, Quantity))",
                                                           "map(string, Quantity)"};
  return kNames[static_cast<std::size_t>(type)];
}

bool isMap(Type type) {
  return type == Type::kAttributeDomains || type == Type::kAttributes ||
         type == Type::kCapacityDomains || type == Type::kCapacities;
}

Value toValue(const AttributeValue& attribute) {
  return std::visit([](const auto& v) { return Value{v}; }, attribute);
}

Value makeList(List items) {
  return Value{ListRef{std::make_shared<const List>(std::move(items))}};
}

Result<bool> equals(const Value& a, const Value& b) {
  if (a.type() == Type::kNull || b.type() == Type::kNull) {
    return a.type() == b.type();
  }
  if (a.type() == Type::kQuantity || a.type() == Type::kVersion) {
    if (a.type() != b.type()) {
      return noOverload("==", a, b);
    }
    if (const auto* q = a.get<Quantity>()) {
      return *q == *b.get<Quantity>();
    }
    return compareVersions(*a.get<Version>(), *b.get<Version>()) == 0;
  }
  if (isMap(a.type()) && isMap(b.type())) {
    return mapsEqual(a, b);
  }
  if (a.type() != b.type()) {
    return false;
  }
  switch (a.type()) {
    case Type::kBool:
      return *a.get<bool>() == *b.get<bool>();
    case Type::kInt:
      return *a.get<std::int64_t>() == *b.get<std::int64_t>();
    case Type::kString:
      return *a.get<std::string>() == *b.get<std::string>();
    case Type::kList:
      return listsEqual(*a.get<ListRef>()->items, *b.get<ListRef>()->items);
    case Type::kDevice:
      return a.get<DeviceRef>()->device == b.get<DeviceRef>()->device;
    default:
      return false;
  }
}

Result<int> order(const Value& a, const Value& b) {
  if (a.type() != b.type()) {
    return noOverload("<", a, b);
  }
  const auto sign = [](const auto& x, const auto& y) { return x < y ? -1 : (y < x ? 1 : 0); };
  switch (a.type()) {
    case Type::kBool:
      return sign(*a.get<bool>(), *b.get<bool>());
    case Type::kInt:
      return sign(*a.get<std::int64_t>(), *b.get<std::int64_t>());
    case Type::kString:
      return sign(*a.get<std::string>(), *b.get<std::string>());
    default:
      return noOverload("<", a, b);
  }
}

std::size_t mapSize(const Value& map) {
  const auto size = [](const auto* m) -> std::size_t { return m == nullptr ? 0 : m->size(); };
  if (const auto* m = map.get<AttributeDomainsRef>()) {
    return size(m->map);
  }
  if (const auto* m = map.get<AttributesRef>()) {
    return size(m->map);
  }
  if (const auto* m = map.get<CapacityDomainsRef>()) {
    return size(m->map);
  }
  if (const auto* m = map.get<CapacitiesRef>()) {
    return size(m->map);
  }
  return 0;
}

bool mapHas(const Value& map, std::string_view key) {
  const auto has = [key](const auto* m) { return m != nullptr && m->find(key) != m->end(); };
  if (const auto* m = map.get<AttributeDomainsRef>()) {
    return has(m->map);
  }
  if (const auto* m = map.get<AttributesRef>()) {
    return has(m->map);
  }
  if (const auto* m = map.get<CapacityDomainsRef>()) {
    return has(m->map);
  }
  if (const auto* m = map.get<CapacitiesRef>()) {
    return has(m->map);
  }
  return false;
}

std::optional<Value> mapFind(const Value& map, std::string_view key) {
  if (const auto* m = map.get<AttributeDomainsRef>()) {
    const auto it = m->map->find(key);
    return Value{AttributesRef{it == m->map->end() ? nullptr : &it->second}};
  }
  if (const auto* m = map.get<CapacityDomainsRef>()) {
    const auto it = m->map->find(key);
    return Value{CapacitiesRef{it == m->map->end() ? nullptr : &it->second}};
  }
  if (const auto* m = map.get<AttributesRef>()) {
    return findIn(m->map, key);
  }
  if (const auto* m = map.get<CapacitiesRef>()) {
    return findIn(m->map, key);
  }
  return std::nullopt;
}

}  // namespace kc::cel
