#pragma once
// The scheduler's whole decision for one pod, as pure code: kube-scheduler's node filters
// (node_filter.hpp, kubecomp.io/gpu ignored there) and then the pool model's Eq. 1 selection
// (node_score.hpp: the multi-pool filter and the policy comparator, counting only GPUs of the
// models the pod accepts) over the nodes that passed. kubecomp-sched calls it with the state its
// informers built; a test calls it and the simulator's selectNode on the same cluster and
// checks that they agree.
//
//   1. filterNodes(pod, nodes, usage, options.filter)
//   2. selectNodeForModelsAmong(state, {0, 0, gpuRequest(pod)}, models, policy, mode, passed)
//      (CPU and memory were decided in step 1, so the pool model gets 0 for them)
//   3. the winner and its deficit (GPUs to move to it before the pod can run)
//
// Computed in the other order, with the same result: Eq. 1 over every node, asking the kube
// filters (filterNode) only of a node that would beat the best so far (selectNodeAdmitted), so
// a decision at 5,000 nodes runs the filters on a handful of nodes. Only when nothing fits does
// it run filterNodes over every node, for the message.
//
// With preference inputs (hasPreferenceInputs, pod_preference.hpp: the pod has preferred node
// affinity, preferred pod (anti-)affinity or ScheduleAnyway spread constraints, a node has a
// PreferNoSchedule taint, or a placed pod has required pod affinity or preferred terms), step 2
// ranks instead every node that passes the kube filters and the pool filter by
//   a. deficit, ascending (a soft preference never costs a GPU move),
//   b. preference score, descending (scorePreferences' weighted sum of kube-scheduler's
//      InterPodAffinity, PodTopologySpread, NodeAffinity and TaintToleration scores, normalized
//      over those nodes),
//   c. the policy's comparator, then the node name.
// Without preference inputs every node would score the same, and the decision is Eq. 1 alone,
// computed lazily as above.
//
// nodes[i], usage[i] and state.node(i) are the same node (state holds every node, in the same
// order; a node wired to no pool has pool kNoPool). When nothing passes, the error
// "unschedulable" carries kube-scheduler's FitError text ("0/N nodes are available: ..."),
// counting the nodes step 2 rejected under the pool reasons below.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// Reasons of step 2, in the FitError's words.
inline constexpr std::string_view kReasonNoPool = "node(s) had no GPU pool";
inline constexpr std::string_view kReasonPoolShort =
    "node(s) had too few free kubecomp.io/gpu in their GPU pool";
inline constexpr std::string_view kReasonNodeShort = "Insufficient kubecomp.io/gpu";

struct PlacementOptions {
  FilterOptions filter{};  // kubecomp.io/gpu is added to fit.ignoredResources by placePod
  NodePolicy policy{};     // a registry policy (policy_registry.hpp); empty name: eq1
  Composability mode = Composability::Composable;
};

struct PodPlacement {
  std::size_t node = 0;       // index into nodes
  std::uint32_t deficit = 0;  // GPUs to move to the node first
  std::uint32_t gpus = 0;     // the pod's GPU request
  std::int64_t score = 0;     // eq1Score, for display
};

// Errors: "invalid" (spans and state differ in size, a GPU request above 2^32-1),
// "unschedulable" with the FitError text.
Result<PodPlacement> placePod(const SchedPod& pod, std::span<const SchedNode> nodes,
                              std::span<const NodeUsage> usage, const ClusterState& state,
                              const PlacementOptions& options);

}  // namespace kc::alloc
