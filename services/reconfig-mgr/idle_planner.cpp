#include "services/reconfig-mgr/idle_planner.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/base/rfc3339.hpp"

namespace kc::reconfig {
namespace {

using SysTime = std::chrono::system_clock::time_point;
constexpr std::chrono::milliseconds kDefaultMoveTime{20'000};

std::int64_t millis(SysTime t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

bool olderThan(const PodInfo* a, const PodInfo* b) {
  return std::tie(a->created, a->ns, a->name) < std::tie(b->created, b->ns, b->name);
}

bool terminal(const PodInfo& p) {
  return p.phase == "Succeeded" || p.phase == "Failed";
}

alloc::PodRequest requestOf(const PodInfo& p) {
  return alloc::PodRequest{
      p.cpuMilli, p.memoryMiB,
      static_cast<std::uint32_t>(std::clamp<std::int64_t>(p.gpus, 0, 1 << 20))};
}

// The node a pod holds resources on in this pool ("" for none): bound there, or waiting and
// already served there (the demand planner found no deficit; only the bind is missing).
std::string nodeHeld(const PodInfo& p, const PoolSpec& spec) {
  if (p.holdsNode()) {
    return spec.hasNode(p.nodeName) ? p.nodeName : "";
  }
  if (p.waiting() && spec.hasNode(p.dstNode)) {
    return p.dstNode;
  }
  return "";
}

// When a background move last placed `gpu` (Succeeded, newest first in the history).
std::optional<SysTime> lastPlaced(const Journal& journal, const std::string& gpu) {
  for (const Move& m : journal.history) {
    if (m.gpu == gpu && m.background() && m.phase == MovePhase::kSucceeded) {
      if (auto t = parseRfc3339(m.phaseSince)) {
        return *t;
      }
    }
  }
  return std::nullopt;
}

}  // namespace

std::chrono::milliseconds moveTimeEstimate(const Journal& journal) {
  for (const Move& m : journal.history) {
    if (m.phase != MovePhase::kSucceeded) {
      continue;
    }
    auto from = parseRfc3339(m.startedAt);
    auto to = parseRfc3339(m.phaseSince);
    if (from && to && *to >= *from) {
      return std::max(std::chrono::milliseconds(1),
                      std::chrono::duration_cast<std::chrono::milliseconds>(*to - *from));
    }
  }
  return kDefaultMoveTime;
}

Result<IdlePlan> planIdle(const IdleInputs& in) {
  IdlePlan out;
  if (in.kind == alloc::RecomposeKind::None || demandWaits(*in.demand) || in.demand->next) {
    return out;
  }
  const PoolSpec& spec = *in.spec;
  const PoolView& view = *in.view;
  auto st = poolModel(spec, view, in.demand->claimed, in.nodes);
  if (!st) {
    return st.error();
  }
  const std::int64_t now = millis(in.now);

  // The claimed free GPUs of each node, in view order: what bound pods (and served waiting
  // pods) will run on once they start.
  std::map<std::string, std::vector<alloc::GpuIndex>> claimedOn;
  for (const GpuView& g : view.gpus) {
    if (!g.node.empty() && g.free() && in.demand->claimed.count(g.info.id) > 0) {
      claimedOn[g.node].push_back(*st->findGpu(g.info.id));
    }
  }
  std::set<alloc::GpuIndex> assigned;
  std::vector<alloc::RunningPod> running;
  const PodInfo* head = nullptr;
  std::vector<const PodInfo*> gpuPods;
  for (const PodInfo& p : *in.pods) {
    if (p.gpus > 0 && p.models.acceptsAny()) {
      gpuPods.push_back(&p);
    }
    if (p.nodeName.empty() && !p.deleting && p.dstNode.empty() && !terminal(p) &&
        (head == nullptr || olderThan(&p, head))) {
      head = &p;
    }
    const std::string node = nodeHeld(p, spec);
    if (node.empty()) {
      continue;
    }
    alloc::RunningPod r;
    r.node = *st->findNode(node);
    r.pod = requestOf(p);
    const alloc::NodeState& ns = st->node(r.node);
    r.pod.cpuMilli = std::min(r.pod.cpuMilli, ns.cpuMilliFree());
    r.pod.memoryMiB = std::min(r.pod.memoryMiB, ns.memoryMiBFree());
    if (auto s = st->reserve(r.node, r.pod.cpuMilli, r.pod.memoryMiB); !s) {
      return s.error();
    }
    const std::string key = p.key();
    for (const GpuView& g : view.gpus) {
      if (g.node == node && std::find(g.inUseBy.begin(), g.inUseBy.end(), key) != g.inUseBy.end()) {
        const alloc::GpuIndex gi = *st->findGpu(g.info.id);
        if (st->gpu(gi).inUse && assigned.insert(gi).second) {
          r.gpus.push_back(gi);
        }
      }
    }
    for (alloc::GpuIndex gi : claimedOn[node]) {
      if (r.gpus.size() >= r.pod.gpus) {
        break;
      }
      if (assigned.insert(gi).second) {
        r.gpus.push_back(gi);
      }
    }
    const std::int64_t runtime = p.expectedRuntimeSeconds.value_or(in.defaultRuntime.count());
    const std::int64_t start = p.started ? millis(*p.started) : now;
    if (__builtin_mul_overflow(runtime, std::int64_t{1000}, &r.end) ||
        __builtin_add_overflow(start, r.end, &r.end)) {
      r.end = std::numeric_limits<std::int64_t>::max();
    }
    running.push_back(std::move(r));
  }
  std::sort(gpuPods.begin(), gpuPods.end(), olderThan);
  if (gpuPods.size() > alloc::kRecentArrivals) {
    gpuPods.erase(gpuPods.begin(),
                  gpuPods.end() - static_cast<std::ptrdiff_t>(alloc::kRecentArrivals));
  }
  std::vector<alloc::PodRequest> recent;
  std::uint32_t largest = 0;
  for (const PodInfo* p : gpuPods) {
    recent.push_back(requestOf(*p));
    largest = std::max(largest, recent.back().gpus);
  }
  alloc::PodRequest headRequest{};
  alloc::RecomposeInput rin;
  rin.running = running;
  rin.fabric = alloc::FabricClock{std::vector<std::int64_t>(st->poolCount(), now)};
  if (head != nullptr) {
    headRequest = requestOf(*head);
    rin.head = &headRequest;
    rin.headModels = head->models;
  }
  rin.recent = recent;
  alloc::PlacementRules rules;
  rules.mode = alloc::Composability::Composable;
  rules.nodePolicy = *alloc::findNodePolicy(alloc::kDefaultNodePolicy);
  rules.gpuPolicy = in.gpuPolicy;
  rules.moveTime = moveTimeEstimate(*in.journal).count();
  auto moves = alloc::planIdleMoves(*st, rin, rules, now);
  if (!moves) {
    return moves.error();
  }
  for (const alloc::IdleMove& m : *moves) {
    const std::string& id = st->gpu(m.gpu).id;
    const std::string& to = st->node(m.to).name;
    out.planned.push_back(id + ">" + to);
    if (out.next) {
      continue;
    }
    if (auto placed = lastPlaced(*in.journal, id); placed && in.now - *placed < in.cooldown) {
      continue;  // placed by a background move a moment ago: do not move it back and forth
    }
    const GpuView* g = view.find(id);
    const auto toHost = spec.poolHostOf(to, id);
    if (g == nullptr || !toHost) {
      continue;
    }
    Move mv;
    mv.gpu = id;
    mv.fromNode = g->attached() ? g->node : "";
    mv.fromHost = g->attached() ? *g->info.hostPort : "";
    mv.toNode = to;
    mv.toHost = *toHost;
    mv.kind = MoveKind::kBackground;
    mv.phase = g->attached() ? MovePhase::kDraining : MovePhase::kAttaching;
    mv.reason = head != nullptr ? "toward " + to + ", where the waiting head " + head->key() +
                                      " (" + std::to_string(head->gpus) + " GPUs) is reserved"
                                : "gathering free GPUs on " + to +
                                      " for the recent arrivals' largest request (" +
                                      std::to_string(largest) + " GPUs)";
    out.next = std::move(mv);
  }
  return out;
}

std::optional<std::string> backgroundCancelReason(const PlanResult& demand, const PoolView& view,
                                                  const std::vector<PodInfo>& pods,
                                                  const Move& move) {
  for (const PodPlan& p : demand.pods) {
    if (p.verdict != PodPlan::Verdict::kSatisfied) {
      return "pod " + p.pod + " waits for GPUs on " + p.node + " (a real request needs the fabric)";
    }
  }
  if (move.fromNode.empty()) {
    return std::nullopt;
  }
  // The pods bound to the source still need (request - in use there) GPUs; if the free GPUs
  // left there besides this one do not cover that, one of them may be waiting for this GPU.
  std::int64_t need = 0;
  for (const PodInfo& p : pods) {
    if (p.holdsNode() && p.nodeName == move.fromNode) {
      need += p.gpus;
    }
  }
  std::int64_t inUse = 0;
  std::int64_t freeOthers = 0;
  for (const GpuView& g : view.gpus) {
    if (g.node != move.fromNode) {
      continue;
    }
    if (!g.inUseBy.empty()) {
      ++inUse;
    } else if (g.info.id != move.gpu && g.free()) {
      ++freeOthers;
    }
  }
  if (need - inUse > freeOthers) {
    return "pods bound to " + move.fromNode + " may need GPU " + move.gpu;
  }
  return std::nullopt;
}

}  // namespace kc::reconfig
