#include "services/reconfig-mgr/move_planner.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/api/reconfig_request.hpp"
#include "libcore/base/rfc3339.hpp"

namespace kc::reconfig {

using nlohmann::json;

Result<alloc::ClusterState> poolModel(const PoolSpec& spec, const PoolView& view,
                                      const std::set<std::string>& claimed,
                                      const std::map<std::string, NodeCapacity>* capacity) {
  alloc::ClusterState st;
  auto p = st.addPool(spec.name);
  if (!p) {
    return p.error();
  }
  for (const NodeSpec& n : spec.nodes) {
    alloc::NodeSpec ns;
    ns.name = n.name;
    ns.pool = *p;
    const NodeCapacity* cap = nullptr;
    if (capacity != nullptr) {
      if (const auto c = capacity->find(n.name); c != capacity->end()) {
        cap = &c->second;
        ns.cpuMilliCapacity = cap->cpuMilli;
        ns.memoryMiBCapacity = cap->memoryMiB;
      }
    }
    auto r = st.addNode(ns);
    if (!r) {
      return r.error();
    }
    if (cap != nullptr && cap->unschedulable) {
      if (auto s = st.setNodeSchedulable(*r, false); !s) {
        return s.error();
      }
    }
  }
  for (const GpuView& g : view.gpus) {
    alloc::GpuSpec gs;
    gs.id = g.info.id;
    gs.uuid = g.info.uuid;
    gs.model = alloc::validGpuModelName(g.info.model) ? g.info.model : "";
    gs.pool = *p;
    gs.healthy = g.healthy && !g.heldBack;  // held back: not moved, not counted to move to
    gs.draining = g.draining;
    if (g.attached()) {
      if (g.node.empty()) {
        gs.healthy = false;  // on a host of no node of the pool: not ours to move
      } else {
        gs.node = *st.findNode(g.node);
        gs.inUse = !g.inUseBy.empty() || claimed.count(g.info.id) > 0;
      }
    } else if (claimed.count(g.info.id) > 0) {
      gs.draining = true;  // an unattached GPU can only be "held" by not offering it
    }
    if (auto r = st.addGpu(std::move(gs)); !r) {
      return r.error();
    }
  }
  return st;
}

bool demandWaits(const PlanResult& plan) {
  for (const PodPlan& p : plan.pods) {
    if (p.verdict != PodPlan::Verdict::kSatisfied) {
      return true;
    }
  }
  return false;
}

alloc::PodOrderKey orderKey(const PodInfo& p) {
  return alloc::PodOrderKey{
      p.priority,
      std::chrono::duration_cast<std::chrono::seconds>(p.created.time_since_epoch()).count(), p.ns,
      p.name};
}

bool queuedBefore(const PodInfo& a, const PodInfo& b) {
  return alloc::podBefore(orderKey(a), orderKey(b));
}

void noteDeliveries(const Journal& journal, const std::vector<PodInfo>& pods,
                    Deliveries& delivered) {
  for (auto m = journal.history.rbegin(); m != journal.history.rend(); ++m) {
    if (m->phase == MovePhase::kSucceeded && !m->background() && !m->forClaim() &&
        !m->podUid.empty()) {
      delivered[m->gpu] = Delivery{m->podUid, m->toNode};
    }
  }
  std::map<std::string, const PodInfo*> byUid;
  for (const PodInfo& p : pods) {
    byUid.emplace(p.uid, &p);
  }
  std::erase_if(delivered, [&](const auto& d) {
    const auto p = byUid.find(d.second.podUid);
    return p == byUid.end() || !p->second->waiting() || p->second->dstNode != d.second.node;
  });
}

Result<PodInfo> parsePodInfo(const json& pod) {
  auto sp = alloc::parsePod(pod);
  if (!sp) {
    return sp.error();
  }
  PodInfo out;
  out.ns = sp->ns;
  out.name = sp->name;
  out.uid = sp->uid;
  out.nodeName = sp->nodeName;
  out.phase = sp->phase;
  out.priority = sp->priority;
  out.gpus = alloc::gpuRequest(*sp);
  out.models = sp->gpuModels;
  const json& meta = pod["metadata"];
  if (const auto c = meta.find("creationTimestamp"); c != meta.end() && c->is_string()) {
    if (auto t = parseRfc3339(c->get<std::string>())) {
      out.created = *t;
    }
  }
  out.deleting = meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  const alloc::Resources req = alloc::podRequests(*sp);
  constexpr std::int64_t kMiB = 1024 * 1024;
  out.cpuMilli = static_cast<std::uint64_t>(std::max<std::int64_t>(0, req.milliCpu));
  out.memoryMiB = static_cast<std::uint64_t>(std::max<std::int64_t>(0, req.memory / kMiB)) +
                  (req.memory > 0 && req.memory % kMiB != 0 ? 1 : 0);
  out.expectedRuntimeSeconds = sp->expectedRuntimeSeconds;
  if (const auto st = pod.find("status"); st != pod.end() && st->is_object()) {
    if (const auto t = st->find("startTime"); t != st->end() && t->is_string()) {
      if (auto parsed = parseRfc3339(t->get<std::string>())) {
        out.started = *parsed;
      }
    }
  }
  // Only the destination is read: the GPUs to move follow from the pod's request and what the
  // node has, not from kubecomp.io/demand (libcore/api/reconfig_request.hpp).
  const api::ReconfigRequestText request = api::reconfigRequestText(pod);
  if (request.notString) {
    return makeError(errc::kInvalid, "annotation " + *request.notString + " is not a string");
  }
  if (request.dstNode) {
    out.dstNode = *request.dstNode;
  }
  return out;
}

namespace {

// Claims up to `count` free GPUs on `node` (view order) into `claimed`; their ids are added to
// `taken` when given. Returns how many it claimed.
std::int64_t claimFreeOn(const PoolView& view, std::set<std::string>& claimed,
                         const std::string& node, std::int64_t count,
                         const alloc::GpuModelFilter& models,
                         std::vector<std::string>* taken = nullptr) {
  std::int64_t got = 0;
  for (const GpuView& g : view.gpus) {
    if (got >= count) {
      break;
    }
    if (g.node == node && g.free() && claimed.count(g.info.id) == 0 &&
        models.accepts(g.info.model)) {
      claimed.insert(g.info.id);
      if (taken != nullptr) {
        taken->push_back(g.info.id);
      }
      ++got;
    }
  }
  return got;
}

// The first claims on each node's free GPUs: those bound pods will use but do not use yet.
void claimForBoundPods(const PoolSpec& spec, const PoolView& view, const std::vector<PodInfo>& pods,
                       std::set<std::string>& claimed) {
  std::map<std::string, std::int64_t> boundNeed;  // node -> GPUs bound pods still need
  std::map<std::string, std::int64_t> inUseOnNode;
  for (const GpuView& g : view.gpus) {
    if (!g.node.empty() && !g.inUseBy.empty()) {
      ++inUseOnNode[g.node];
    }
  }
  for (const PodInfo& p : pods) {
    if (p.holdsNode() && spec.hasNode(p.nodeName)) {
      boundNeed[p.nodeName] += p.gpus;
    }
  }
  for (const auto& [node, need] : boundNeed) {
    const std::int64_t outstanding = need - inUseOnNode[node];
    if (outstanding > 0) {
      claimFreeOn(view, claimed, node, outstanding, alloc::GpuModelFilter{});
    }
  }
}

// The pods waiting for GPUs on a node of the pool, oldest first (FCFS).
std::vector<const PodInfo*> waitingPods(const PoolSpec& spec, const std::vector<PodInfo>& pods) {
  std::vector<const PodInfo*> waiting;
  for (const PodInfo& p : pods) {
    if (p.holdsNode() && spec.hasNode(p.nodeName)) {
      continue;  // bound here: claimed for by claimForBoundPods
    }
    if (p.waiting() && spec.hasNode(p.dstNode) && p.gpus > 0) {
      waiting.push_back(&p);
    }
  }
  std::sort(waiting.begin(), waiting.end(),
            [](const PodInfo* a, const PodInfo* b) { return queuedBefore(*a, *b); });
  return waiting;
}

// GPUs the node's device plugin already reports in use by this very pod: it has been bound
// and started, and the pod watch has not caught up with the usage report yet (two watches,
// no order between them). They are its own, not a deficit.
std::int64_t gpusInUseBy(const PoolView& view, const PodInfo& p) {
  std::int64_t own = 0;
  for (const GpuView& g : view.gpus) {
    if (g.node == p.dstNode &&
        std::find(g.inUseBy.begin(), g.inUseBy.end(), p.key()) != g.inUseBy.end()) {
      ++own;
    }
  }
  return own;
}

// The sources for a pod's deficit on its destination, chosen by the policy among the GPUs no
// claim holds; `plan` becomes kMoving (sources claimed) or kInsufficient (with the reason).
void chooseSources(const PlanInputs& in, const PodInfo& p, std::set<std::string>& claimed,
                   PodPlan& plan) {
  auto st = poolModel(*in.spec, *in.view, claimed);
  if (!st) {
    plan.verdict = PodPlan::Verdict::kInsufficient;
    plan.reason = "pool model: " + st.error().message;
    return;
  }
  const auto target = st->findNode(p.dstNode);
  auto chosen = alloc::chooseGpus(*st, *target, static_cast<std::uint32_t>(plan.deficit), in.policy,
                                  in.rng, p.models);
  if (!chosen) {
    plan.verdict = PodPlan::Verdict::kInsufficient;
    plan.reason = "pool " + in.spec->name + " cannot supply " + std::to_string(plan.deficit) +
                  " more GPU(s)" +
                  (p.models.acceptsAny() ? std::string() : " of model " + p.models.toString(',')) +
                  " to " + p.dstNode + ": " + chosen.error().message;
    return;
  }
  plan.verdict = PodPlan::Verdict::kMoving;
  for (alloc::GpuIndex gi : *chosen) {
    plan.sources.push_back(st->gpu(gi).id);
    claimed.insert(st->gpu(gi).id);
  }
}

// What a waiting pod holds on its destination while the pool is planned: the GPUs the device
// plugin shows it using, those delivered for it, and the free ones claimed for it there.
struct NodeClaim {
  const PodInfo* pod = nullptr;
  std::int64_t own = 0;
  std::vector<std::string> delivered;
  std::vector<std::string> onNode;
  std::int64_t held() const {
    return own + static_cast<std::int64_t>(delivered.size() + onNode.size());
  }
};

// The free GPUs on the pod's destination that moves delivered for it, claimed for it.
void claimDelivered(const PlanInputs& in, NodeClaim& c, std::set<std::string>& claimed) {
  if (in.delivered == nullptr) {
    return;
  }
  const PodInfo& p = *c.pod;
  for (const GpuView& g : in.view->gpus) {
    if (c.held() >= p.gpus) {
      return;
    }
    const auto d = in.delivered->find(g.info.id);
    if (d != in.delivered->end() && d->second.podUid == p.uid && d->second.node == p.dstNode &&
        g.node == p.dstNode && g.free() && claimed.count(g.info.id) == 0 &&
        p.models.accepts(g.info.model)) {
      claimed.insert(g.info.id);
      c.delivered.push_back(g.info.id);
    }
  }
}

// One waiting pod's plan from its claims on its destination: the deficit, and sources for it.
// An insufficient pod gives up its claimed free GPUs (not its deliveries).
PodPlan planWaitingPod(const PlanInputs& in, NodeClaim& c, std::set<std::string>& claimed) {
  const PodInfo& p = *c.pod;
  PodPlan plan;
  plan.pod = p.key();
  plan.uid = p.uid;
  plan.node = p.dstNode;
  plan.request = p.gpus;
  std::int64_t have = c.held();
  for (const Move& m : *in.active) {
    if (m.active() && !m.background() && !m.forClaim() && m.podKey() == p.key() &&
        m.toNode == p.dstNode) {
      ++have;  // a GPU in flight is for this pod
    }
  }
  plan.deficit = std::max<std::int64_t>(0, p.gpus - have);
  if (plan.deficit == 0) {
    plan.verdict = PodPlan::Verdict::kSatisfied;
    return plan;
  }
  chooseSources(in, p, claimed, plan);
  if (plan.verdict == PodPlan::Verdict::kInsufficient) {
    // A pod the pool cannot serve in full holds nothing more: the others may use those GPUs.
    for (const auto& id : c.onNode) {
      claimed.erase(id);
    }
    c.onNode.clear();
  }
  return plan;
}

// The move of GPU `source` to the pod's destination, for that pod.
Move demandMove(const PoolSpec& spec, const PoolView& view, const PodInfo& p,
                const std::string& source) {
  const GpuView* g = view.find(source);
  Move m;
  m.gpu = g->info.id;
  m.fromNode = g->attached() ? g->node : "";
  m.fromHost = g->attached() ? *g->info.hostPort : "";
  m.toNode = p.dstNode;
  m.toHost = spec.poolHostOf(p.dstNode, g->info.id).value_or("");
  m.podNamespace = p.ns;
  m.podName = p.name;
  m.podUid = p.uid;
  m.phase = g->attached() ? MovePhase::kDraining : MovePhase::kAttaching;
  return m;
}

// One planning pass. The pods in `late` (found insufficient in an earlier pass) claim their
// destination's free GPUs only in their turn; every other waiting pod claims them before any
// source is chosen.
PlanResult planPass(const PlanInputs& in, const std::vector<const PodInfo*>& waiting,
                    const std::set<const PodInfo*>& late) {
  PlanResult out;
  // Claims on each node's free GPUs: bound pods not yet using their GPUs first, then each
  // waiting pod's deliveries, then (queue order) what the waiting pods need of their node.
  std::set<std::string> claimed;
  claimForBoundPods(*in.spec, *in.view, *in.pods, claimed);
  std::vector<NodeClaim> claims;
  for (const PodInfo* p : waiting) {
    NodeClaim& c = claims.emplace_back();
    c.pod = p;
    c.own = gpusInUseBy(*in.view, *p);
    claimDelivered(in, c, claimed);
  }
  auto claimNode = [&](NodeClaim& c) {
    claimFreeOn(*in.view, claimed, c.pod->dstNode,
                std::max<std::int64_t>(0, c.pod->gpus - c.held()), c.pod->models, &c.onNode);
  };
  for (NodeClaim& c : claims) {
    if (late.count(c.pod) == 0) {
      claimNode(c);
    }
  }
  // Every wanted move in queue order (each pod's sources best first), and the chassis each
  // would occupy.
  std::vector<Move> wanted;
  std::vector<std::string> chassis;
  for (NodeClaim& c : claims) {
    if (late.count(c.pod) > 0) {
      claimNode(c);
    }
    PodPlan plan = planWaitingPod(in, c, claimed);
    if (plan.verdict == PodPlan::Verdict::kMoving) {
      for (const auto& source : plan.sources) {
        wanted.push_back(demandMove(*in.spec, *in.view, *c.pod, source));
        chassis.emplace_back(alloc::chassisOfGpu(source));
      }
    }
    out.pods.push_back(std::move(plan));
  }
  for (std::size_t i : alloc::movesToStart(chassis, in.active->chassis(), in.concurrency)) {
    out.starts.push_back(std::move(wanted[i]));
  }
  if (!out.starts.empty()) {
    out.next = out.starts.front();
  }
  out.claimed = std::move(claimed);
  return out;
}

}  // namespace

PlanResult planMoves(const PlanInputs& in) {
  const std::vector<const PodInfo*> waiting = waitingPods(*in.spec, *in.pods);
  // A pod the pool cannot serve gives up its node's free GPUs; an earlier pod may have needed
  // them as sources, so the pool is planned again with that pod claiming only in its turn.
  // Each pass adds a pod to `late`, so this ends within waiting.size() + 1 passes.
  std::set<const PodInfo*> late;
  while (true) {
    PlanResult out = planPass(in, waiting, late);
    bool again = false;
    for (std::size_t i = 0; i < waiting.size(); ++i) {
      if (out.pods[i].verdict == PodPlan::Verdict::kInsufficient &&
          late.insert(waiting[i]).second) {
        again = true;
      }
    }
    if (!again) {
      return out;
    }
  }
}

}  // namespace kc::reconfig
