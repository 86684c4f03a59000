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
std::vector<std::size_t> planOrder(std::span<const GangMember> members) {
  std::vector<std::size_t> order(members.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return members[a].gpus > members[b].gpus; });
  return order;
}

bool needsPlacedPods(std::span<const SchedPod* const> members) {
  return std::any_of(members.begin(), members.end(), [](const SchedPod* p) {
    return !p->hostPorts.empty() || p->podAffinity != nullptr || p->topologySpread != nullptr;
  });
}

// Member k's GPUs onto its node in `state`: `deficit` chosen by the policy moved there, then
// `gpus` free accepted GPUs of the node allocated (recorded in `at`). Appends the moves.
Status applyGpus(ClusterState& state, const GangMember& member, GangMemberPlacement& at,
                 const GangOptions& options, SplitMix64* rng, std::vector<GangMove>& moves) {
  static const GpuModelFilter kAny{};
  const GpuModelFilter& models = member.models != nullptr ? *member.models : kAny;
  const NodeIndex node = at.node;
  if (at.deficit > 0) {
    auto chosen = chooseGpus(state, node, at.deficit, options.gpuPolicy, rng, models);
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
      moves.push_back(GangMove{.gpu = g, .from = from, .to = node, .member = at.member});
    }
  }
  for (GpuIndex g : state.nodeGpus(node)) {  // allocating moves no GPU between nodes
    if (at.allocated.size() == at.gpus) {
      break;
    }
    if (state.gpu(g).free() && models.accepts(state.gpu(g).model)) {
      at.allocated.push_back(g);
    }
  }
  if (at.allocated.size() < at.gpus) {
    return makeError(kc::errc::kInternal, "gang plan: node " + state.node(node).name + " has " +
                                              std::to_string(at.allocated.size()) + " of the " +
                                              std::to_string(at.gpus) + " GPUs placed there");
  }
  for (GpuIndex g : at.allocated) {
    if (auto s = state.allocateGpu(g); !s) {
      return s;
    }
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

Result<GangPlan> planGangWith(std::span<const GangMember> members, GangSite& site,
                              ClusterState& state, const GangOptions& options, SplitMix64* rng) {
  GangPlan plan;
  plan.placements.resize(members.size());
  for (std::size_t k : planOrder(members)) {
    auto choice = site.chooseNode(k, state);
    if (!choice) {
      return choice.error();
    }
    GangMemberPlacement& at = plan.placements[k];
    at = GangMemberPlacement{
        .member = k, .node = choice->node, .gpus = members[k].gpus, .deficit = choice->deficit};
    if (auto s = applyGpus(state, members[k], at, options, rng, plan.moves); !s) {
      return s.error();
    }
    if (auto s = site.placed(k, at.node, state); !s) {
      return s.error();
    }
  }
  if (options.timeline) {
    if (auto s = scheduleGangMoves(state, options, plan); !s) {
      return s.error();
    }
  }
  return plan;
}

namespace {

// kubecomp-sched's members: each placed by placePod (kube's filters, then Eq. 1) and added to the
// node usage and, where host ports, pod (anti-)affinity or spread look at the pods on a node, to
// a copy of the placed pods, so the members see each other.
class PlacePodSite final : public GangSite {
 public:
  PlacePodSite(std::span<const SchedPod* const> members, std::span<const SchedNode> nodes,
               std::vector<NodeUsage>& usage, const PlacementOptions& placement)
      : members_(members), nodes_(nodes), usage_(usage), placement_(placement) {
    if (needsPlacedPods(members)) {
      placed_.emplace(placement.filter.placed != nullptr ? *placement.filter.placed : PlacedPods{});
      placement_.filter.placed = &*placed_;
    }
  }

  Result<NodeChoice> chooseNode(std::size_t k, const ClusterState& state) override {
    const SchedPod& pod = *members_[k];
    auto at = placePod(pod, nodes_, usage_, state, placement_);
    if (!at) {
      if (at.error().code != kc::errc::kUnschedulable) {
        return at.error();
      }
      return makeError(
          kc::errc::kUnschedulable,
          "gang member " + podName(pod) + " has no place beside the others: " + at.error().message);
    }
    return NodeChoice{
        .node = static_cast<NodeIndex>(at->node), .deficit = at->deficit, .score = at->score};
  }

  Status placed(std::size_t k, NodeIndex node, ClusterState&) override {
    const SchedPod& pod = *members_[k];
    addPodUsage(usage_[node], podRequests(pod));
    if (placed_) {
      placed_->place("gang/" + podName(pod), nodes_[node].name, pod);
    }
    return okStatus();
  }

 private:
  std::span<const SchedPod* const> members_;
  std::span<const SchedNode> nodes_;
  std::vector<NodeUsage>& usage_;
  PlacementOptions placement_;
  std::optional<PlacedPods> placed_;
};

}  // namespace

Result<GangPlan> planGangOn(std::span<const SchedPod* const> members,
                            std::span<const SchedNode> nodes, std::vector<NodeUsage>& usage,
                            ClusterState& state, const GangOptions& options) {
  if (auto never = gangNeverFits(members, state, options.placement.mode)) {
    return makeError(kc::errc::kInsufficient, *never);
  }
  std::vector<GangMember> need;
  need.reserve(members.size());
  for (const SchedPod* p : members) {
    const std::int64_t gpus = gpuRequest(*p);
    if (gpus < 0 || gpus > std::numeric_limits<std::uint32_t>::max()) {
      return makeError(kc::errc::kInvalid, "gang member " + podName(*p) + " asks " +
                                               std::to_string(gpus) + " kubecomp.io/gpu");
    }
    need.push_back(GangMember{static_cast<std::uint32_t>(gpus), &p->gpuModels});
  }
  PlacePodSite site(members, nodes, usage, options.placement);
  return planGangWith(need, site, state, options);
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
