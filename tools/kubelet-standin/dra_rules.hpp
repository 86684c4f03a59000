#pragma once
// Pure rules of kubelet's DRA side (pkg/kubelet/cm/dra and its plugin manager, v1.34), with
// kubelet's wording: which DRA plugin API a registered plugin is spoken to in, whether a DRA
// plugin's registration is valid, whether a ResourceClaim may be prepared for a pod, and which
// claims each container of a pod uses (PodResources). No I/O; the DRA manager and the plugin
// store call these.

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::kubelet {

// The plugin watcher's type of a DRA driver's plugin (pluginregistration PluginInfo.type).
inline constexpr std::string_view kDraPluginType = "DRAPlugin";
// The gRPC services ("<package>.<service>") a DRA plugin lists in supported_versions.
inline constexpr std::string_view kDraServiceV1 = "v1.DRAPlugin";
inline constexpr std::string_view kDraServiceV1beta1 = "v1beta1.DRAPlugin";

enum class DraService { kV1, kV1beta1 };

std::string_view serviceName(DraService s);

// kubelet's validateSupportedServices: the first service of the plugin's list that kubelet
// speaks (v1.DRAPlugin, v1beta1.DRAPlugin); the plugin's order decides, and the plugins
// built on the upstream helper list v1 first. Errors are kubelet's messages.
Result<DraService> chooseDraService(const std::vector<std::string>& supported);

// Everything kubelet checks on a DRA plugin's GetInfo answer before it registers it, and two
// checks of the stand-in's own (stricter than kubelet, which finds these only at the first
// NodePrepareResources): the driver name is a DNS subdomain and the endpoint an absolute
// path. Whether the endpoint is a socket is checked by the caller (it needs the file system).
// The error is what follows "plugin validation failed with err: ".
Status validateDraPlugin(const std::string& driver, const std::string& endpoint,
                         const std::vector<std::string>& supported);

// One device NodePrepareResources returned for a claim.
struct PreparedDevice {
  std::vector<std::string> requestNames;
  std::string pool;
  std::string device;
  std::vector<std::string> cdiDeviceIds;

  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

// A claim in kubelet's claim info cache: who uses it on this node and what each driver
// prepared (kubelet's ClaimInfoState).
struct ClaimInfo {
  std::string ns;
  std::string name;
  std::string uid;
  std::map<std::string, std::vector<PreparedDevice>> drivers;  // every driver of the allocation
  std::set<std::string> podUids;
  bool prepared = false;  // in memory only: kubelet does not checkpoint it

  friend bool operator==(const ClaimInfo&, const ClaimInfo&) = default;
};

// One spec.resourceClaims entry of a pod, resolved to the claim it names.
struct PodClaimName {
  std::string entry;  // spec.resourceClaims[].name
  std::string claim;  // the ResourceClaim's name
  bool fromTemplate = false;
};

// The claims a pod names, in spec order. Error (kubelet's text) when a template's claim has not
// been created yet: `pod "<ns>/<name>": ResourceClaim not created yet`.
Result<std::vector<PodClaimName>> podClaimNames(const nlohmann::json& pod);

// kubelet's checks of a fetched claim for a pod, in its order: a claim made from a template
// must be controlled by the pod; the pod (by uid) must be in status.reservedFor; the claim
// must be allocated. The result holds the claim with every driver of its allocation and no
// devices yet. Errors are kubelet's messages.
Result<ClaimInfo> claimForPod(const nlohmann::json& pod, const PodClaimName& ref,
                              const nlohmann::json& claim);

// container name -> the ResourceClaims it uses (its resources.claims[].name mapped through the
// pod's spec.resourceClaims), for every container and init container, as kubelet's
// GetContainerClaimInfos. Entries whose claim is not known yet are left out.
std::map<std::string, std::vector<std::string>> containerClaims(const nlohmann::json& pod);

// Whether the pod names any ResourceClaim (spec.resourceClaims not empty).
bool usesResourceClaims(const nlohmann::json& pod);

}  // namespace kc::kubelet
