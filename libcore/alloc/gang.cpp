#include "libcore/alloc/gang.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <utility>

#include "libcore/alloc/placed_pods.hpp"

namespace kc::alloc {
namespace {

std::string podName(const SchedPod& p) {
  std::string out = p.ns;
  out += '/';
  out += p.name;
  return out;
}

// The members, largest GPU request first, ties in the given order.
std::vector<std::size_t> planOrder(std::span<const SchedPod* const> members) {
  std::vector<std::size_t> order(members.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return gpuRequest(*members[a]) > gpuRequest(*members[b]);
  });
  return order;
}

bool needsPlacedPods(std::span<const SchedPod* const> members) {
  return std::any_of(members.begin(), members.end(), [](const SchedPod* p) {
    return !p->hostPorts.empty() || p->podAffinity != nullptr || p->topologySpread != nullptr;
  });
}

// The member's GPUs onto its node in `state`: `deficit` chosen by the policy moved there, then
// `gpus` free accepted GPUs of the node allocated. Appends the moves.
Status applyGpus(ClusterState& state, NodeIndex node, const SchedPod& pod, std::uint32_t gpus,
                 std::uint32_t deficit, const GangOptions& options, std::vector<GangMove>& moves) {
  if (deficit > 0) {
    auto chosen = chooseGpus(state, node, deficit, options.gpuPolicy, nullptr, pod.gpuModels);
    if (!chosen) {
      return chosen.error();
    }
    for (GpuIndex g : *chosen) {
      const NodeIndex from = state.gpu(g).node;
      if (from != kNoNode) {
        if (auto s = state.detachGpu(g); !s) {
          return s;
        }
      }
      if (auto s = state.attachGpu(g, node); !s) {
        return s;
      }
      moves.push_back(GangMove{.gpu = g, .from = from, .to = node});
    }
  }
  std::uint32_t taken = 0;
  for (GpuIndex g : state.nodeGpus(node)) {  // allocating moves no GPU between nodes
    if (taken == gpus) {
      break;
    }
    if (state.gpu(g).free() && pod.gpuModels.accepts(state.gpu(g).model)) {
      if (auto s = state.allocateGpu(g); !s) {
        return s;
      }
      ++taken;
    }
  }
  if (taken < gpus) {
    return makeError(kc::errc::kInternal, "gang plan: node " + state.node(node).name + " has " +
                                              std::to_string(taken) + " of the " +
                                              std::to_string(gpus) + " GPUs placed there");
  }
  return okStatus();
}

// The moves' slots: each pool's moves scheduled on its own fabric (chassis from the GPU id),
// all pools at once. Fills start/end, ready and serialReady.
Status scheduleGangMoves(const ClusterState& state, const GangOptions& options, GangPlan& plan) {
  std::vector<PoolIndex> pools;
  for (const GangMove& m : plan.moves) {
    pools.push_back(state.gpu(m.gpu).pool);
  }
  std::sort(pools.begin(), pools.end());
  pools.erase(std::unique(pools.begin(), pools.end()), pools.end());
  plan.ready = 0;
  plan.serialReady = 0;
  for (PoolIndex p : pools) {
    std::vector<std::size_t> idx;
    std::vector<std::string> chassis;
    for (std::size_t i = 0; i < plan.moves.size(); ++i) {
      if (state.gpu(plan.moves[i].gpu).pool == p) {
        idx.push_back(i);
        chassis.emplace_back(chassisOfGpu(state.gpu(plan.moves[i].gpu).id));
      }
    }
    auto slots = scheduleMoves(chassis, 0, options.moveTime, options.concurrency, {});
    if (!slots) {
      return slots.error();
    }
    for (std::size_t k = 0; k < idx.size(); ++k) {
      plan.moves[idx[k]].start = (*slots)[k].start;
      plan.moves[idx[k]].end = (*slots)[k].end;
      plan.ready = std::max(plan.ready, (*slots)[k].end);
    }
    // One pool's fabric, serially: its moves back to back. Pools are independent fabrics.
    plan.serialReady =
        std::max(plan.serialReady, static_cast<std::int64_t>(idx.size()) * options.moveTime);
  }
  return okStatus();
}

}  // namespace

Result<GangPlan> planGangOn(std::span<const SchedPod* const> members,
                            std::span<const SchedNode> nodes, std::vector<NodeUsage>& usage,
                            ClusterState& state, const GangOptions& options) {
  if (auto never = gangNeverFits(members, state, options.placement.mode)) {
    return makeError(kc::errc::kInsufficient, *never);
  }
  PlacementOptions placement = options.placement;
  // The members see each other where host ports, pod (anti-)affinity or spread look at the
  // pods on a node: a copy of the placed pods with the members added as they are placed.
  std::optional<PlacedPods> placed;
  if (needsPlacedPods(members)) {
    placed.emplace(placement.filter.placed != nullptr ? *placement.filter.placed : PlacedPods{});
    placement.filter.placed = &*placed;
  }
  GangPlan plan;
  plan.placements.resize(members.size());
  for (std::size_t k : planOrder(members)) {
    const SchedPod& pod = *members[k];
    auto at = placePod(pod, nodes, usage, state, placement);
    if (!at) {
      if (at.error().code != kc::errc::kUnschedulable) {
        return at.error();
      }
      return makeError(
          kc::errc::kUnschedulable,
          "gang member " + podName(pod) + " has no place beside the others: " + at.error().message);
    }
    const auto node = static_cast<NodeIndex>(at->node);
    if (auto s = applyGpus(state, node, pod, at->gpus, at->deficit, options, plan.moves); !s) {
      return s.error();
    }
    addPodUsage(usage[at->node], podRequests(pod));
    if (placed) {
      placed->place("gang/" + podName(pod), nodes[at->node].name, pod);
    }
    plan.placements[k] =
        GangMemberPlacement{.member = k, .node = node, .gpus = at->gpus, .deficit = at->deficit};
  }
  if (auto s = scheduleGangMoves(state, options, plan); !s) {
    return s.error();
  }
  return plan;
}

Result<GangPlan> GangPlanner::plan(std::span<const SchedPod* const> members,
                                   std::span<const SchedNode> nodes,
                                   std::span<const NodeUsage> usage, const ClusterState& state,
                                   const GangOptions& options) {
  if (usage.size() != nodes.size() || nodes.size() != state.nodeCount()) {
    return makeError(kc::errc::kInvalid, "gang plan: " + std::to_string(nodes.size()) + " nodes, " +
                                             std::to_string(usage.size()) + " usage entries, " +
                                             std::to_string(state.nodeCount()) + " in the model");
  }
  work_.assignFrom(state);
  use_.assign(usage.begin(), usage.end());
  return planGangOn(members, nodes, use_, work_, options);
}

std::optional<std::string> gangNeverFits(std::span<const SchedPod* const> members,
                                         const ClusterState& state, Composability mode) {
  // Healthy GPUs per pool (composable) or per node (preconfigured), of the models a member
  // accepts; the members' filters differ, so counted per member (gangs are small).
  const bool composable = mode == Composability::Composable;
  const std::size_t groups = composable ? state.poolCount() : state.nodeCount();
  std::uint64_t total = 0;
  std::uint64_t asked = 0;
  bool anyConstrained = false;
  std::vector<std::uint64_t> healthy(groups);
  for (const SchedPod* m : members) {
    const std::int64_t want = gpuRequest(*m);
    if (want <= 0) {
      continue;
    }
    anyConstrained = anyConstrained || !m->gpuModels.acceptsAny();
    std::fill(healthy.begin(), healthy.end(), 0);
    for (GpuIndex g = 0; g < state.gpuCount(); ++g) {
      const GpuState& gpu = state.gpu(g);
      if (!gpu.healthy || !m->gpuModels.accepts(gpu.model)) {
        continue;
      }
      if (composable && state.pool(gpu.pool).nodes > 0) {
        ++healthy[gpu.pool];
      } else if (!composable && gpu.attached()) {
        ++healthy[gpu.node];
      }
    }
    const std::uint64_t largest =
        groups == 0 ? 0 : *std::max_element(healthy.begin(), healthy.end());
    if (static_cast<std::uint64_t>(want) > largest) {
      std::string text =
          "gang member " + podName(*m) + " asks " + std::to_string(want) + " kubecomp.io/gpu";
      if (!m->gpuModels.acceptsAny()) {
        text += " (models " + m->gpuModels.toString(kGpuModelsAnnotationSeparator) + ")";
      }
      text += composable ? "; the largest GPU pool holds " : "; the largest node holds ";
      return text + std::to_string(largest) + " healthy";
    }
    asked += static_cast<std::uint64_t>(want);
    total = std::accumulate(healthy.begin(), healthy.end(), std::uint64_t{0});
  }
  // All members together; with model filters the per-member counts differ, and the bound is
  // then left to the members' own checks above.
  if (!anyConstrained && asked > total) {
    return "the gang's " + std::to_string(members.size()) + " pods ask " + std::to_string(asked) +
           " kubecomp.io/gpu in all; the cluster's " +
           (composable ? std::string("GPU pools hold ") : std::string("nodes hold ")) +
           std::to_string(total) + " healthy";
  }
  return std::nullopt;
}

std::vector<Result<GangPlan>> planGangsInOrder(std::span<const GangRequest> gangs,
                                               std::span<const SchedNode> nodes,
                                               std::span<const NodeUsage> usage,
                                               const ClusterState& state,
                                               const GangOptions& options) {
  std::vector<std::size_t> order(gangs.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return podBefore(gangs[a].order, gangs[b].order);
  });
  std::vector<Result<GangPlan>> out(gangs.size(),
                                    makeError(kc::errc::kInvalid, "gang plan: not planned"));
  if (usage.size() != nodes.size() || nodes.size() != state.nodeCount()) {
    return out;
  }
  ClusterState work = state;
  work.setJournaling(true);
  std::vector<NodeUsage> use(usage.begin(), usage.end());
  for (std::size_t i : order) {
    const std::size_t mark = work.journalSize();
    const std::vector<NodeUsage> saved = use;
    const GangRequest& g = gangs[i];
    out[i] = planGangOn(g.members, nodes, use, work, options);
    if (!out[i]) {
      // All or nothing: what the failed gang took goes back before the next gang is planned.
      work.rollbackTo(mark);
      use = saved;
    }
  }
  return out;
}

}  // namespace kc::alloc
