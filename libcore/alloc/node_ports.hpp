#pragma once
// kube-scheduler's NodePorts filter: a node is refused when one of the pod's host ports is
// already taken there by a pod placed on it. Two host ports conflict when they have the same
// port and protocol and their host IPs are equal or either is 0.0.0.0 (every address; an empty
// hostIP is read as 0.0.0.0, an empty protocol as TCP). Only the regular containers' ports
// count, on both sides (kube-scheduler's getContainerPorts), and only those with a hostPort.

#include <string_view>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/sched_objects.hpp"

namespace kc::alloc {

inline constexpr std::string_view kReasonNodePorts =
    "node(s) didn't have free ports for the requested pod ports";

bool hostPortsConflict(const HostPort& a, const HostPort& b);

// Empty when the pod's host ports are free on the node. The pod itself, if placed there (its own
// reservation being checked again), is not counted against itself.
std::vector<std::string> nodePortsFilter(const SchedPod& pod, const SchedNode& node,
                                         const PlacedPods* placed);

}  // namespace kc::alloc
