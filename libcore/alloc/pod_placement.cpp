#include "libcore/alloc/pod_placement.hpp"

#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pod_preference.hpp"
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

// The pool filter of step 2 for a node whose free GPUs (of the accepted models) are
// node.freeGpus attached and `poolFree` in its pool: node_score.hpp's filter, CPU and memory
// left to the kube filters.
bool poolAdmits(const NodeState& node, std::uint32_t gpus, std::uint32_t poolFree,
                Composability mode) {
  if (!node.schedulable) {
    return false;
  }
  if (gpus == 0 || node.freeGpus >= gpus) {
    return true;
  }
  return mode == Composability::Composable && node.pool != kNoPool && poolFree >= gpus;
}

// The choice when the decision has preference inputs: among `candidates` (they passed the kube
// filters) that pass the pool filter, the fewest GPUs to move, then the highest preference
// score, then the policy, then the name. Error "unschedulable" when the pool filter takes all.
Result<NodeChoice> rankWithPreferences(const SchedPod& pod, std::span<const SchedNode> nodes,
                                       const ClusterState& state, const PodRequest& request,
                                       const NodePolicy& policy, Composability mode,
                                       const FilterOptions& filter,
                                       std::span<const NodeIndex> candidates) {
  const bool constrained = !pod.gpuModels.acceptsAny() && request.gpus > 0;
  ModelFreeGpus free;
  if (constrained) {
    free = countFreeGpus(state, pod.gpuModels);
  }
  std::vector<NodeState> views;  // the candidates as the policy compares them
  std::vector<std::size_t> admitted;
  for (NodeIndex n : candidates) {
    NodeState view = state.node(n);
    const std::uint32_t poolFree =
        view.pool == kNoPool
            ? 0
            : (constrained ? free.pool[view.pool] : state.pool(view.pool).freeGpus);
    if (constrained) {
      view.freeGpus = free.node[n];
    }
    if (poolAdmits(view, request.gpus, poolFree, mode)) {
      views.push_back(std::move(view));
      admitted.push_back(n);
    }
  }
  if (admitted.empty()) {
    return makeError(kc::errc::kUnschedulable, "no candidate passes the pool filter");
  }
  const PreferenceScores scores =
      scorePreferences(pod, nodes, admitted, filter.placed, filter.namespaces);
  auto deficit = [&](std::size_t i) {
    return request.gpus > views[i].freeGpus ? request.gpus - views[i].freeGpus : 0;
  };
  std::size_t best = 0;
  for (std::size_t i = 1; i < admitted.size(); ++i) {
    if (deficit(i) != deficit(best)) {
      best = deficit(i) < deficit(best) ? i : best;
      continue;
    }
    if (scores.total[i] != scores.total[best]) {
      best = scores.total[i] > scores.total[best] ? i : best;
      continue;
    }
    const int c = policy.compare(views[i], views[best], request.gpus);
    if (c < 0 || (c == 0 && views[i].name < views[best].name)) {
      best = i;
    }
  }
  return NodeChoice{.node = static_cast<NodeIndex>(admitted[best]),
                    .deficit = deficit(best),
                    .score = eq1Score(request.gpus, views[best].freeGpus)};
}

using ChooseAmong = std::function<Result<NodeChoice>(std::span<const NodeIndex>)>;

// The kube filters over every node, then `choose` among the survivors; when nothing is left,
// kube-scheduler's FitError with the pool's reasons beside the filters'.
Result<PodPlacement> placeAfterFilters(const SchedPod& pod, std::span<const SchedNode> nodes,
                                       std::span<const NodeUsage> usage, const ClusterState& state,
                                       const FilterOptions& filter, const PodRequest& request,
                                       Composability mode, const ChooseAmong& choose) {
  auto passed = filterNodes(pod, nodes, usage, filter);
  if (!passed) {
    return passed.error();
  }
  if (passed->feasible.empty()) {
    return makeError(kc::errc::kUnschedulable, passed->message);
  }
  std::vector<NodeIndex> candidates(passed->feasible.begin(), passed->feasible.end());
  auto choice = choose(candidates);
  if (choice) {
    return PodPlacement{.node = choice->node,
                        .deficit = choice->deficit,
                        .gpus = request.gpus,
                        .score = choice->score};
  }
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
    std::string_view why = poolReason(state, n, request, constrained ? &free : nullptr, mode);
    std::string text(why.empty() ? kReasonPoolShort : why);
    if (constrained) {
      text += " (models " + pod.gpuModels.toString(kGpuModelsAnnotationSeparator) + ")";
    }
    rejected.push_back(RejectedNode{n, {std::move(text)}});
  }
  return makeError(kc::errc::kUnschedulable, unschedulableMessage(nodes.size(), rejected));
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
  if (usage.size() != nodes.size()) {
    return makeError(kc::errc::kInvalid, "placePod: " + std::to_string(nodes.size()) +
                                             " nodes but " + std::to_string(usage.size()) +
                                             " usage entries");
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
  if (hasPreferenceInputs(pod, nodes, filter.placed, filter.preferNoScheduleTaints)) {
    // Preferences rank every node that passes: no lazy shortcut.
    return placeAfterFilters(pod, nodes, usage, state, filter, request, options.mode,
                             [&](std::span<const NodeIndex> candidates) {
                               return rankWithPreferences(pod, nodes, state, request, policy,
                                                          options.mode, filter, candidates);
                             });
  }
  // Eq. 1 first, the kube filters only on the nodes that would win: the same winner as
  // filtering every node first (selectNodeAdmitted), at a fraction of the cost.
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
  return placeAfterFilters(pod, nodes, usage, state, filter, request, options.mode,
                           [&](std::span<const NodeIndex> candidates) {
                             return selectNodeForModelsAmong(state, request, pod.gpuModels, policy,
                                                             options.mode, candidates);
                           });
}

}  // namespace kc::alloc
