#include "libcore/alloc/idle_recompose.hpp"

#include <algorithm>
#include <string>

namespace kc::alloc {
namespace {

// Free GPUs of `pool` accepted by `models`, not on `target`, in donor order: unattached first,
// then by the free GPUs of their node (fewest first), node index, GPU index. `keep[n]` free GPUs
// of node n are left where they are.
std::vector<GpuIndex> donors(const ClusterState& state, PoolIndex pool, NodeIndex target,
                             const GpuModelFilter& models, const std::vector<std::uint32_t>& keep) {
  struct Candidate {
    std::uint32_t rank;  // 0 for unattached, else 1 + free GPUs of the node
    NodeIndex node;
    GpuIndex gpu;
  };
  std::vector<Candidate> all;
  std::vector<std::uint32_t> taken(state.nodeCount(), 0);
  for (GpuIndex g : state.poolGpus(pool)) {
    const GpuState& gpu = state.gpu(g);
    if (!gpu.free() || gpu.node == target || !models.accepts(gpu.model)) {
      continue;
    }
    if (!gpu.attached()) {
      all.push_back({0, kNoNode, g});
      continue;
    }
    all.push_back({1 + state.node(gpu.node).freeGpus, gpu.node, g});
  }
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.rank != b.rank) {
      return a.rank < b.rank;
    }
    if (a.node != b.node) {
      return a.node < b.node;
    }
    return a.gpu < b.gpu;
  });
  std::vector<GpuIndex> out;
  out.reserve(all.size());
  for (const Candidate& c : all) {
    if (c.node != kNoNode) {
      // A node gives away its free GPUs but the last keep[n].
      if (taken[c.node] + keep[c.node] >= state.node(c.node).freeGpus) {
        continue;
      }
      ++taken[c.node];
    }
    out.push_back(c.gpu);
  }
  return out;
}

// Usable (healthy, not draining) GPUs attached to `node`, free or in use.
std::uint32_t usableAttached(const ClusterState& state, NodeIndex node,
                             const GpuModelFilter& models) {
  std::uint32_t n = 0;
  for (GpuIndex g : state.nodeGpus(node)) {
    const GpuState& gpu = state.gpu(g);
    if (gpu.healthy && !gpu.draining && models.accepts(gpu.model)) {
      ++n;
    }
  }
  return n;
}

Result<std::vector<IdleMove>> planForHead(const ClusterState& state, const RecomposeInput& in,
                                          const PlacementRules& rules, std::int64_t now) {
  std::vector<IdleMove> plan;
  if (selectNodeFor(state, *in.head, in.headModels, rules)) {
    return plan;  // it fits now: the scheduler places it, every free GPU stays usable
  }
  auto r = reserveHead(state, in.running, in.fabric, *in.head, in.headModels, rules, now);
  if (!r) {
    if (r.error().code == kc::errc::kUnschedulable) {
      return plan;
    }
    return r.error();
  }
  const PoolIndex pool = state.node(r->node).pool;
  if (pool == kNoPool || r->gpusToMove == 0) {
    return plan;
  }
  // A move started now must land by the time the head's resources are free.
  std::int64_t lands = 0;
  if (__builtin_add_overflow(now, rules.moveTime, &lands) || lands > r->fitTime) {
    return plan;
  }
  // Never more than the GPUs the node still lacks (counting those in use there, which free up).
  const std::uint32_t attached = usableAttached(state, r->node, in.headModels);
  const std::uint32_t lacks = in.head->gpus > attached ? in.head->gpus - attached : 0;
  const std::uint32_t want = std::min(r->gpusToMove, lacks);
  const std::vector<std::uint32_t> keepNone(state.nodeCount(), 0);
  for (GpuIndex g : donors(state, pool, r->node, in.headModels, keepNone)) {
    if (plan.size() == want) {
      break;
    }
    plan.push_back(IdleMove{g, r->node});
  }
  return plan;
}

std::vector<IdleMove> planAhead(const ClusterState& state, const RecomposeInput& in) {
  std::vector<IdleMove> plan;
  const PodRequest* largest = nullptr;
  std::uint64_t singleCpu = 0;
  bool singles = false;
  for (const PodRequest& r : in.recent) {
    if (largest == nullptr || r.gpus > largest->gpus ||
        (r.gpus == largest->gpus && r.cpuMilli > largest->cpuMilli)) {
      largest = &r;
    }
    if (r.gpus == 1) {
      singles = true;
      singleCpu = std::max(singleCpu, r.cpuMilli);
    }
  }
  if (largest == nullptr || largest->gpus < 2) {
    return plan;
  }
  const std::uint32_t k = largest->gpus;
  // Keep singles near CPU-heavy nodes: a node with the CPU free for the most CPU-hungry recent
  // one-GPU request keeps its last free GPU.
  std::vector<std::uint32_t> keep(state.nodeCount(), 0);
  std::vector<NodeIndex> target(state.poolCount(), kNoNode);
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    const NodeState& node = state.node(n);
    if (!node.schedulable || node.pool == kNoPool) {
      continue;
    }
    if (singles && node.cpuMilliFree() >= singleCpu) {
      keep[n] = 1;
    }
    if (node.cpuMilliFree() < largest->cpuMilli || node.memoryMiBFree() < largest->memoryMiB) {
      continue;
    }
    NodeIndex& t = target[node.pool];
    if (t == kNoNode || node.freeGpus > state.node(t).freeGpus) {
      t = n;
    }
  }
  const GpuModelFilter any;
  for (PoolIndex p = 0; p < state.poolCount(); ++p) {
    const NodeIndex t = target[p];
    if (t == kNoNode || state.node(t).freeGpus >= k || state.pool(p).freeGpus < k) {
      continue;
    }
    const std::uint32_t want = k - state.node(t).freeGpus;
    std::vector<GpuIndex> from = donors(state, p, t, any, keep);
    if (from.size() < want) {
      continue;  // it could not be completed: do not half-prepare
    }
    for (std::uint32_t i = 0; i < want; ++i) {
      plan.push_back(IdleMove{from[i], t});
    }
  }
  return plan;
}

}  // namespace

Result<std::vector<IdleMove>> planIdleMoves(const ClusterState& state, const RecomposeInput& in,
                                            const PlacementRules& rules, std::int64_t now) {
  if (in.fabric.busyUntil.size() != state.poolCount()) {
    return makeError(kc::errc::kInvalid,
                     "fabric clock has " + std::to_string(in.fabric.busyUntil.size()) +
                         " pools, the cluster " + std::to_string(state.poolCount()));
  }
  for (const RunningPod& r : in.running) {
    if (r.node >= state.nodeCount()) {
      return makeError(kc::errc::kInvalid, "running pod on node " + std::to_string(r.node) +
                                               " of " + std::to_string(state.nodeCount()));
    }
  }
  if (rules.mode != Composability::Composable) {
    return std::vector<IdleMove>{};
  }
  if (in.head != nullptr) {
    return planForHead(state, in, rules, now);
  }
  if (!in.anticipate) {
    return std::vector<IdleMove>{};
  }
  return planAhead(state, in);
}

}  // namespace kc::alloc
