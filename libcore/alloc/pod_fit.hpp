#pragma once
// What a pod asks of a node, computed as kube-scheduler computes it (resourcehelper.PodRequests,
// Kubernetes v1.29 with sidecar containers), and what the pods already on a node hold.
//
// Effective request, per resource:
//   regular  = sum over containers + sum over restartable init containers (sidecars keep
//              running next to the containers)
//   init(i)  = request of init container i + the sidecars declared before it (a plain init
//              container runs beside the sidecars started earlier); for a sidecar, the sum of
//              the sidecars up to and including it
//   request  = max(regular, max over i of init(i)) + spec.overhead
// Without sidecars this is the classic max(sum of containers, largest init container) +
// overhead. Sums saturate at INT64_MAX instead of overflowing.

#include <cstdint>
#include <span>
#include <vector>

#include "libcore/alloc/sched_objects.hpp"

namespace kc::alloc {

Resources podRequests(const SchedPod& pod);

// GPUs the pod needs (kubecomp.io/gpu of podRequests: all containers summed, init containers
// maxed). The original plugin read container 0 only.
std::int64_t gpuRequest(const SchedPod& pod);

// The pods already on a node (bound, or assumed by the scheduler) and the sum of their
// effective requests: kube-scheduler's NodeInfo.Requested and len(NodeInfo.Pods).
struct NodeUsage {
  Resources requested{};
  std::int64_t pods = 0;

  friend bool operator==(const NodeUsage&, const NodeUsage&) = default;
};

// Adds / removes one pod's effective request (saturating; removal never goes below zero).
void addPodUsage(NodeUsage& usage, const Resources& podRequest);
void removePodUsage(NodeUsage& usage, const Resources& podRequest);

// Whether a pod holds resources on its node: bound (spec.nodeName set) and not terminal
// (phase Succeeded or Failed). kube-scheduler watches only non-terminal pods for its cache.
bool holdsNodeResources(const SchedPod& pod);

// What the pods that hold resources request on each node, in the order of `nodes` (for a
// scheduler starting up, or a test). Pods bound to a node not in `nodes` are skipped (a deleted
// node). Error "invalid" when two nodes share a name.
Result<std::vector<NodeUsage>> nodeUsage(std::span<const SchedNode> nodes,
                                         std::span<const SchedPod> pods);

}  // namespace kc::alloc
