// kubecomp-sched's preemption adapter (docs/sched.md "Priority and preemption"): the cache
// hands alloc::selectPreemption the running pods, budgets and pool model when a pod fits nowhere
// even with GPUs moved; the scheduler evicts the victims through the Eviction API (a budget's
// 429 stops the preemption: the pod is decided again after its backoff), records the nominated
// node in the preemptor's status and writes kube-scheduler's condition and Events.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"
#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

const json& member(const json& obj, const char* key) {
  static const json kNull;  // an immutable constant, not shared state
  if (!obj.is_object()) {
    return kNull;
  }
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

kube::GroupVersionResource podDisruptionBudgets() {
  return {"policy", "v1", "poddisruptionbudgets", true};
}

// Per pool, the GPUs its pods hold beyond what the model could mark in use or promise: a
// nominated pod's hold while its victims, not yet seen terminating, still hold theirs (the
// victims' GPUs are owed to it, so another preemption cannot count them as freed).
std::vector<std::uint32_t> poolOwed(const ClusterModel& model) {
  const alloc::ClusterState& state = model.state();
  std::vector<std::int64_t> owed(state.poolCount(), 0);
  for (std::size_t n = 0; n < model.nodes().size(); ++n) {
    const alloc::PoolIndex p = state.node(static_cast<alloc::NodeIndex>(n)).pool;
    if (p != alloc::kNoPool) {
      owed[p] += std::max<std::int64_t>(
          0, model.usage()[n].requested.scalarOr0(alloc::kGpuResource) - model.visibleGpus(n));
    }
  }
  std::vector<std::uint32_t> out(owed.size(), 0);
  for (alloc::PoolIndex p = 0; p < owed.size(); ++p) {
    for (alloc::GpuIndex g : state.poolGpus(p)) {
      owed[p] -= model.promised(g) ? 1 : 0;  // the outstanding GPUs the model did promise
    }
    out[p] = static_cast<std::uint32_t>(std::max<std::int64_t>(0, owed[p]));
  }
  return out;
}

}  // namespace

Result<alloc::DisruptionBudget> parseDisruptionBudget(const json& pdb) {
  alloc::DisruptionBudget b;
  const json& ns = member(member(pdb, "metadata"), "namespace");
  b.ns = ns.is_string() ? ns.get<std::string>() : std::string();
  auto selector =
      alloc::parseLabelSelector(member(member(pdb, "spec"), "selector"), "spec.selector");
  if (!selector) {
    return selector.error();
  }
  b.selector = std::move(*selector);
  const json& status = member(pdb, "status");
  const json& allowed = member(status, "disruptionsAllowed");
  if (!allowed.is_null()) {
    if (!allowed.is_number_integer()) {
      return makeError(kc::errc::kInvalid, "status.disruptionsAllowed: not an integer");
    }
    b.disruptionsAllowed = static_cast<std::int32_t>(
        std::clamp<std::int64_t>(allowed.get<std::int64_t>(), INT32_MIN, INT32_MAX));
  }
  const json& disrupted = member(status, "disruptedPods");
  if (disrupted.is_object()) {
    for (const auto& [name, when] : disrupted.items()) {
      b.disruptedPods.insert(name);
    }
  }
  return b;
}

json evictionBody(const PreemptVictim& victim) {
  return json{{"apiVersion", "policy/v1"},
              {"kind", "Eviction"},
              {"metadata", {{"name", victim.name}, {"namespace", victim.ns}}},
              {"deleteOptions", {{"preconditions", {{"uid", victim.uid}}}}}};
}

std::string preemptionConditionMessage(std::string_view schedulerName) {
  return std::string(schedulerName) + ": preempting to accommodate a higher priority pod";
}

// ---------------------------------------------------------------- the cache

json SchedCache::ingestBudget(const json& pdb) {
  json keep = detail::storeIdentity(pdb);
  const json& meta = member(pdb, "metadata");
  const std::string key =
      member(meta, "namespace").get<std::string>() + "/" + member(meta, "name").get<std::string>();
  auto budget = parseDisruptionBudget(pdb);
  std::lock_guard<std::mutex> lock(mu_);
  if (!budget) {
    // Treated as absent by preemption; the Eviction API still enforces the real one.
    spdlog::warn("PodDisruptionBudget {}: {}; not counted by preemption", key,
                 budget.error().message);
    preempt_.budgets.erase(key);
    return keep;
  }
  preempt_.budgets[key] = std::move(*budget);
  return keep;
}

void SchedCache::removeBudget(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  preempt_.budgets.erase(key);
}

void SchedCache::preemptDone(const std::string& key, bool ok) {
  if (ok) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  preempt_.nominated.erase(key);
  dirty_ = true;
  cv_.notify_all();
}

std::optional<std::string> SchedCache::nominatedNode(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = preempt_.nominated.find(key);
  if (it == preempt_.nominated.end()) {
    return std::nullopt;
  }
  return it->second;
}

void SchedCache::holdNominatedLocked(const PodInfo& pod) {
  preempt_.holding.clear();
  for (const auto& [key, node] : preempt_.nominated) {
    const auto p = pods_.find(key);
    // A nominee still waiting (not placed elsewhere since, not going), of no lower priority.
    if (key == pod.key || p == pods_.end() || !p->second->pending() ||
        p->second->hold != PodInfo::Hold::kNone || !model_.indexOf(node) ||
        !alloc::nominatedCounts(p->second->pod.priority, pod.pod.priority)) {
      continue;
    }
    const PodInfo& nominee = *p->second;
    std::int64_t terminating = 0;  // GPUs its victims (lower priority, going) still hold there
    if (nominee.gpus > 0) {
      for (const auto& [k, q] : pods_) {
        if (q->deleting && q->bound() && q->pod.nodeName == node &&
            q->pod.priority < nominee.pod.priority && alloc::holdsNodeResources(q->pod)) {
          terminating += q->gpus;
        }
      }
    }
    model_.setHolding(key, node, alloc::nominatedHold(nominee.request, terminating));
    // NodePorts sees its host ports; not its labels or affinity (kube-scheduler requires the
    // node to pass without the nominated pods too, so they never satisfy a pod's affinity).
    auto ports = std::make_shared<alloc::PlacedPod>();
    ports->ns = nominee.ns;
    ports->name = nominee.name;
    ports->hostPorts = nominee.pod.hostPorts;
    placed_.place(key, node, std::move(ports));
    preempt_.holding.push_back(key);
  }
  if (!preempt_.holding.empty()) {
    model_.refresh();
  }
}

void SchedCache::releaseNominatedLocked(const PodInfo& pod) {
  for (const std::string& key : preempt_.holding) {
    model_.dropHolding(key);
    placed_.remove(key);
    if (PodInfo* p = findLocked(key); p != nullptr) {
      refreshHoldingLocked(*p);  // what it holds itself, if a gang decision placed it meanwhile
    }
  }
  if (!preempt_.holding.empty()) {
    preempt_.holding.clear();
    model_.refresh();
  }
  if (pod.hold != PodInfo::Hold::kNone) {
    preempt_.nominated.erase(pod.key);  // placed (on its nominated node or another)
  }
}

Result<alloc::PodPlacement> SchedCache::placeNominatedFirstLocked(const PodInfo& pod) {
  if (auto n = preempt_.nominated.find(pod.key);
      n != preempt_.nominated.end() && model_.indexOf(n->second)) {
    // kube-scheduler's evaluateNominatedNode: the nominated node alone first (its victims may
    // be gone); if it fails, every node as usual.
    alloc::SchedPod there = pod.pod;
    there.nodeName = n->second;
    auto placed =
        alloc::placePod(there, model_.nodes(), model_.usage(), model_.state(), opts_.placement);
    if (placed) {
      return placed;
    }
  }
  return alloc::placePod(pod.pod, model_.nodes(), model_.usage(), model_.state(), opts_.placement);
}

void SchedCache::preemptLocked(PodInfo& pod, Action& refusal, Clock::time_point now) {
  // kube-scheduler's PodEligibleToPreemptOthers: not while lower-priority pods on the node it
  // was nominated to are still terminating (the earlier preemption's victims).
  if (auto nominated = preempt_.nominated.find(pod.key); nominated != preempt_.nominated.end()) {
    for (const auto& [key, p] : pods_) {
      if (p->deleting && p->bound() && p->pod.nodeName == nominated->second &&
          p->pod.priority < pod.pod.priority) {
        refusal.message += " preemption: " + std::string(kTerminatingVictimMessage);
        return;
      }
    }
  }
  model_.refresh();
  const auto& nodes = model_.nodes();
  std::vector<std::vector<alloc::ResidentPod>>& running = preempt_.running;
  running.resize(nodes.size());
  for (auto& onNode : running) {
    onNode.clear();
  }
  for (const auto& [key, p] : pods_) {
    // Victims: pods of lower priority running (bound, or just bound by us) and not already
    // going; a pod waiting for its GPUs (reserved) holds nothing that eviction would free. The
    // others only count in the nodes' usage, which the model has already.
    if (p->pod.priority >= pod.pod.priority || p->deleting) {
      continue;
    }
    const bool runs = p->bound() ? alloc::holdsNodeResources(p->pod) : p->assumed();
    if (!runs) {
      continue;
    }
    auto i = model_.indexOf(p->bound() ? p->pod.nodeName : p->assumedNode);
    if (!i) {
      continue;
    }
    alloc::ResidentPod r;
    r.key = key;
    r.ns = p->ns;
    r.name = p->name;
    r.priority = p->pod.priority;
    r.started = p->started.value_or(now).time_since_epoch().count();
    r.request = &p->request;
    r.labels = &p->pod.labels;
    running[*i].push_back(std::move(r));
  }
  // Nobody to preempt anywhere still runs the search: its per-node statuses are the text
  // kube-scheduler adds ("... N No preemption victims found for incoming pod.").
  std::vector<alloc::DisruptionBudget> budgets;
  budgets.reserve(preempt_.budgets.size());
  for (const auto& [key, b] : preempt_.budgets) {
    budgets.push_back(b);
  }
  alloc::PreemptionInput in;
  in.nodes = nodes;
  in.usage = model_.usage();
  in.state = &model_.state();
  in.running = running;
  in.budgets = budgets;
  in.options = opts_.placement;
  const std::vector<std::uint32_t> owed = poolOwed(model_);
  in.poolOwed = owed;
  // kube-scheduler starts its search for candidates at a random node (the search stops after
  // enough candidates, so the same nodes are not always the ones preempted on).
  in.startNode = static_cast<std::size_t>(preempt_.rng.below(nodes.size()));
  auto chosen = alloc::selectPreemption(pod.pod, in);
  if (!chosen) {
    if (chosen.error().code == kc::errc::kUnschedulable) {
      refusal.message += " " + chosen.error().message;
      // kube-scheduler's Preempt: no candidate anywhere clears the pod's nominatedNodeName
      // (its room on the node it was nominated to is no longer held for it).
      if (!pod.pod.preemptNever) {
        preempt_.nominated.erase(pod.key);
      }
    } else {
      spdlog::warn("pod {}: preemption: {}", pod.key, chosen.error().message);
    }
    return;
  }
  refusal.kind = Action::Kind::kPreempt;
  refusal.node = nodes[chosen->node].name;
  for (std::size_t v : chosen->victims) {
    const PodInfo* victim = findLocked(std::string(running[chosen->node][v].key));
    refusal.victims.push_back(PreemptVictim{victim->key, victim->ns, victim->name, victim->uid});
  }
  // kube-scheduler's prepareCandidate: pods of lower priority nominated to the node lose their
  // nomination (they may no longer fit there) and are decided anew.
  std::erase_if(preempt_.nominated, [&](const auto& n) {
    const PodInfo* other = findLocked(n.first);
    return n.second == refusal.node && other != nullptr && other->pod.priority < pod.pod.priority;
  });
  preempt_.nominated[pod.key] = refusal.node;
}

// ---------------------------------------------------------------- the scheduler

void Scheduler::startPreemption() {
  kube::InformerOptions io;
  io.resource = podDisruptionBudgets();
  io.transform = [this](json&& obj) { return cache_.ingestBudget(obj); };
  budgets_ = std::make_unique<kube::Informer>(client_, io);
  kube::ResourceEventHandler h;
  h.onDelete = [this](const kube::ObjectPtr& obj) {
    const json& m = member(*obj, "metadata");
    cache_.removeBudget(m.value("namespace", std::string()) + "/" + m.value("name", std::string()));
  };
  budgets_->addHandler(std::move(h));
  budgets_->start();
}

void Scheduler::stopPreemption() {
  if (budgets_) {
    budgets_->stop();
  }
}

void Scheduler::executePreempt(const Action& a) {
  kube::CallOptions once;
  once.maxRetries = 0;  // a 429 from a budget is an answer, not a transient failure
  for (const PreemptVictim& v : a.victims) {
    auto r = client_.create(kube::gvr::pods(), v.ns, evictionBody(v), "eviction", once);
    if (!r && !r.error().isNotFound()) {
      // A budget refused (429) or the API failed: the victims left stay, the nomination is
      // dropped, and the pod is decided again (with the budgets' new status) after its backoff.
      spdlog::info("pod {}: preemption on node {} stopped: evicting {}: {}", a.key, a.node, v.key,
                   r.error().message);
      cache_.preemptDone(a.key, false);
      setCondition(a, "Unschedulable", a.message);
      event(a, "Warning", "FailedScheduling", a.message);
      return;
    }
    Action victim;
    victim.key = v.key;
    victim.ns = v.ns;
    victim.name = v.name;
    victim.uid = v.uid;
    // As kube-scheduler marks its victims (a pod still terminating shows it; one already gone
    // answers 404, which is fine).
    const json condition = {
        {"status",
         {{"conditions",
           json::array({{{"type", kConditionDisruptionTarget},
                         {"status", "True"},
                         {"reason", kReasonPreemptionByScheduler},
                         {"message", preemptionConditionMessage(kSchedulerName)},
                         {"lastTransitionTime", formatRfc3339(clock_.wallNow())}}})}}}};
    if (auto c = client_.patch(kube::gvr::pods(), v.ns, v.name, kube::PatchType::kStrategicMerge,
                               condition, "status");
        !c && !c.error().isNotFound()) {
      spdlog::warn("pod {}: DisruptionTarget condition: {}", v.key, c.error().message);
    }
    event(victim, "Normal", std::string(kReasonPreempted),
          "Preempted by pod " + a.uid + " on node " + a.node);
    spdlog::info("pod {}: preempted {} on node {}", a.key, v.key, a.node);
  }
  const json nominate = {{"status", {{"nominatedNodeName", a.node}}}};
  if (auto r = client_.patch(kube::gvr::pods(), a.ns, a.name, kube::PatchType::kMerge, nominate,
                             "status");
      !r) {
    spdlog::warn("pod {}: status.nominatedNodeName: {}", a.key, r.error().message);
  }
  setCondition(a, "Unschedulable", a.message);
  event(a, "Warning", "FailedScheduling", a.message);
}

}  // namespace kc::sched
