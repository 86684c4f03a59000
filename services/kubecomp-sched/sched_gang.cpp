// kubecomp-sched's gangs (docs/sched.md "Gangs"): the pods of a PodGroup or a Kueue pod group
// decided as one unit with alloc::GangPlanner, reserved together, bound together once every
// member's node shows its GPUs, released together on a timeout.
//
// A gang member popped from the queue decides its whole gang (decideGangLocked): the members
// still to place (minMember minus those bound, assumed or reserved) are planned at once; all
// are bound at once when no GPU has to move and no member holds a reservation, else all are
// reserved (the ones whose GPUs move get the reconfiguration request; the others wait in the
// cache) and serveGangsLocked binds every reserved member in one pass when the reservations
// make up the gang and every member's node shows its GPUs, or cancels every reservation when
// one member's node is lost, a member goes, or the gang's timeout passes. As scheduler-plugins'
// coscheduling counts a group's assigned pods, members bound earlier (before a restart, or bound
// while the rest waited) and reservations adopted after a restart count toward minMember: only
// the members still missing are planned, on top of them. The queue order is the pods' order, so
// gangs are taken by their earliest member, and a gang that does not fit takes nothing.

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "services/kubecomp-sched/sched_cache.hpp"

namespace kc::sched {
namespace {

std::string gangName(const PodInfo& pod) {
  return pod.ns + "/" + pod.gang.name;
}

std::string gangTitle(const PodInfo& pod) {
  return pod.gang.kind == GangRef::Kind::kPodGroup ? "PodGroup " + gangName(pod)
                                                   : "Kueue pod group " + gangName(pod);
}

// The action for the pod being decided goes to `out`, the other members' to `others`.
void emitGangAction(bool own, Action a, std::optional<Action>& out, std::vector<Action>& others) {
  if (own) {
    out = std::move(a);
  } else {
    others.push_back(std::move(a));
  }
}

bool holdsPlace(const PodInfo& p) {
  if (p.bound()) {
    return p.pod.phase != "Succeeded" && p.pod.phase != "Failed";
  }
  return p.assumed();
}

}  // namespace

nlohmann::json SchedCache::ingestPodGroup(const nlohmann::json& obj) {
  nlohmann::json keep = detail::storeIdentity(obj);
  auto read = readPodGroup(obj);
  if (!read) {
    return keep;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (!read->second.invalid.empty()) {
    spdlog::warn("PodGroup {}: {}; its pods wait", read->first.substr(3), read->second.invalid);
  }
  gangs_.setPodGroup(read->first, std::move(read->second));
  released_ = true;  // members waiting for it are tried at once
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removePodGroup(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  gangs_.removePodGroup("pg:" + key);
  dirty_ = true;
  cv_.notify_all();
}

SchedCache::GangCount SchedCache::gangCountLocked(const PodInfo& pod) {
  GangCount c;
  for (const std::string& key : gangs_.members(pod.gang.key)) {
    PodInfo* m = findLocked(key);
    if (m == nullptr || !m->ours || m->deleting || m->gang.key != pod.gang.key ||
        m->pod.usesClaims) {
      continue;  // a ResourceClaim pod is scheduled on its own (gangDraNotice)
    }
    if (holdsPlace(*m)) {
      ++c.placed;
    } else if (m->reserved()) {
      c.reserved.push_back(m);
    } else if (m->pending()) {
      c.waiting.push_back(m);
    }
  }
  auto fcfs = [](const PodInfo* a, const PodInfo* b) { return a->queueOrder() < b->queueOrder(); };
  std::sort(c.waiting.begin(), c.waiting.end(), fcfs);
  std::sort(c.reserved.begin(), c.reserved.end(), fcfs);
  return c;
}

bool SchedCache::gangHeldLocked(PodInfo& pod) {
  if (!pod.gang.member() || !pod.reserved() || pod.pod.usesClaims) {
    return false;  // a ResourceClaim pod's reservation is served on its own (gangDraNotice)
  }
  auto rule = gangs_.rule(pod.gang);
  if (!rule) {
    return true;  // its PodGroup went away: served with the gang (cancelled there)
  }
  return gangCountLocked(pod).placed < rule->minMember;
}

bool SchedCache::decideGangLocked(PodInfo& pod, Clock::time_point now, std::optional<Action>& out) {
  auto refuse = [&](std::string message) {
    Action a = baseAction(pod, Action::Kind::kUnschedulable);
    a.message = std::move(message);
    backoffLocked(pod.key, now);
    out = std::move(a);
    return true;
  };
  if (!pod.gang.invalid.empty()) {
    return refuse("pod cannot be scheduled: " + pod.gang.invalid);
  }
  auto rule = gangs_.rule(pod.gang);
  if (!rule) {
    return refuse("waiting for " + gangTitle(pod) +
                  ": no such PodGroup (scheduling.x-k8s.io/v1alpha1) is known");
  }
  if (!rule->invalid.empty()) {
    return refuse(gangTitle(pod) + " cannot be used: " + rule->invalid);
  }
  GangCount c = gangCountLocked(pod);
  if (c.placed >= rule->minMember) {
    return false;  // the quorum runs: a further member is scheduled on its own
  }
  // Bound, assumed and reserved members (reservations adopted after a restart included) count
  // toward minMember; only the rest is planned.
  const auto held = static_cast<std::uint32_t>(c.placed + c.reserved.size());
  if (held >= rule->minMember) {
    // The reservations make up the gang (serveGangsLocked binds them together); this member
    // beyond the quorum is scheduled on its own once they are bound.
    return refuse(gangTitle(pod) + ": its minMember " + std::to_string(rule->minMember) +
                  " pods are placed or reserved; this pod is scheduled once they are bound");
  }
  const std::uint32_t need = rule->minMember - held;
  if (c.waiting.size() < need) {
    return refuse(gangTitle(pod) + ": " + std::to_string(c.waiting.size() + held) +
                  " of its minMember " + std::to_string(rule->minMember) +
                  " pods exist; waiting for the others before any is placed");
  }
  c.waiting.resize(need);
  if (std::find(c.waiting.begin(), c.waiting.end(), &pod) == c.waiting.end()) {
    enqueueLocked(pod);  // a member beyond the quorum: scheduled on its own once the gang runs
    return true;
  }
  std::vector<const alloc::SchedPod*> members;
  for (const PodInfo* m : c.waiting) {
    members.push_back(&m->pod);
  }
  Clock& clock = clockOr(opts_.clock);
  const auto t0 = clock.now();
  alloc::GangOptions gopts;
  gopts.placement = opts_.placement;
  gopts.moveTime = std::chrono::duration_cast<std::chrono::milliseconds>(opts_.moveTime).count();
  auto plan = gangPlanner_.plan(members, model_.nodes(), model_.usage(), model_.state(), gopts);
  decisions_.total += clock.now() - t0;
  decisions_.decisions += members.size();
  if (!plan) {
    std::string why =
        gangTitle(pod) + " (" + std::to_string(need) + " pods together): " + plan.error().message;
    if (plan.error().code == kc::errc::kInsufficient) {
      why += "; it can never run on this cluster";
    }
    for (PodInfo* m : c.waiting) {
      Action a = baseAction(*m, Action::Kind::kUnschedulable);
      a.message = why;
      backoffLocked(m->key, now);
      emitGangAction(m == &pod, std::move(a), out, gangActions_);
    }
    return true;
  }
  applyGangPlanLocked(pod, c.waiting, *plan, rule->timeout, now, out);
  return true;
}

void SchedCache::applyGangPlanLocked(PodInfo& pod, const std::vector<PodInfo*>& members,
                                     const alloc::GangPlan& plan,
                                     std::optional<std::chrono::seconds> timeout,
                                     Clock::time_point now, std::optional<Action>& out) {
  // Reserved, not bound, when a GPU moves or when members reserved earlier (adopted after a
  // restart) are still to bind: the gang binds as one, in serveGangsLocked.
  const bool moves = std::any_of(plan.placements.begin(), plan.placements.end(),
                                 [](const auto& p) { return p.deficit > 0; }) ||
                     !gangCountLocked(pod).reserved.empty();
  auto limit = opts_.reservationTimeout;
  if (timeout) {
    limit = std::min<std::chrono::milliseconds>(limit, *timeout);
  }
  const auto wall = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  for (const alloc::GangMemberPlacement& at : plan.placements) {
    PodInfo& m = *members[at.member];
    const std::string& node = model_.nodes()[at.node].name;
    queue_.forget(m.key);
    Action a;
    if (!moves) {
      // Every member fits where it is placed: all are bound now, together.
      a = baseAction(m, Action::Kind::kBind);
      a.node = node;
      setHoldLocked(m, PodInfo::Hold::kAssumed, node);
      m.started = now;
    } else {
      Reservation r;
      r.node = node;
      r.gpus = at.gpus;
      r.deficit = at.deficit;
      r.deadline = now + limit;
      r.reservedAt = wall;
      r.order = nextOrder_++;
      setHoldLocked(m, PodInfo::Hold::kReserved, {}, &r);
      if (at.deficit > 0) {
        a = baseAction(m, Action::Kind::kReserve);
        a.node = node;
        a.deficit = at.deficit;
        a.reservedAt = wall;
      } else {
        a = baseAction(m, Action::Kind::kQueued);
        a.node = node;
        a.head = gangName(pod);
        a.message = "waiting for " + gangTitle(pod) + ": node " + node +
                    " is held for this pod until the GPUs of the gang's other members are moved";
      }
    }
    emitGangAction(&m == &pod, std::move(a), out, gangActions_);
  }
  if (moves) {
    reservationsDirty_ = true;
    spdlog::info(
        "{}: {} pods reserved, {} GPU moves planned together (estimated {} ms on the "
        "fabric, {} ms one after another)",
        gangTitle(pod), members.size(), plan.moves.size(), plan.ready, plan.serialReady);
  }
}

bool SchedCache::serveGangsLocked(Clock::time_point now, std::vector<Action>& out) {
  // The gangs with reservations, each once.
  std::map<std::string, PodInfo*> gangs;
  for (const auto& [order, key] : reservedByOrder_) {
    PodInfo* p = findLocked(key);
    if (p != nullptr && gangHeldLocked(*p)) {
      gangs.emplace(p->gang.key, p);
    }
  }
  bool bound = false;
  for (const auto& [gangKey, any] : gangs) {
    PodInfo& first = *any;
    const GangCount c = gangCountLocked(first);
    const auto rule = gangs_.rule(first.gang);
    std::string cancel;
    if (!rule) {
      cancel = gangTitle(first) + " is gone";
    } else if (c.placed + c.reserved.size() + c.waiting.size() < rule->minMember) {
      // Members waiting to be planned do not cancel the reservations (after a restart the
      // missing members are planned on top of the adopted ones); fewer than minMember do.
      cancel = gangTitle(first) + " has " +
               std::to_string(c.placed + c.reserved.size() + c.waiting.size()) +
               " of its minMember " + std::to_string(rule->minMember) +
               " pods placed, reserved or waiting (a member went)";
    }
    std::vector<Action> binds;
    for (PodInfo* m : c.reserved) {
      if (!cancel.empty()) {
        break;
      }
      if (now >= m->reservation.deadline) {
        const auto secs = [](auto d) {
          return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count());
        };
        cancel =
            gangTitle(first) + ": not every member's node showed its GPUs within " +
            (rule->timeout ? "its scheduleTimeoutSeconds (" + secs(*rule->timeout) + " s)"
                           : "the reservation timeout (" + secs(opts_.reservationTimeout) + " s)");
        break;
      }
      auto a = checkReservationLocked(*m, now);
      if (a && a->kind == Action::Kind::kBind) {
        binds.push_back(std::move(*a));
      } else if (a) {
        cancel = gangTitle(first) + ": member " + m->key + ": " + a->message;
      }
    }
    if (!cancel.empty()) {
      for (PodInfo* m : c.reserved) {
        Action a = baseAction(*m, Action::Kind::kCancel);
        a.node = m->reservation.node;
        a.message = cancel + "; all " + std::to_string(c.reserved.size()) +
                    " reservations of the gang are released; trying again";
        m->clearing = m->reservation.deficit > 0;  // its request annotations go
        setHoldLocked(*m, PodInfo::Hold::kNone);
        backoffLocked(m->key, now);
        out.push_back(std::move(a));
      }
      continue;
    }
    if (binds.size() != c.reserved.size() || c.placed + c.reserved.size() < rule->minMember) {
      continue;  // some member's GPUs are still moving, or members are still to be planned
    }
    for (std::size_t i = 0; i < binds.size(); ++i) {
      setHoldLocked(*c.reserved[i], PodInfo::Hold::kAssumed, binds[i].node);
      c.reserved[i]->started = now;
      out.push_back(std::move(binds[i]));
    }
    bound = true;
  }
  return bound;
}

}  // namespace kc::sched
