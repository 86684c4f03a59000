#pragma once
// The fields of a Pod that the filters looking at other pods, and the queue, read beyond what
// sched_objects.cpp parses: metadata.labels, spec.schedulingGates (Pod Scheduling Readiness),
// the preferred node affinity, the pod (anti-)affinity (pod_affinity.hpp),
// topologySpreadConstraints (topology_spread.hpp) and the host ports of spec.containers
// (kube-scheduler's NodePorts reads the regular containers only, not init containers). Validated as
// strictly as the rest of parsePod: a bad shape is an "invalid" error naming the field.

#include <nlohmann/json_fwd.hpp>

#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// Fills out.labels, out.schedulingGates, out.priority, out.preemptNever,
// out.preferredNodeAffinity, out.podAffinity, out.topologySpread and out.hostPorts from a Pod
// object (v1).
// Called by parsePod.
Status parsePodFields(const nlohmann::json& pod, SchedPod& out);

// Whether the pod waits for its scheduling gates to be removed: such a pod is not considered for
// scheduling at all and holds nothing (kube-scheduler's SchedulingGates PreEnqueue plugin).
inline bool schedulingGated(const SchedPod& pod) {
  return !pod.schedulingGates.empty();
}

// Shared by the parsers of pod fields (pod_fields, pod_affinity, topology_spread).
namespace detail {
// An `invalid` error "<field>: <why>".
Error invalid(const std::string& field, const std::string& why);
// obj[key], or null when obj is not an object or has no such key.
const nlohmann::json& at(const nlohmann::json& obj, const char* key);
// obj[key] as a string ("" when absent); a non-string is `invalid` naming `field`.
Result<std::string> optionalString(const nlohmann::json& obj, const char* key,
                                   const std::string& field);
// A map of strings (labels, annotations, nodeSelector); null is empty, anything else that is
// not an object of strings is `invalid` naming `field` (or `field[key]`).
Result<StringMap> stringMap(const nlohmann::json& v, const std::string& field);
}  // namespace detail

}  // namespace kc::alloc
