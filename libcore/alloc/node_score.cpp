#include "libcore/alloc/node_score.hpp"

#include <array>
#include <string>
#include <utility>
#include <vector>

namespace kc::alloc {
namespace {

int threeWay(std::uint64_t a, std::uint64_t b) {
  return a < b ? -1 : (a > b ? 1 : 0);
}

bool enough(const NodeState& n, std::uint32_t req) {
  return n.freeGpus >= req;
}

// Nodes that need no move come first.
int sufficientFirst(const NodeState& a, const NodeState& b, std::uint32_t req) {
  const bool ea = enough(a, req);
  const bool eb = enough(b, req);
  if (ea != eb) {
    return ea ? -1 : 1;
  }
  return 0;
}

// Best-fit half of Eq. 1 between two nodes that both have enough: a higher req/avail wins.
// req > 0: smaller avail. req == 0: the score is 100 at avail == 0 and 0 for every other avail.
int bestFit(const NodeState& a, const NodeState& b, std::uint32_t req) {
  if (req == 0) {
    return threeWay(a.freeGpus == 0 ? 0 : 1, b.freeGpus == 0 ? 0 : 1);
  }
  return threeWay(a.freeGpus, b.freeGpus);
}

// Least-demand half between two nodes that both lack GPUs: a higher avail - req wins.
int leastDemand(const NodeState& a, const NodeState& b) {
  return threeWay(b.freeGpus, a.freeGpus);
}

}  // namespace

std::int64_t eq1Score(std::uint32_t req, std::uint32_t avail) {
  if (avail == req) {
    return 100;
  }
  if (avail > req) {
    return static_cast<std::int64_t>(std::uint64_t{req} * 100 / avail);
  }
  return static_cast<std::int64_t>(avail) - static_cast<std::int64_t>(req);
}

int Eq1NodePolicy::compare(const NodeState& a, const NodeState& b, std::uint32_t req) {
  if (int c = sufficientFirst(a, b, req); c != 0) {
    return c;
  }
  return enough(a, req) ? bestFit(a, b, req) : leastDemand(a, b);
}

int BestFitNodePolicy::compare(const NodeState& a, const NodeState& b, std::uint32_t req) {
  if (int c = sufficientFirst(a, b, req); c != 0) {
    return c;
  }
  return enough(a, req) ? bestFit(a, b, req) : 0;
}

int LeastDemandNodePolicy::compare(const NodeState& a, const NodeState& b, std::uint32_t req) {
  if (enough(a, req) || enough(b, req)) {
    return sufficientFirst(a, b, req);  // deficit 0 beats any deficit; two zeros tie
  }
  return leastDemand(a, b);
}

int FirstFeasibleNodePolicy::compare(const NodeState&, const NodeState&, std::uint32_t) {
  return 0;
}

std::string_view toString(NodeFilterReason reason) {
  switch (reason) {
    case NodeFilterReason::Feasible:
      return "feasible";
    case NodeFilterReason::Cordoned:
      return "cordoned";
    case NodeFilterReason::InsufficientCpu:
      return "insufficient cpu";
    case NodeFilterReason::InsufficientMemory:
      return "insufficient memory";
    case NodeFilterReason::NoPool:
      return "no GPU pool";
    case NodeFilterReason::PoolShort:
      return "pool lacks free GPUs";
    case NodeFilterReason::NodeShort:
      return "node lacks free GPUs";
  }
  return "unknown";
}

namespace {

// Step 1 for one node whose free GPUs are `nodeFree` (attached to it) and `poolFree()` (in its
// pool, the node's included; read only when the node itself lacks GPUs, as that is rare).
template <typename PoolFree>
NodeFilterReason filterWith(const NodeState& node, const PodRequest& pod, Composability mode,
                            std::uint32_t nodeFree, PoolFree poolFree) {
  if (!node.schedulable) {
    return NodeFilterReason::Cordoned;
  }
  if (pod.cpuMilli > node.cpuMilliFree()) {
    return NodeFilterReason::InsufficientCpu;
  }
  if (pod.memoryMiB > node.memoryMiBFree()) {
    return NodeFilterReason::InsufficientMemory;
  }
  if (pod.gpus == 0 || nodeFree >= pod.gpus) {
    return NodeFilterReason::Feasible;
  }
  if (mode == Composability::Preconfigured) {
    return NodeFilterReason::NodeShort;
  }
  if (node.pool == kNoPool) {
    return NodeFilterReason::NoPool;
  }
  // The pool's free GPUs include the node's own: candidates elsewhere = pool - node >= deficit.
  if (poolFree() < pod.gpus) {
    return NodeFilterReason::PoolShort;
  }
  return NodeFilterReason::Feasible;
}

}  // namespace

NodeFilterReason filterNode(const ClusterState& state, NodeIndex n, const PodRequest& pod,
                            Composability mode) {
  const NodeState& node = state.node(n);
  return filterWith(node, pod, mode, node.freeGpus, [&] { return state.pool(node.pool).freeGpus; });
}

namespace {

// The aggregates of ClusterState as they are: what every unconstrained pod sees.
struct PlainView {
  const ClusterState& state;
  const NodeState& node(NodeIndex n) const { return state.node(n); }
  std::uint32_t poolFree(PoolIndex p) const { return p == kNoPool ? 0 : state.pool(p).freeGpus; }
};

// The cluster as a pod accepting only some GPU models sees it: free GPUs counted over the
// accepted models only (nodes copied with freeGpus replaced, so the policies compare them
// unchanged).
struct ModelView {
  std::vector<NodeState> nodes;
  std::vector<std::uint32_t> pools;
  const NodeState& node(NodeIndex n) const { return nodes[n]; }
  std::uint32_t poolFree(PoolIndex p) const { return p == kNoPool ? 0 : pools[p]; }
};

// The one selection loop (step 1-3 above), over the nodes `nodeAt(0..count-1)` as `view`
// shows them.
// `admit(n)` is asked only of a node that passes the filter and would become the best so far
// (always true for the plain selections): the winner is the best node that passes both, since
// the order (policy, then name) is total and a node that cannot beat the best so far is never
// the answer.
template <typename View, typename NodeAt, typename Admit>
Result<NodeChoice> selectOver(const View& view, const PodRequest& pod, const NodePolicy& policy,
                              Composability mode, NodeIndex count, NodeAt nodeAt, Admit admit) {
  constexpr std::size_t kReasons = 7;
  std::array<std::uint64_t, kReasons> filtered{};
  const NodeState* best = nullptr;
  NodeIndex bestIndex = kNoNode;
  for (NodeIndex i = 0; i < count; ++i) {
    const NodeIndex n = nodeAt(i);
    const NodeState& node = view.node(n);
    const NodeFilterReason reason =
        filterWith(node, pod, mode, node.freeGpus, [&] { return view.poolFree(node.pool); });
    if (reason != NodeFilterReason::Feasible) {
      ++filtered[static_cast<std::size_t>(reason)];
      continue;
    }
    if (best != nullptr) {
      const int c = policy.compare(node, *best, pod.gpus);
      if (!(c < 0 || (c == 0 && node.name < best->name))) {
        continue;
      }
    }
    if (!admit(n)) {
      continue;
    }
    best = &node;
    bestIndex = n;
  }
  if (best == nullptr) {
    std::string message = "no node fits the pod (" + std::to_string(pod.cpuMilli) + " mCPU, " +
                          std::to_string(pod.memoryMiB) + " MiB, " + std::to_string(pod.gpus) +
                          " GPUs) among " + std::to_string(count) + " nodes";
    for (std::size_t r = 1; r < kReasons; ++r) {
      if (filtered[r] != 0) {
        message += "; " + std::to_string(filtered[r]) + " " +
                   std::string(toString(static_cast<NodeFilterReason>(r)));
      }
    }
    return makeError(kc::errc::kUnschedulable, message);
  }
  const std::uint32_t avail = best->freeGpus;
  return NodeChoice{.node = bestIndex,
                    .deficit = pod.gpus > avail ? pod.gpus - avail : 0,
                    .score = eq1Score(pod.gpus, avail)};
}

}  // namespace

Result<NodeChoice> selectNode(const ClusterState& state, const PodRequest& pod,
                              const NodePolicy& policy, Composability mode) {
  return selectOver(
      PlainView{state}, pod, policy, mode, static_cast<NodeIndex>(state.nodeCount()),
      [](NodeIndex i) { return i; }, [](NodeIndex) { return true; });
}

Result<NodeChoice> selectNodeAmong(const ClusterState& state, const PodRequest& pod,
                                   const NodePolicy& policy, Composability mode,
                                   std::span<const NodeIndex> candidates) {
  return selectOver(
      PlainView{state}, pod, policy, mode, static_cast<NodeIndex>(candidates.size()),
      [&](NodeIndex i) { return candidates[i]; }, [](NodeIndex) { return true; });
}

ModelFreeGpus countFreeGpus(const ClusterState& state, const GpuModelFilter& models) {
  ModelFreeGpus out;
  out.node.assign(state.nodeCount(), 0);
  out.pool.assign(state.poolCount(), 0);
  for (GpuIndex g = 0; g < state.gpuCount(); ++g) {
    const GpuState& gpu = state.gpu(g);
    if (!gpu.free() || !models.accepts(gpu.model)) {
      continue;
    }
    ++out.pool[gpu.pool];
    if (gpu.attached()) {
      ++out.node[gpu.node];
    }
  }
  return out;
}

Result<NodeChoice> selectNodeForModels(const ClusterState& state, const PodRequest& pod,
                                       const GpuModelFilter& models, const NodePolicy& policy,
                                       Composability mode) {
  if (models.acceptsAny() || pod.gpus == 0) {
    return selectNode(state, pod, policy, mode);
  }
  ModelFreeGpus free = countFreeGpus(state, models);
  ModelView view;
  view.nodes.reserve(state.nodeCount());
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    view.nodes.push_back(state.node(n));
    view.nodes.back().freeGpus = free.node[n];
  }
  view.pools = std::move(free.pool);
  auto choice = selectOver(
      view, pod, policy, mode, static_cast<NodeIndex>(state.nodeCount()),
      [](NodeIndex i) { return i; }, [](NodeIndex) { return true; });
  if (!choice) {
    return makeError(choice.error().code, choice.error().message + " (accepting only GPU models " +
                                              models.toString(kGpuModelsAnnotationSeparator) + ")");
  }
  return choice;
}

Result<NodeChoice> selectNodeForModelsAmong(const ClusterState& state, const PodRequest& pod,
                                            const GpuModelFilter& models, const NodePolicy& policy,
                                            Composability mode,
                                            std::span<const NodeIndex> candidates) {
  if (models.acceptsAny() || pod.gpus == 0) {
    return selectNodeAmong(state, pod, policy, mode, candidates);
  }
  ModelFreeGpus free = countFreeGpus(state, models);
  // Only the candidates are copied (with their model-counted free GPUs); the view maps a
  // candidate's position to its copy.
  ModelView view;
  view.nodes.reserve(candidates.size());
  for (NodeIndex n : candidates) {
    view.nodes.push_back(state.node(n));
    view.nodes.back().freeGpus = free.node[n];
  }
  view.pools = std::move(free.pool);
  auto choice = selectOver(
      view, pod, policy, mode, static_cast<NodeIndex>(candidates.size()),
      [](NodeIndex i) { return i; }, [](NodeIndex) { return true; });
  if (!choice) {
    return makeError(choice.error().code, choice.error().message + " (accepting only GPU models " +
                                              models.toString(kGpuModelsAnnotationSeparator) + ")");
  }
  choice->node = candidates[choice->node];
  return choice;
}

Result<NodeChoice> selectNodeAdmitted(const ClusterState& state, const PodRequest& pod,
                                      const GpuModelFilter& models, const NodePolicy& policy,
                                      Composability mode,
                                      const std::function<bool(NodeIndex)>& admit) {
  const auto all = static_cast<NodeIndex>(state.nodeCount());
  if (models.acceptsAny() || pod.gpus == 0) {
    return selectOver(
        PlainView{state}, pod, policy, mode, all, [](NodeIndex i) { return i; },
        [&](NodeIndex n) { return admit(n); });
  }
  ModelFreeGpus free = countFreeGpus(state, models);
  ModelView view;
  view.nodes.reserve(state.nodeCount());
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    view.nodes.push_back(state.node(n));
    view.nodes.back().freeGpus = free.node[n];
  }
  view.pools = std::move(free.pool);
  return selectOver(
      view, pod, policy, mode, all, [](NodeIndex i) { return i; },
      [&](NodeIndex n) { return admit(n); });
}

}  // namespace kc::alloc
