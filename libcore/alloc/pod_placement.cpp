#include "libcore/alloc/pod_placement.hpp"

#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/policy_registry.hpp"

namespace kc::alloc {
namespace {

// Why step 2 turned a node down, counted over GPUs of the accepted models.
std::string_view poolReason(const ClusterState& state, NodeIndex n, const PodRequest& request,
                            const ModelFreeGpus* free, Composability mode) {
  const NodeState& node = state.node(n);
  const std::uint32_t nodeFree = free != nullptr ? free->node[n] : node.freeGpus;
  if (nodeFree >= request.gpus) {
    return {};
  }
  if (mode == Composability::Preconfigured) {
    return kReasonNodeShort;
  }
  if (node.pool == kNoPool) {
    return kReasonNoPool;
  }
  const std::uint32_t poolFree =
      free != nullptr ? free->pool[node.pool] : state.pool(node.pool).freeGpus;
  return poolFree < request.gpus ? kReasonPoolShort : std::string_view{};
}

}  // namespace

Result<PodPlacement> placePod(const SchedPod& pod, std::span<const SchedNode> nodes,
                              std::span<const NodeUsage> usage, const ClusterState& state,
                              const PlacementOptions& options) {
  if (nodes.size() != state.nodeCount()) {
    return makeError(kc::errc::kInvalid, "placePod: " + std::to_string(nodes.size()) +
                                             " nodes but the pool model holds " +
                                             std::to_string(state.nodeCount()));
  }
  const std::int64_t gpus = gpuRequest(pod);
  if (gpus < 0 || gpus > std::numeric_limits<std::uint32_t>::max()) {
    return makeError(kc::errc::kInvalid,
                     "placePod: GPU request " + std::to_string(gpus) + " out of range");
  }
  FilterOptions filter = options.filter;
  filter.fit.ignoredResources.emplace(kGpuResource);
  // InterPodAffinity's and PodTopologySpread's counts over the cluster, once per decision
  // (nothing for a pod that uses neither while no placed pod has required anti-affinity).
  PreparedFilters prepared;
  if (!filter.prepared) {
    prepareFilters(pod, nodes, filter, prepared);
  }
  const PodRequest request{0, 0, static_cast<std::uint32_t>(gpus)};
  const NodePolicy policy =
      options.policy.compare != nullptr ? options.policy : *findNodePolicy(kDefaultNodePolicy);
  // Eq. 1 first, the kube filters only on the nodes that would win: the same winner as
  // filtering every node first (selectNodeAdmitted), at a fraction of the cost.
  if (usage.size() != nodes.size()) {
    return makeError(kc::errc::kInvalid, "placePod: " + std::to_string(nodes.size()) +
                                             " nodes but " + std::to_string(usage.size()) +
                                             " usage entries");
  }
  const Resources podRequest = podRequests(pod);
  auto fast = selectNodeAdmitted(
      state, request, pod.gpuModels, policy, options.mode,
      [&](NodeIndex n) { return filterNode(pod, podRequest, nodes[n], usage[n], filter).empty(); });
  if (fast) {
    return PodPlacement{
        .node = fast->node, .deficit = fast->deficit, .gpus = request.gpus, .score = fast->score};
  }
  if (fast.error().code != kc::errc::kUnschedulable) {
    return fast.error();
  }
  // Nothing fits: the full pass, for kube-scheduler's message with every node's reason.
  auto passed = filterNodes(pod, nodes, usage, filter);
  if (!passed) {
    return passed.error();
  }
  if (passed->feasible.empty()) {
    return makeError(kc::errc::kUnschedulable, passed->message);
  }
  std::vector<NodeIndex> candidates(passed->feasible.begin(), passed->feasible.end());
  auto choice =
      selectNodeForModelsAmong(state, request, pod.gpuModels, policy, options.mode, candidates);
  if (!choice) {
    if (choice.error().code != kc::errc::kUnschedulable) {
      return choice.error();
    }
    // Every survivor failed the pool filter: say why, beside the kube filters' reasons.
    std::vector<RejectedNode> rejected = std::move(passed->rejected);
    ModelFreeGpus free;
    const bool constrained = !pod.gpuModels.acceptsAny();
    if (constrained) {
      free = countFreeGpus(state, pod.gpuModels);
    }
    for (NodeIndex n : candidates) {
      std::string_view why =
          poolReason(state, n, request, constrained ? &free : nullptr, options.mode);
      std::string text(why.empty() ? kReasonPoolShort : why);
      if (constrained) {
        text += " (models " + pod.gpuModels.toString(kGpuModelsAnnotationSeparator) + ")";
      }
      rejected.push_back(RejectedNode{n, {std::move(text)}});
    }
    return makeError(kc::errc::kUnschedulable, unschedulableMessage(nodes.size(), rejected));
  }
  return PodPlacement{.node = choice->node,
                      .deficit = choice->deficit,
                      .gpus = request.gpus,
                      .score = choice->score};
}

}  // namespace kc::alloc
