#pragma once
// What a DRA device selector sees of one device: the CEL variable `device` (resource.k8s.io/v1
// CELDeviceSelector): driver, attributes and capacity grouped by domain, and
// allowMultipleAllocations.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <variant>

#include "libcore/cel/quantity.hpp"
#include "libcore/cel/semver.hpp"

namespace kc::cel {

// One DeviceAttribute value: exactly one of int, bool, string, version. (The alpha list forms,
// ints/bools/strings/versions, are not modelled.)
using AttributeValue = std::variant<bool, std::int64_t, std::string, Version>;

// id -> value, for one domain ("gpu.kubecomp.io"). Transparent comparators: lookups by
// string_view allocate nothing.
using AttributeMap = std::map<std::string, AttributeValue, std::less<>>;
using CapacityMap = std::map<std::string, Quantity, std::less<>>;

struct Device {
  std::string driver;
  std::map<std::string, AttributeMap, std::less<>> attributes;  // domain -> id -> value
  std::map<std::string, CapacityMap, std::less<>> capacity;     // domain -> id -> quantity
  bool allowMultipleAllocations = false;
};

// Files a ResourceSlice attribute or capacity under its domain as upstream does: a qualified
// name "domain/id" goes to that domain, a bare "id" to the driver's (so set `driver` first).
void setAttribute(Device& device, std::string_view qualifiedName, AttributeValue value);
void setCapacity(Device& device, std::string_view qualifiedName, Quantity value);

}  // namespace kc::cel
