#include "libcore/alloc/preemption.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <tuple>
#include <utility>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/rt_filter.hpp"
#include "libcore/alloc/topology_spread.hpp"
#include "libcore/alloc/volume_binding.hpp"

namespace kc::alloc {
namespace {

// What one decision computes once: the filters' prepared state and, per pool, its free GPUs of
// the accepted models.
struct Context {
  FilterOptions filter{};
  PreparedFilters prepared{};
  std::vector<std::uint32_t> poolFree{};
  std::uint32_t gpus = 0;
  // Scratch reused from node to node (a decision tries every node).
  mutable std::vector<std::size_t> lower{};
  mutable std::vector<std::int32_t> allowed{};
  mutable std::vector<bool> violating{};
};

bool acceptedGpu(const GpuState& g, const GpuModelFilter& models) {
  return models.acceptsAny() || models.accepts(g.model);
}

Context makeContext(const SchedPod& pod, const PreemptionInput& in, const Resources& request) {
  Context c;
  c.filter = in.options.filter;
  c.filter.fit.ignoredResources.emplace(kGpuResource);
  if (!c.filter.prepared) {
    prepareFilters(pod, in.nodes, c.filter, c.prepared);
  }
  const std::int64_t gpus = request.scalarOr0(kGpuResource);
  c.gpus = static_cast<std::uint32_t>(
      std::clamp<std::int64_t>(gpus, 0, std::numeric_limits<std::uint32_t>::max()));
  if (c.gpus > 0 && in.state != nullptr) {
    c.poolFree.assign(in.state->poolCount(), 0);
    for (PoolIndex p = 0; p < in.state->poolCount(); ++p) {
      if (pod.gpuModels.acceptsAny()) {
        c.poolFree[p] = in.state->pool(p).freeGpus;
        continue;
      }
      for (GpuIndex g : in.state->poolGpus(p)) {
        const GpuState& gpu = in.state->gpu(g);
        c.poolFree[p] += gpu.free() && acceptedGpu(gpu, pod.gpuModels) ? 1 : 0;
      }
    }
  }
  return c;
}

// The GPUs the node can give the pod once `freed` GPUs of its victims are let go.
struct GpuRoom {
  std::uint32_t available = 0;  // free now: on the node, or in its pool (composable)
  std::uint32_t inUse = 0;      // accepted GPUs in use on the node (what victims can free)
  std::uint32_t owed = 0;       // the pool's GPUs held beyond its GPUs (PreemptionInput)
};

GpuRoom gpuRoom(const SchedPod& pod, const PreemptionInput& in, const Context& c, NodeIndex n) {
  GpuRoom room;
  if (c.gpus == 0 || in.state == nullptr) {
    return room;
  }
  std::uint32_t nodeFree = 0;
  for (GpuIndex g : in.state->nodeGpus(n)) {
    const GpuState& gpu = in.state->gpu(g);
    if (!acceptedGpu(gpu, pod.gpuModels) || !gpu.healthy || gpu.draining) {
      continue;
    }
    nodeFree += gpu.inUse ? 0 : 1;
    room.inUse += gpu.inUse ? 1 : 0;
  }
  const PoolIndex p = in.state->node(n).pool;
  room.owed = p != kNoPool && p < in.poolOwed.size() ? in.poolOwed[p] : 0;
  room.available = in.options.mode == Composability::Composable && p != kNoPool
                       ? std::max(nodeFree, c.poolFree[p])
                       : nodeFree;
  return room;
}

struct NodeTrial {
  const SchedPod& pod;
  const Resources& request;
  const PreemptionInput& in;
  const Context& c;
  std::size_t node;
  GpuRoom room;

  bool gpusFit(std::int64_t freedGpus) const {
    const std::int64_t gpus =
        static_cast<std::int64_t>(room.available) +
        std::min<std::int64_t>(freedGpus, static_cast<std::int64_t>(room.inUse)) -
        static_cast<std::int64_t>(room.owed);
    return gpus >= static_cast<std::int64_t>(c.gpus);
  }
  // Every filter, with all the lower-priority pods removed: the reasons of the first that
  // fails (the pool's GPUs come last, as in placePod), empty when the pod fits.
  FilterReasons fits(const NodeUsage& usage, std::int64_t freedGpus) const {
    FilterReasons why = filterNode(pod, request, in.nodes[node], usage, c.filter);
    if (why.empty() && !gpusFit(freedGpus)) {
      why.emplace_back(kReasonNodeShort);
    }
    return why;
  }
  // A reprieve changes only which pods' requests count: the filters that read the node's usage
  // (NodeResourcesFit, the hook) are asked again. The others read the node, the pod and the
  // placed pods, whose victims stay counted (see the header), so their answer stands.
  bool stillFits(const NodeUsage& usage, std::int64_t freedGpus) const {
    if (!gpusFit(freedGpus) ||
        !resourcesFitFilter(request, in.nodes[node], usage, c.filter.fit).empty()) {
      return false;
    }
    return !c.filter.rt || c.filter.rt(pod, request, in.nodes[node], usage).empty();
  }
};

// kube-scheduler's filterPodsWithPDBViolation over `order` (most important first): whether
// each pod's eviction would take one of its budgets below zero, counting down as it goes.
void pdbViolating(const std::vector<ResidentPod>& pods, const std::vector<std::size_t>& order,
                  std::span<const DisruptionBudget> budgets, std::vector<std::int32_t>& allowed,
                  std::vector<bool>& violating) {
  violating.assign(order.size(), false);
  if (budgets.empty()) {
    return;
  }
  allowed.clear();
  for (const DisruptionBudget& b : budgets) {
    allowed.push_back(b.disruptionsAllowed);
  }
  static const StringMap kNoLabels;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const ResidentPod& p = pods[order[k]];
    for (std::size_t b = 0; b < budgets.size(); ++b) {
      const DisruptionBudget& budget = budgets[b];
      if (budget.ns != p.ns || !budget.selector ||
          (budget.selector->matchLabels.empty() && budget.selector->matchExpressions.empty()) ||
          !matchesLabelSelector(*budget.selector, p.labels ? *p.labels : kNoLabels) ||
          budget.disruptedPods.contains(p.name)) {
        continue;
      }
      if (--allowed[b] < 0) {
        violating[k] = true;
      }
    }
  }
}

// `why` (when given) gets the node's status when there are no victims: kReasonNoVictims when
// no lower-priority pod runs there, else the reasons the pod still does not fit without them
// (kube-scheduler's SelectVictimsOnNode returns the filters' status then).
std::optional<NodeVictims> victimsWith(const SchedPod& pod, const Resources& request,
                                       const PreemptionInput& in, const Context& c,
                                       std::size_t node, FilterReasons* why = nullptr) {
  const std::vector<ResidentPod>& pods = in.running[node];
  std::vector<std::size_t>& lower = c.lower;
  lower.clear();
  for (std::size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].priority < pod.priority) {
      lower.push_back(i);
    }
  }
  if (lower.empty()) {
    if (why != nullptr) {
      *why = {std::string(kReasonNoVictims)};
    }
    return std::nullopt;
  }
  NodeUsage usage = in.usage[node];  // copied only for a node with someone to evict
  std::int64_t freed = 0;
  for (std::size_t i : lower) {
    removePodUsage(usage, *pods[i].request);
    freed += pods[i].request->scalarOr0(kGpuResource);
  }
  const NodeTrial trial{pod, request, in,
                        c,   node,    gpuRoom(pod, in, c, static_cast<NodeIndex>(node))};
  if (FilterReasons failed = trial.fits(usage, freed); !failed.empty()) {
    if (why != nullptr) {
      *why = std::move(failed);
    }
    return std::nullopt;
  }
  std::sort(lower.begin(), lower.end(),
            [&](std::size_t a, std::size_t b) { return moreImportant(pods[a], pods[b]); });
  pdbViolating(pods, lower, in.budgets, c.allowed, c.violating);
  const std::vector<bool>& violating = c.violating;
  NodeVictims out;
  out.node = node;
  auto reprieve = [&](std::size_t i, bool violates) {
    addPodUsage(usage, *pods[i].request);
    const std::int64_t g = pods[i].request->scalarOr0(kGpuResource);
    if (trial.stillFits(usage, freed - g)) {
      freed -= g;
      return;
    }
    removePodUsage(usage, *pods[i].request);
    out.victims.push_back(i);
    out.pdbViolations += violates ? 1 : 0;
  };
  for (bool pass : {true, false}) {
    for (std::size_t k = 0; k < lower.size(); ++k) {
      if (violating[k] == pass) {
        reprieve(lower[k], pass);
      }
    }
  }
  std::sort(out.victims.begin(), out.victims.end(),
            [&](std::size_t a, std::size_t b) { return moreImportant(pods[a], pods[b]); });
  return out;
}

// The order's key of one candidate: violations, highest priority, sum, count, -latest start.
using CandidateKey =
    std::tuple<std::int32_t, std::int64_t, std::int64_t, std::size_t, std::int64_t>;

CandidateKey candidateKey(const NodeVictims& v, std::span<const std::vector<ResidentPod>> running) {
  const std::vector<ResidentPod>& pods = running[v.node];
  if (v.victims.empty()) {
    return {v.pdbViolations, std::numeric_limits<std::int64_t>::min(), 0, 0,
            std::numeric_limits<std::int64_t>::min()};
  }
  const std::int32_t highest = pods[v.victims.front()].priority;
  std::int64_t sum = 0;
  std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i : v.victims) {
    // Shifted to be positive, as kube-scheduler sums them (a negative priority is allowed).
    sum += static_cast<std::int64_t>(pods[i].priority) + (std::int64_t{1} << 31);
    if (pods[i].priority == highest) {
      earliest = std::min(earliest, pods[i].started);
    }
  }
  return {v.pdbViolations, highest, sum, v.victims.size(), -earliest};
}

// kube-scheduler tries preemption only on the nodes whose filters failed with Unschedulable;
// one whose first failing filter said UnschedulableAndUnresolvable (no eviction changes that)
// is "not helpful": cordoned, another node name, an untolerated taint, node affinity, the
// VolumeBinding PreFilter and its volume conflicts, required pod affinity, a missing topology
// label; here also a GPU pod on a node wired to no GPU pool, and a node not real-time capable.
bool preemptionUnhelpful(const SchedPod& pod, const Resources& request, const PreemptionInput& in,
                         const Context& c, std::size_t n) {
  const SchedNode& node = in.nodes[n];
  if (!nodeUnschedulableFilter(pod, node).empty() || !nodeNameFilter(pod, node).empty() ||
      !taintTolerationFilter(pod, node).empty() || !nodeAffinityFilter(pod, node).empty()) {
    return true;
  }
  if (c.filter.volumeBinding != nullptr && !c.filter.volumeBinding->rejectAll.empty()) {
    return true;
  }
  if (c.gpus > 0 && in.state != nullptr &&
      in.state->node(static_cast<NodeIndex>(n)).pool == kNoPool) {
    return true;
  }
  static constexpr std::string_view kUnresolvable[] = {
      kReasonPodAffinity,        kReasonSpreadMissingLabel, kReasonVolumeNodeConflict,
      kReasonVolumeBindConflict, kReasonVolumePvNotExist,   kReasonRtNotCapable};
  for (const std::string& reason : filterNode(pod, request, node, in.usage[n], c.filter)) {
    if (std::find(std::begin(kUnresolvable), std::end(kUnresolvable), reason) !=
        std::end(kUnresolvable)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool nominatedCounts(std::int32_t nominee, std::int32_t pod) {
  return nominee >= pod;
}

Resources nominatedHold(const Resources& request, std::int64_t terminatingGpus) {
  Resources hold = request;
  auto gpu = hold.scalar.find(kGpuResource);
  if (gpu != hold.scalar.end()) {
    gpu->second =
        std::max<std::int64_t>(0, gpu->second - std::max<std::int64_t>(0, terminatingGpus));
    if (gpu->second == 0) {
      hold.scalar.erase(gpu);
    }
  }
  return hold;
}

bool moreImportant(const ResidentPod& a, const ResidentPod& b) {
  if (a.priority != b.priority) {
    return a.priority > b.priority;
  }
  return std::tie(a.started, a.key) < std::tie(b.started, b.key);
}

bool preemptsBefore(const NodeVictims& a, const NodeVictims& b,
                    std::span<const std::vector<ResidentPod>> running) {
  return candidateKey(a, running) < candidateKey(b, running);
}

std::optional<NodeVictims> victimsOnNode(const SchedPod& pod, const Resources& request,
                                         const PreemptionInput& in, std::size_t node) {
  if (node >= in.nodes.size() || in.usage.size() != in.nodes.size() ||
      in.running.size() != in.nodes.size()) {
    return std::nullopt;
  }
  const Context c = makeContext(pod, in, request);
  return victimsWith(pod, request, in, c, node);
}

Result<NodeVictims> selectPreemption(const SchedPod& pod, const PreemptionInput& in) {
  if (in.usage.size() != in.nodes.size() || in.running.size() != in.nodes.size() ||
      (in.state != nullptr && in.state->nodeCount() != in.nodes.size())) {
    return makeError(kc::errc::kInvalid,
                     "selectPreemption: nodes, usage, running pods and the pool model differ in "
                     "size");
  }
  if (pod.preemptNever) {
    return makeError(kc::errc::kUnschedulable, "preemption: " + std::string(kPreemptNeverMessage));
  }
  const Resources request = podRequests(pod);
  const Context c = makeContext(pod, in, request);
  std::optional<NodeVictims> best;
  std::optional<CandidateKey> bestKey;
  std::vector<RejectedNode> rejected;
  const std::size_t count = in.nodes.size();
  const std::size_t wanted = std::min<std::size_t>(
      count, std::max<std::size_t>(count * in.minCandidateNodesPercentage / 100,
                                   in.minCandidateNodesAbsolute));
  std::size_t found = 0;
  std::size_t withoutViolations = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (withoutViolations > 0 && found >= wanted) {
      break;  // kube-scheduler's DryRunPreemption stops here too
    }
    const std::size_t n = (in.startNode + k) % count;
    if (preemptionUnhelpful(pod, request, in, c, n)) {
      rejected.push_back({n, {std::string(kReasonPreemptionNotHelpful)}});
      continue;
    }
    FilterReasons why;
    auto v = victimsWith(pod, request, in, c, n, &why);
    if (!v) {
      rejected.push_back({n, std::move(why)});
      continue;
    }
    if (v->victims.empty()) {
      return *v;  // fits without evicting anyone
    }
    ++found;
    withoutViolations += v->pdbViolations == 0 ? 1 : 0;
    CandidateKey key = candidateKey(*v, in.running);
    if (!bestKey || key < *bestKey) {
      bestKey = key;
      best = std::move(v);
    }
  }
  if (!best) {
    return makeError(kc::errc::kUnschedulable,
                     "preemption: " + unschedulableMessage(in.nodes.size(), rejected));
  }
  return *best;
}

}  // namespace kc::alloc
