#pragma once
// Kubelet's resource-fit admission, as pure functions over API objects (pkg/kubelet/lifecycle
// predicate + the scheduler's noderesources fit it calls): what a pod requests, whether a name
// is an extended resource, and whether the pod fits the node's allocatable minus what the
// already admitted pods request. The rejection carries kubelet's reason and message wording.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "libcore/base/result.hpp"

namespace kc::kubelet {

// Resource name -> amount (millicores for cpu, whole units otherwise).
using ResourceList = std::map<std::string, std::int64_t>;

// v1helper.IsExtendedResourceName: has a domain prefix that is not *kubernetes.io, does not
// start with "requests.", and "requests.<name>" is a qualified name (DNS-subdomain prefix,
// name part of at most 63 characters of [A-Za-z0-9_.-] starting and ending alphanumeric).
bool isExtendedResourceName(std::string_view name);

// DNS-1123 subdomain (Node names, label-key prefixes): at most 253 characters, dot-separated
// labels of [a-z0-9-] that start and end alphanumeric.
bool isDnsSubdomain(std::string_view name);

// validation.IsQualifiedName: [DNS-subdomain prefix "/"] name, the name 1..63 characters of
// [A-Za-z0-9_.-] starting and ending alphanumeric (label keys, resource names).
bool isQualifiedName(std::string_view name);

// A container's requests: resources.requests, with resources.limits filling in resources
// missing from requests (the apiserver's defaulting). Error "invalid" on a bad quantity.
Result<ResourceList> containerRequests(const nlohmann::json& container);

// The pod's effective request per resource, by kc::alloc::podRequests (resourcehelper.PodRequests
// of v1.29, sidecar init containers included): the scheduler's own computation. Zero amounts of
// cpu, memory and ephemeral-storage are left out. Error "invalid" naming the field.
Result<ResourceList> podRequests(const nlohmann::json& pod);

// ResourceList from a Node's status.capacity / status.allocatable map. Unparseable entries
// are skipped (a Node written by someone else must not stop admission).
ResourceList parseResourceMap(const nlohmann::json& map);

struct Rejection {
  std::string reason;   // "OutOfcpu", "OutOfkubecomp.io/gpu", "UnexpectedAdmissionError", ...
  std::string message;  // kubelet's wording, without the "Pod was rejected: " prefix
};

// The fit check. `allocatable`: the node's allocatable as kubelet sees it; `used`: the summed
// requests of the admitted, not yet terminated pods; `activePods`: how many of them.
// Order of checks (first failure wins, as kubelet reports only the first): pods, cpu,
// memory, ephemeral-storage, then the other resources in name order. Extended resources the
// node does not advertise at all (no allocatable entry; an entry of 0 is checked) are not
// checked (kubelet removes them: cluster-level extended resources).
std::optional<Rejection> checkFit(const ResourceList& podRequest, const ResourceList& allocatable,
                                  const ResourceList& used, std::int64_t activePods);

}  // namespace kc::kubelet
