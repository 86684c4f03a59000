#include "libcore/cel/device.hpp"

#include <utility>

namespace kc::cel {
namespace {

// resource.k8s.io parseQualifiedName: "domain/id", or a bare id in the driver's domain.
std::pair<std::string, std::string> split(const Device& device, std::string_view name) {
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos) {
    return {device.driver, std::string(name)};
  }
  return {std::string(name.substr(0, slash)), std::string(name.substr(slash + 1))};
}

}  // namespace

void setAttribute(Device& device, std::string_view qualifiedName, AttributeValue value) {
  auto [domain, id] = split(device, qualifiedName);
  device.attributes[domain].insert_or_assign(std::move(id), std::move(value));
}

void setCapacity(Device& device, std::string_view qualifiedName, Quantity value) {
  auto [domain, id] = split(device, qualifiedName);
  device.capacity[domain].insert_or_assign(std::move(id), value);
}

}  // namespace kc::cel
