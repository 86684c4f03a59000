#pragma once
// Dynamic Resource Allocation (resource.k8s.io/v1): the defaulting and validation
// kube-apiserver applies to DeviceClass, ResourceSlice, ResourceClaim (and its status) and
// ResourceClaimTemplate, re-stated from pkg/apis/resource/{v1/defaults.go,validation} for the
// checks clients hit. Not modelled: CEL compilation of selectors (expressions are stored as
// given), quantities of capacities, admin-access namespace labels, feature-gated field drops.
//
// Pure functions over the stored JSON: dra_validation.cpp (shared checks, DeviceClass,
// ResourceSlice), dra_claim_validation.cpp (claims, claim status, templates).

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tools/kube-apiserver-double/field_errors.hpp"

namespace kc::apiserver::dra {

inline constexpr const char* kGroup = "resource.k8s.io";

// Limits of resource.k8s.io/v1, named as in k8s.io/api/resource/v1/types.go.
inline constexpr std::size_t kResourceSliceMaxDevices = 128;
inline constexpr std::size_t kResourceSliceMaxDevicesWithTaintsOrConsumesCounters = 64;
inline constexpr std::size_t kResourceSliceMaxAttributesAndCapacitiesPerDevice = 32;
inline constexpr std::size_t kResourceSliceMaxCounterSets = 8;
inline constexpr std::size_t kBindingConditionsMaxSize = 4;
inline constexpr std::size_t kBindingFailureConditionsMaxSize = 4;
inline constexpr std::size_t kDeviceTaintsMaxLength = 16;
inline constexpr std::size_t kDriverNameMaxLength = 63;
inline constexpr std::size_t kPoolNameMaxLength = 253;
inline constexpr std::size_t kDeviceAttributeMaxValueLength = 64;
inline constexpr std::size_t kDeviceMaxDomainLength = 63;
inline constexpr std::size_t kDeviceMaxIDLength = 32;
inline constexpr std::size_t kAllocationResultsMaxSize = 32;
inline constexpr std::size_t kDeviceRequestsMaxSize = kAllocationResultsMaxSize;
inline constexpr std::size_t kDeviceConstraintsMaxSize = 32;
inline constexpr std::size_t kDeviceConfigMaxSize = 32;
inline constexpr std::size_t kDeviceSelectorsMaxSize = 32;
inline constexpr std::size_t kFirstAvailableDeviceRequestMaxSize = 8;
inline constexpr std::size_t kDeviceTolerationsMaxLength = 16;
inline constexpr std::size_t kCELSelectorExpressionMaxLength = 10 * 1024;
inline constexpr std::size_t kOpaqueParametersMaxLength = 10 * 1024;
inline constexpr std::size_t kResourceClaimReservedForMaxSize = 256;
inline constexpr std::size_t kAllocatedDeviceStatusMaxConditions = 8;

// v1 defaults (SetDefaults_ExactDeviceRequest / _DeviceSubRequest / _DeviceToleration):
// allocationMode ExactCount, count 1 for ExactCount, toleration operator Equal. `resource` is
// the plural; anything but resourceclaims / resourceclaimtemplates is left alone.
void applyDefaults(const std::string& resource, nlohmann::json& object);

// `old` is the stored object on update, null on create.
FieldErrors validateDeviceClass(const nlohmann::json& deviceClass);
FieldErrors validateResourceSlice(const nlohmann::json& slice, const nlohmann::json* old);
FieldErrors validateResourceClaim(const nlohmann::json& claim, const nlohmann::json* old);
// An update through resourceclaims/<name>/status.
FieldErrors validateResourceClaimStatus(const nlohmann::json& claim, const nlohmann::json& old);
FieldErrors validateResourceClaimTemplate(const nlohmann::json& claimTemplate,
                                          const nlohmann::json* old);

// The store's entry point: throws the 422 Invalid when `object` (a create when `old` is
// null, else an update of the main resource or, with `statusUpdate`, of its status) is
// invalid. Nothing is stored then.
void admit(const std::string& resource, const std::string& name, const nlohmann::json& object,
           const nlohmann::json* old, bool statusUpdate);

// ---- checks shared by the validators (dra_validation.cpp)

// A request of a claim by name, with its firstAvailable subrequests (empty for `exactly`):
// what `requests` references in constraints, config and allocation results resolve against.
using RequestNames = std::map<std::string, std::set<std::string>>;

// obj[key] as a list: null when absent, and an "Invalid value: must be a list" error when
// it is something else.
const nlohmann::json* listAt(FieldErrors& errs, const nlohmann::json& obj, const char* key,
                             const std::string& field);
void checkDriverName(FieldErrors& errs, const std::string& field, const nlohmann::json& value);
void checkPoolName(FieldErrors& errs, const std::string& field, const nlohmann::json& value);
void checkDnsLabel(FieldErrors& errs, const std::string& field, const nlohmann::json& value);
void checkDnsSubdomain(FieldErrors& errs, const std::string& field, const nlohmann::json& value);
// A label name (a qualified name: optional DNS subdomain prefix and '/', then a name).
void checkLabelName(FieldErrors& errs, const std::string& field, const nlohmann::json& value);
// A device attribute / capacity / constraint name: a C identifier, or "<domain>/<ID>".
void checkQualifiedName(FieldErrors& errs, const std::string& field, const std::string& name,
                        bool requireDomain);
// holder.bindingConditions / bindingFailureConditions of a device or an allocation result.
void checkBindingConditions(FieldErrors& errs, const std::string& field,
                            const nlohmann::json& holder);
// DeviceClass.spec.selectors, a request's selectors: at most 32 CEL selectors.
void checkSelectors(FieldErrors& errs, const std::string& field, const nlohmann::json& holder);
// The `opaque` configuration of a class, claim or allocation config entry.
void checkDeviceConfiguration(FieldErrors& errs, const std::string& field,
                              const nlohmann::json& config);
// A `requests` reference list ("<request>" or "<request>/<subrequest>").
void checkRequestRefs(FieldErrors& errs, const std::string& field, const nlohmann::json& holder,
                      const RequestNames& names);
void checkRequestRef(FieldErrors& errs, const std::string& field, const std::string& ref,
                     const RequestNames& names);

}  // namespace kc::apiserver::dra
