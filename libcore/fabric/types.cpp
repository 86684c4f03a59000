#include "libcore/fabric/types.hpp"

#include <algorithm>

namespace kc::fabric {

std::string_view toString(GpuHealth health) {
  return health == GpuHealth::kOk ? "Healthy" : "Unhealthy";
}

std::string makeGpuId(std::string_view chassis, std::string_view localId) {
  std::string id;
  id.reserve(chassis.size() + 1 + localId.size());
  id.append(chassis).append(".").append(localId);
  return id;
}

std::optional<GpuIdParts> splitGpuId(std::string_view gpuId) {
  const auto dot = gpuId.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == gpuId.size()) {
    return std::nullopt;
  }
  GpuIdParts parts{std::string(gpuId.substr(0, dot)), std::string(gpuId.substr(dot + 1))};
  if (!isValidChassisName(parts.chassis)) {
    return std::nullopt;
  }
  return parts;
}

bool isValidChassisName(std::string_view name) {
  if (name.empty() || name.size() > 63 || name.front() == '-' || name.back() == '-') {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

const GpuInfo* Inventory::find(std::string_view gpuId) const {
  for (const auto& gpu : gpus) {
    if (gpu.id == gpuId) {
      return &gpu;
    }
  }
  return nullptr;
}

}  // namespace kc::fabric
