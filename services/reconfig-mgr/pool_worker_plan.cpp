#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <spdlog/spdlog.h>

#include <set>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/base64.hpp"
#include "libcore/base/rfc3339.hpp"
#include "libcore/fabric/h3_driver.hpp"
#include "libcore/fabric/pool.hpp"
#include "libcore/fabric/redfish_driver.hpp"
#include "libcore/obs/health.hpp"
#include "services/reconfig-mgr/idle_planner.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/moves_gate.hpp"
#include "services/reconfig-mgr/pool_view.hpp"
#include "services/reconfig-mgr/pool_worker.hpp"

namespace kc::reconfig {

using detail::gpusLabel;
using detail::secondsBuckets;
using detail::secondsSince;

std::vector<PodInfo> PoolWorker::kubecompPods() {
  std::vector<PodInfo> out;
  std::map<std::string, ParsedPod> next;
  for (const auto& obj : sh_.pods->list()) {
    const json& meta = (*obj)["metadata"];
    const std::string key = meta.value("namespace", "") + "/" + meta.value("name", "");
    const std::string rv = meta.value("resourceVersion", "");
    auto cached = podCache_.find(key);
    if (cached != podCache_.end() && !rv.empty() && cached->second.resourceVersion == rv) {
      next.emplace(key, std::move(cached->second));
    } else {
      ParsedPod parsed;
      parsed.resourceVersion = rv;
      auto p = parsePodInfo(*obj);
      if (p) {
        parsed.info = std::move(*p);
      } else if (badPods_.size() < 4096 && badPods_.insert(key + "@" + rv).second) {
        spdlog::warn("pod {}: {}", key, p.error().message);
      }
      next.emplace(key, std::move(parsed));
    }
    if (next.at(key).info) {
      out.push_back(*next.at(key).info);
    }
  }
  podCache_ = std::move(next);
  return out;
}

void PoolWorker::trackRequests(const std::vector<PodInfo>& pods) {
  const SteadyTime now = clock_.now();
  std::set<std::string> seen;
  for (const PodInfo& p : pods) {
    if (p.dstNode.empty() || !spec_->hasNode(p.dstNode)) {
      continue;
    }
    seen.insert(p.key());
    auto it = timings_.find(p.key());
    if (p.waiting()) {
      if (it == timings_.end() || it->second.firstSeen == SteadyTime{}) {
        auto& t = timings_[p.key()];
        t.firstSeen = now;
        t.node = p.dstNode;
        if (p.created != std::chrono::system_clock::time_point{}) {
          t.nodeSelection =
              std::max(0.0, std::chrono::duration<double>(clock_.wallNow() - p.created).count());
        }
      }
    } else if (it != timings_.end() && p.nodeName == it->second.node && it->second.gpusMoved > 0) {
      const RequestTiming& t = it->second;
      if (sh_.metrics) {
        sh_.metrics->phase("node_selection", t.gpusMoved, t.nodeSelection);
        sh_.metrics->phase("gpu_availability_update", t.gpusMoved, t.availability);
        sh_.metrics->phase("allocation_retrieval", t.gpusMoved, t.retrieval);
        sh_.metrics->phase("reallocation", t.gpusMoved, t.reallocation);
        sh_.metrics->phase("detection_and_binding", t.gpusMoved, secondsSince(t.lastMoveDone, now));
      }
      timings_.erase(it);
    }
  }
  for (auto it = timings_.begin(); it != timings_.end();) {
    it = seen.count(it->first) ? std::next(it) : timings_.erase(it);
  }
}

void PoolWorker::planAndStart(const std::vector<PodInfo>& pods) {
  bool anyWaiting = false;
  for (const PodInfo& p : pods) {
    anyWaiting = anyWaiting || (p.waiting() && spec_->hasNode(p.dstNode));
  }
  if (!movesGate_.allows(clock_.now())) {
    return;  // refused as unsupported; tried again at movesGate_.reprobeAt()
  }
  if (!anyWaiting) {
    startBackground(pods);
    return;
  }
  const SteadyTime t0 = clock_.now();
  bool freshRead = false;
  // Moves are planned on a fresh inventory, except while a fabric call runs (its chassis
  // answers nothing else; the moves' own reads keep the inventory).
  if (!inventory_ ||
      (clock_.now() - std::max(lastRead_, lastVerified_) > sh_.opts.planInventoryMaxAge &&
       !runner_.fabricBusy())) {
    readInventory();
    freshRead = true;
  }
  if (!inventory_ || inventoryError_) {
    return;
  }
  const SteadyTime t1 = clock_.now();
  const auto view = currentView();
  PlanResult plan = demandPlan(*view, pods);
  const SteadyTime t2 = clock_.now();
  for (const PodPlan& pp : plan.pods) {
    auto& t = timing(pp.pod);
    if (pp.verdict == PodPlan::Verdict::kMoving) {
      // The inventory read (and usage merge) the request's first plan stood on, whether read
      // for the plan or by the poll just before it; later plans reuse the verify reads.
      if (!t.planned) {
        t.availability = freshRead ? secondsSince(t0, t1) : lastReadSeconds_;
        t.planned = true;
      }
      t.retrieval += secondsSince(t1, t2);
    }
    const auto slash = pp.pod.find('/');
    if (pp.verdict == PodPlan::Verdict::kInsufficient) {
      if (insufficient_[pp.pod] != pp.reason) {
        insufficient_[pp.pod] = pp.reason;
        spdlog::info("pool {}: {}: {}", name_, pp.pod, pp.reason);
        podEvent(pp.pod.substr(0, slash), pp.pod.substr(slash + 1), pp.uid, true,
                 "ReconfigInsufficient", pp.reason);
        if (sh_.metrics) {
          sh_.metrics->failure("insufficient");
        }
      }
    } else {
      insufficient_.erase(pp.pod);
    }
  }
  if (!plan.starts.empty()) {
    for (const Move& m : plan.starts) {
      if (auto s = runner_.start(journal_, m); !s) {
        spdlog::warn("pool {}: cannot start the move of GPU {}: {}", name_, m.gpu,
                     s.error().message);
      }
    }
    return;
  }
  if (!demandWaits(plan) && !journal_.active) {
    startBackground(pods);
  }
}

PlanResult PoolWorker::demandPlan(const PoolView& view, const std::vector<PodInfo>& pods) {
  PlanInputs in;
  in.spec = &*spec_;
  in.view = &view;
  in.pods = &pods;
  in.active = &journal_.active;
  in.concurrency = runner_.concurrencyNow();
  in.policy = sh_.policy;
  in.rng = &rng_;
  noteDeliveries(journal_, pods, delivered_);
  in.delivered = &delivered_;
  return planMoves(in);
}

std::map<std::string, NodeCapacity> PoolWorker::nodeCapacities() {
  std::map<std::string, NodeCapacity> out;
  for (const NodeSpec& n : spec_->nodes) {
    auto obj = sh_.nodes->get("", n.name);
    if (!obj) {
      continue;
    }
    auto node = alloc::parseNode(*obj);
    if (!node) {
      continue;  // nothing fits on a node we cannot read
    }
    NodeCapacity c;
    c.cpuMilli = static_cast<std::uint64_t>(std::max<std::int64_t>(0, node->allocatable.milliCpu));
    c.memoryMiB =
        static_cast<std::uint64_t>(std::max<std::int64_t>(0, node->allocatable.memory)) >> 20;
    c.unschedulable = node->unschedulable;
    out.emplace(n.name, c);
  }
  return out;
}

Result<IdlePlan> PoolWorker::idlePlan(const std::vector<PodInfo>& pods) {
  const auto view = currentView();
  if (!view) {
    return IdlePlan{};
  }
  const PlanResult demand = demandPlan(*view, pods);
  const auto nodes = nodeCapacities();
  IdleInputs in;
  in.spec = &*spec_;
  in.view = &*view;
  in.pods = &pods;
  in.demand = &demand;
  in.nodes = &nodes;
  in.journal = &journal_;
  in.kind = sh_.recompose;
  in.gpuPolicy = sh_.policy;
  in.now = clock_.wallNow();
  in.defaultRuntime = sh_.opts.defaultRuntime;
  in.cooldown = sh_.opts.recomposeCooldown;
  return planIdle(in);
}

void PoolWorker::startBackground(const std::vector<PodInfo>& pods) {
  if (sh_.recompose == alloc::RecomposeKind::None || !movesGate_.allows(clock_.now()) ||
      journal_.active || !spec_ || clock_.now() < idlePauseUntil_) {
    return;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!inventory_ || inventoryError_) {
      return;
    }
    auto plan = idlePlan(pods);
    if (!plan) {
      if (idleError_ != plan.error().message) {
        idleError_ = plan.error().message;
        spdlog::warn("pool {}: idle-time plan: {}", name_, idleError_);
      }
      return;
    }
    idleError_.clear();
    if (!plan->next) {
      return;
    }
    // Moves are planned on a fresh inventory, as the demand planner's are.
    if (attempt == 0 && clock_.now() - lastRead_ > sh_.opts.planInventoryMaxAge) {
      readInventory();
      continue;
    }
    spdlog::info("pool {}: background move of GPU {} to {}: {} (plan: {} moves)", name_,
                 plan->next->gpu, plan->next->toNode, plan->next->reason, plan->planned.size());
    if (auto s = runner_.start(journal_, *plan->next); !s) {
      spdlog::warn("pool {}: cannot start the background move of GPU {}: {}", name_,
                   plan->next->gpu, s.error().message);
    }
    return;
  }
}

}  // namespace kc::reconfig
