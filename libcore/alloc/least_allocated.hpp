#pragma once
// kube-scheduler's default node scoring as a node policy. A BASELINE: it models a cluster
// without KubeComp (docs/results.md, "DRA path: stock-dra vs the pool policy"); the scheduler's
// own policies are in node_score.hpp.
//
// kube-scheduler's NodeResourcesFit plugin with its default scoring strategy, LeastAllocated
// (pkg/scheduler/framework/plugins/noderesources/least_allocated.go), scores a node
//
//   score = sum_r w_r * leastRequestedScore(requested_r, capacity_r) / sum_r w_r   (integer /)
//   leastRequestedScore(requested, capacity) = (capacity - requested) * 100 / capacity
//                                              (0 when capacity == 0 or requested > capacity)
//
// over the resources r the node has, and the highest score wins. Resources here, weight 1 each
// (kube's default weights):
//   cpu     requested = cpuMilliUsed                           capacity = cpuMilliCapacity
//   memory  requested = memoryMiBUsed                          capacity = memoryMiBCapacity
//   GPUs    requested = attached GPUs that are not free        capacity = GPUs attached to the
//                       (in use, unhealthy, draining) + req               node
// kube-scheduler itself scores no DRA device (NodeResourcesFit reads node allocatable, which
// DRA devices are not part of): the GPU term is our model of "most free requested resources"
// with the node's own devices (its ResourceSlice) as its GPU capacity. Pool devices
// (unattached) belong to no node and do not count. The term is left out for a pod that
// requests no GPU (as kube does for an extended resource the pod does not request), and a
// node with no GPU attached scores 0 on it rather than being left out (kube's rule for a
// missing resource), so lacking GPUs is never rewarded by a mean over fewer terms. Ties: kube
// picks one of the best at random; here the node name, so runs repeat.
//
// One difference from kube, forced by NodePolicy (a comparator that knows only the pod's GPU
// count): kube adds the pod's own CPU and memory to `requested`. Between two nodes of the same
// capacity that lowers both nodes' term by the same amount, so the order is the same up to
// kube's integer rounding; every set-up of docs/results.md has nodes of one size.

#include <cstdint>
#include <string_view>

#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pool_model.hpp"

namespace kc::alloc {

// kube's leastRequestedScore: 0..100, total (capacity 0 and over-request give 0).
std::int64_t leastRequestedScore(std::uint64_t requested, std::uint64_t capacity);

// The node's LeastAllocated score (0..100) for a pod needing `req` GPUs, as above.
std::int64_t leastAllocatedScore(const NodeState& node, std::uint32_t req);

struct LeastAllocatedNodePolicy {
  static constexpr std::string_view kName = "least-allocated";
  static constexpr std::string_view kDescription =
      "baseline: kube-scheduler's default NodeResourcesFit LeastAllocated score over CPU, "
      "memory and attached GPUs (most free first)";
  static int compare(const NodeState& a, const NodeState& b, std::uint32_t req);
};

}  // namespace kc::alloc
