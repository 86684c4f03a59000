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

// The queue's order (kubecomp-sched's too): priority, then age, namespace, name.
bool queuedFirst(const PodInfo* a, const PodInfo* b) {
  return queuedBefore(*a, *b);
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

// The claimed free GPUs of each node, in view order: what bound pods (and served waiting
// pods) will run on once they start.
std::map<std::string, std::vector<alloc::GpuIndex>> claimedFreeGpus(
    const PoolView& view, const std::set<std::string>& claimed, const alloc::ClusterState& st) {
  std::map<std::string, std::vector<alloc::GpuIndex>> claimedOn;
  for (const GpuView& g : view.gpus) {
    if (!g.node.empty() && g.free() && claimed.count(g.info.id) > 0) {
      claimedOn[g.node].push_back(*st.findGpu(g.info.id));
    }
  }
  return claimedOn;
}

// The first pod in queue order waiting without a destination (the queue's head), or nullptr.
const PodInfo* waitingHead(const std::vector<PodInfo>& pods) {
  const PodInfo* head = nullptr;
  for (const PodInfo& p : pods) {
    if (p.nodeName.empty() && !p.deleting && p.dstNode.empty() && !terminal(p) &&
        (head == nullptr || queuedFirst(&p, head))) {
      head = &p;
    }
  }
  return head;
}

// The requests of the newest GPU pods (at most alloc::kRecentArrivals, oldest first).
std::vector<alloc::PodRequest> recentArrivals(const std::vector<PodInfo>& pods) {
  std::vector<const PodInfo*> gpuPods;
  for (const PodInfo& p : pods) {
    if (p.gpus > 0 && p.models.acceptsAny()) {
      gpuPods.push_back(&p);
    }
  }
  std::sort(gpuPods.begin(), gpuPods.end(), olderThan);
  if (gpuPods.size() > alloc::kRecentArrivals) {
    gpuPods.erase(gpuPods.begin(),
                  gpuPods.end() - static_cast<std::ptrdiff_t>(alloc::kRecentArrivals));
  }
  std::vector<alloc::PodRequest> recent;
  for (const PodInfo* p : gpuPods) {
    recent.push_back(requestOf(*p));
  }
  return recent;
}

// When a pod is expected to end (ms): its start (now when not started) plus its expected run
// time, saturating instead of overflowing.
std::int64_t expectedEnd(const PodInfo& p, std::int64_t now, std::chrono::seconds defaultRuntime) {
  const std::int64_t runtime = p.expectedRuntimeSeconds.value_or(defaultRuntime.count());
  const std::int64_t start = p.started ? millis(*p.started) : now;
  std::int64_t end = 0;
  if (__builtin_mul_overflow(runtime, std::int64_t{1000}, &end) ||
      __builtin_add_overflow(start, end, &end)) {
    end = std::numeric_limits<std::int64_t>::max();
  }
  return end;
}

// The GPUs pod `p` runs on at `node`: those in use by it there, then claimed free ones up to
// its request. `assigned` (the GPUs given to a pod so far) gains them.
std::vector<alloc::GpuIndex> gpusOf(const PodInfo& p, const std::string& node,
                                    std::uint32_t request, const PoolView& view,
                                    const alloc::ClusterState& st,
                                    const std::vector<alloc::GpuIndex>& claimedOnNode,
                                    std::set<alloc::GpuIndex>& assigned) {
  std::vector<alloc::GpuIndex> gpus;
  const std::string key = p.key();
  for (const GpuView& g : view.gpus) {
    if (g.node == node && std::find(g.inUseBy.begin(), g.inUseBy.end(), key) != g.inUseBy.end()) {
      const alloc::GpuIndex gi = *st.findGpu(g.info.id);
      if (st.gpu(gi).inUse && assigned.insert(gi).second) {
        gpus.push_back(gi);
      }
    }
  }
  for (alloc::GpuIndex gi : claimedOnNode) {
    if (gpus.size() >= request) {
      break;
    }
    if (assigned.insert(gi).second) {
      gpus.push_back(gi);
    }
  }
  return gpus;
}

// Every pod holding resources on a node of the pool as a running pod of the model; its CPU
// and memory (capped at what the node has free) are reserved in `st`.
Result<std::vector<alloc::RunningPod>> runningPods(const IdleInputs& in, alloc::ClusterState& st,
                                                   std::int64_t now) {
  const std::map<std::string, std::vector<alloc::GpuIndex>> claimedOn =
      claimedFreeGpus(*in.view, in.demand->claimed, st);
  std::set<alloc::GpuIndex> assigned;
  std::vector<alloc::RunningPod> running;
  for (const PodInfo& p : *in.pods) {
    const std::string node = nodeHeld(p, *in.spec);
    if (node.empty()) {
      continue;
    }
    alloc::RunningPod r;
    r.node = *st.findNode(node);
    r.pod = requestOf(p);
    const alloc::NodeState& ns = st.node(r.node);
    r.pod.cpuMilli = std::min(r.pod.cpuMilli, ns.cpuMilliFree());
    r.pod.memoryMiB = std::min(r.pod.memoryMiB, ns.memoryMiBFree());
    if (auto s = st.reserve(r.node, r.pod.cpuMilli, r.pod.memoryMiB); !s) {
      return s.error();
    }
    const auto c = claimedOn.find(node);
    r.gpus = gpusOf(p, node, r.pod.gpus, *in.view, st,
                    c != claimedOn.end() ? c->second : std::vector<alloc::GpuIndex>{}, assigned);
    r.end = expectedEnd(p, now, in.defaultRuntime);
    running.push_back(std::move(r));
  }
  return running;
}

// The rules the simulator's idle recomposition runs with, on this pool's GPU policy and the
// fabric's measured move time.
alloc::PlacementRules idleRules(const IdleInputs& in) {
  alloc::PlacementRules rules;
  rules.mode = alloc::Composability::Composable;
  rules.nodePolicy = *alloc::findNodePolicy(alloc::kDefaultNodePolicy);
  rules.gpuPolicy = in.gpuPolicy;
  rules.moveTime = moveTimeEstimate(*in.journal).count();
  return rules;
}

std::string backgroundReason(const PodInfo* head, const std::string& to,
                             const std::vector<alloc::PodRequest>& recent) {
  if (head != nullptr) {
    return "toward " + to + ", where the waiting head " + head->key() + " (" +
           std::to_string(head->gpus) + " GPUs) is reserved";
  }
  std::uint32_t largest = 0;
  for (const alloc::PodRequest& r : recent) {
    largest = std::max(largest, r.gpus);
  }
  return "gathering free GPUs on " + to + " for the recent arrivals' largest request (" +
         std::to_string(largest) + " GPUs)";
}

// The background move of GPU `id` to node `to`, or nullopt when the GPU is cooling down or
// has no view or no host toward `to`.
std::optional<Move> backgroundMove(const IdleInputs& in, const std::string& id,
                                   const std::string& to, const std::string& reason) {
  if (auto placed = lastPlaced(*in.journal, id); placed && in.now - *placed < in.cooldown) {
    return std::nullopt;  // placed by a background move a moment ago: do not move it back and forth
  }
  const GpuView* g = in.view->find(id);
  const auto toHost = in.spec->poolHostOf(to, id);
  if (g == nullptr || !toHost) {
    return std::nullopt;
  }
  Move mv;
  mv.gpu = id;
  mv.fromNode = g->attached() ? g->node : "";
  mv.fromHost = g->attached() ? *g->info.hostPort : "";
  mv.toNode = to;
  mv.toHost = *toHost;
  mv.kind = MoveKind::kBackground;
  mv.phase = g->attached() ? MovePhase::kDraining : MovePhase::kAttaching;
  mv.reason = reason;
  return mv;
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
  auto st = poolModel(*in.spec, *in.view, in.demand->claimed, in.nodes);
  if (!st) {
    return st.error();
  }
  const std::int64_t now = millis(in.now);
  auto running = runningPods(in, *st, now);
  if (!running) {
    return running.error();
  }
  const PodInfo* head = waitingHead(*in.pods);
  const std::vector<alloc::PodRequest> recent = recentArrivals(*in.pods);
  alloc::PodRequest headRequest{};
  alloc::RecomposeInput rin;
  rin.running = *running;
  rin.fabric = alloc::FabricClock{std::vector<std::int64_t>(st->poolCount(), now)};
  if (head != nullptr) {
    headRequest = requestOf(*head);
    rin.head = &headRequest;
    rin.headModels = head->models;
  }
  rin.recent = recent;
  auto moves = alloc::planIdleMoves(*st, rin, idleRules(in), now);
  if (!moves) {
    return moves.error();
  }
  for (const alloc::IdleMove& m : *moves) {
    const std::string& id = st->gpu(m.gpu).id;
    const std::string& to = st->node(m.to).name;
    out.planned.push_back(id + ">" + to);
    if (!out.next) {
      out.next = backgroundMove(in, id, to, backgroundReason(head, to, recent));
    }
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
