#pragma once
// The parts of a resource.k8s.io/v1 ResourceClaim the DRA path reads and writes (docs/dra.md):
// the allocation kube-scheduler (or kubecomp-sched, writing it the same way) puts in
// status.allocation, the pods in status.reservedFor, and the per-device conditions reconfig-mgr's
// attach controller writes in status.devices[] (KEP-5007 binding conditions). One parser, one
// writer per part.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::api {

// resource.k8s.io/v1 AllocationResultsMaxSize and ResourceClaimReservedForMaxSize.
inline constexpr std::size_t kMaxAllocationResults = 32;
inline constexpr std::size_t kMaxReservedFor = 256;
// resourceapi.Finalizer: kube-scheduler puts it on a claim before writing its allocation, and
// the resourceclaim controller deallocates a claim that carries it once no pod uses it, then
// drops it (a claim without it keeps its allocation until it is deleted).
inline constexpr std::string_view kClaimDeleteProtectionFinalizer =
    "resource.kubernetes.io/delete-protection";

// status.allocation.devices.results[] (DeviceRequestAllocationResult).
struct ClaimDevice {
  std::string request;
  std::string driver;
  std::string pool;
  std::string device;
  std::vector<std::string> bindingConditions;
  std::vector<std::string> bindingFailureConditions;

  friend bool operator==(const ClaimDevice&, const ClaimDevice&) = default;
};

// status.allocation.
struct ClaimAllocation {
  std::vector<ClaimDevice> results;
  // The node the allocation is for ("" none): status.allocation.nodeSelector as the allocator
  // writes it for one node (matchFields metadata.name In [node]); a hostname-label selector of
  // one node reads the same.
  std::string nodeName;
  std::string allocationTimestamp;  // RFC 3339, "" when absent

  friend bool operator==(const ClaimAllocation&, const ClaimAllocation&) = default;
};

// A metav1.Condition of status.devices[].conditions.
struct ClaimCondition {
  std::string type;
  std::string status;  // "True", "False" or "Unknown"
  std::string reason;  // CamelCase
  std::string message;
  std::int64_t observedGeneration = 0;
  std::string lastTransitionTime;  // RFC 3339

  friend bool operator==(const ClaimCondition&, const ClaimCondition&) = default;
};

// status.devices[] (AllocatedDeviceStatus): one device's conditions.
struct ClaimDeviceStatus {
  std::string driver;
  std::string pool;
  std::string device;
  std::vector<ClaimCondition> conditions;

  friend bool operator==(const ClaimDeviceStatus&, const ClaimDeviceStatus&) = default;
};

// status.reservedFor[] (ResourceClaimConsumerReference).
struct ClaimConsumer {
  std::string apiGroup;
  std::string resource;  // "pods"
  std::string name;
  std::string uid;

  friend bool operator==(const ClaimConsumer&, const ClaimConsumer&) = default;
};

// spec.devices.requests[] as far as an allocator of ours reads it: an `exactly` request of a
// DeviceClass, by count or all, narrowed by CEL selectors.
struct ClaimRequest {
  std::string name;
  std::string deviceClassName;
  bool all = false;                    // allocationMode All (else ExactCount)
  std::int64_t count = 1;              // ExactCount: how many (the API's default is 1)
  std::vector<std::string> selectors;  // selectors[].cel.expression, all must hold
  // Why an allocator of ours does not serve it ("" it does): firstAvailable alternatives,
  // adminAccess, capacity requests, tolerations.
  std::string unsupported;
};

// A pod's entry of spec.resourceClaims, with the claim it names: resourceClaimName, or for a
// resourceClaimTemplateName the claim the resourceclaim controller created for the pod
// (status.resourceClaimStatuses; "" until it has).
struct PodClaimRef {
  std::string name;       // the entry's name (what containers' resources.claims refer to)
  std::string claimName;  // "" not created yet
  bool fromTemplate = false;
};

// The pod's claims in spec order. Error "invalid" naming the field when an entry names neither
// or both of a claim and a template, or a name twice. A pod without spec.resourceClaims: empty.
Result<std::vector<PodClaimRef>> podClaimRefs(const nlohmann::json& pod);

struct Claim {
  std::string ns;
  std::string name;
  std::string uid;
  std::int64_t generation = 0;
  bool deleting = false;  // metadata.deletionTimestamp
  std::optional<ClaimAllocation> allocation;
  std::vector<ClaimConsumer> reservedFor;
  std::vector<ClaimDeviceStatus> devices;
  std::vector<ClaimRequest> requests;  // spec.devices.requests
  // Why an allocator of ours does not serve the claim as a whole ("" it does): constraints or
  // config it does not apply.
  std::string specUnsupported;
  std::string resourceVersion;

  // The device status entry of one allocated device, if any.
  const ClaimDeviceStatus* deviceStatus(const ClaimDevice& d) const;
  // The condition `type` of that device, if set.
  const ClaimCondition* condition(const ClaimDevice& d, std::string_view type) const;
};

// Reads a ResourceClaim object. Error "invalid" naming the field when a part this path reads is
// malformed (an allocation result without driver, pool or device; more results or consumers
// than the API allows; a condition without type or status). Never throws.
Result<Claim> parseClaim(const nlohmann::json& object);

// status.allocation as kube-scheduler writes it: devices.results, nodeSelector (matchFields
// metadata.name In [nodeName]) when nodeName is set, allocationTimestamp.
nlohmann::json toJson(const ClaimAllocation& allocation);
nlohmann::json toJson(const ClaimDeviceStatus& status);

// The claim's status.devices with `condition` set on device (driver, pool, device): the entry
// is created if missing; a condition of the same type is replaced, keeping its
// lastTransitionTime when the status does not change (metav1.Condition's rule); other devices
// and conditions stay as they are.
std::vector<ClaimDeviceStatus> withDeviceCondition(std::vector<ClaimDeviceStatus> devices,
                                                   const ClaimDevice& device,
                                                   ClaimCondition condition);

}  // namespace kc::api
