#pragma once
// Builders for resource.k8s.io/v1 objects and pods that use them, valid unless a test changes
// them (as kube-scheduler's st.MakePod()): tests state only what differs.

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace kc::apiserver::testing {

inline const char* const kGpuDriver = "gpu.kubecomp.io";

inline nlohmann::json makeDeviceClass(const std::string& name) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "DeviceClass"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"selectors", {{{"cel", {{"expression", "device.driver == \"gpu.kubecomp.io\""}}}}}}}}};
}

// A node-local slice of `devices` GPUs named gpu-0, gpu-1, ...
inline nlohmann::json makeSlice(const std::string& name, const std::string& node = "node-1",
                                int devices = 1) {
  nlohmann::json list = nlohmann::json::array();
  for (int i = 0; i < devices; ++i) {
    list.push_back({{"name", "gpu-" + std::to_string(i)}});
  }
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceSlice"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"driver", kGpuDriver},
            {"nodeName", node},
            {"pool", {{"name", node}, {"generation", 0}, {"resourceSliceCount", 1}}},
            {"devices", list}}}};
}

// A claim spec asking for one device of class gpu.kubecomp.io per request name.
inline nlohmann::json makeClaimSpec(const std::vector<std::string>& requests = {"gpu"}) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : requests) {
    list.push_back({{"name", r}, {"exactly", {{"deviceClassName", kGpuDriver}}}});
  }
  return {{"devices", {{"requests", list}}}};
}

inline nlohmann::json makeClaim(const std::string& name, nlohmann::json spec = makeClaimSpec()) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaim"},
          {"metadata", {{"name", name}}},
          {"spec", std::move(spec)}};
}

inline nlohmann::json makeClaimTemplate(const std::string& name,
                                        nlohmann::json spec = makeClaimSpec()) {
  return {{"apiVersion", "resource.k8s.io/v1"},
          {"kind", "ResourceClaimTemplate"},
          {"metadata", {{"name", name}}},
          {"spec", {{"spec", std::move(spec)}}}};
}

// A pod with spec.resourceClaims: (pod claim name, template name) pairs.
inline nlohmann::json makeClaimingPod(
    const std::string& name, const std::vector<std::pair<std::string, std::string>>& claims) {
  nlohmann::json podClaims = nlohmann::json::array();
  nlohmann::json refs = nlohmann::json::array();
  for (const auto& [claim, tmpl] : claims) {
    podClaims.push_back({{"name", claim}, {"resourceClaimTemplateName", tmpl}});
    refs.push_back({{"name", claim}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"resourceClaims", podClaims},
            {"containers",
             {{{"name", "c"}, {"image", "busybox"}, {"resources", {{"claims", refs}}}}}}}}};
}

}  // namespace kc::apiserver::testing
