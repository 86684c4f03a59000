#pragma once
// DRA objects as tests and benchmarks hand them to the API server: a ResourceClaim asking one
// device of the chart's DeviceClass, and the status kube-scheduler writes when it allocates one
// of a GPUPool's fabric devices. Tests only.

#include <nlohmann/json.hpp>
#include <string>

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"

namespace kc::testing {

inline nlohmann::json oneGpuClaim(const std::string& name, const std::string& ns) {
  using nlohmann::json;
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}, {"namespace", ns}}},
          {"spec",
           {{"devices",
             {{"requests",
               json::array({{{"name", "gpu"},
                             {"exactly", {{"deviceClassName", api::kDraDeviceClassName}}}}})}}}}}};
}

// status.allocation (GPU `gpuId` of GPUPool `gpuPool`'s fabric pool, for `node`, with the
// binding conditions) and status.reservedFor (pod `pod`, uid "uid-<pod>").
inline nlohmann::json fabricAllocationStatus(const std::string& gpuPool, const std::string& gpuId,
                                             const std::string& node, const std::string& pod) {
  api::ClaimDevice d;
  d.request = "gpu";
  d.driver = std::string(api::kDraDriverName);
  d.pool = gpuPool;
  d.device = api::draDeviceName(gpuId);
  d.bindingConditions = {std::string(api::kAttachedCondition)};
  d.bindingFailureConditions = {std::string(api::kAttachFailedCondition)};
  api::ClaimAllocation a;
  a.results = {d};
  a.nodeName = node;
  a.allocationTimestamp = "2026-01-01T00:00:00Z";
  return {{"allocation", api::toJson(a)},
          {"reservedFor",
           nlohmann::json::array({{{"resource", "pods"}, {"name", pod}, {"uid", "uid-" + pod}}})}};
}

}  // namespace kc::testing
