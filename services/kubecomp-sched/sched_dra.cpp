// kubecomp-sched on the DRA path (docs/dra.md "kubecomp-sched"): pods that name ResourceClaims
// of driver gpu.kubecomp.io are placed by the same pool policy (Eq. 1, the queue policies), get
// their devices chosen here, and wait, as a reservation, for the binding conditions reconfig-mgr's
// attach controller answers.

#include <spdlog/spdlog.h>

#include <algorithm>

#include "libcore/api/dra_binding.hpp"
#include "libcore/base/error_codes.hpp"
#include "libcore/base/rfc3339.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

std::vector<std::string> classSelectors(const json& obj) {
  std::vector<std::string> out;
  const auto spec = obj.find("spec");
  if (spec == obj.end() || !spec->is_object()) {
    return out;
  }
  const auto sel = spec->find("selectors");
  if (sel == spec->end() || !sel->is_array()) {
    return out;
  }
  for (const auto& s : *sel) {
    if (s.is_object() && s.contains("cel") && s["cel"].is_object() &&
        s["cel"].value("expression", json()).is_string()) {
      out.push_back(s["cel"]["expression"].get<std::string>());
    }
  }
  return out;
}

}  // namespace

json SchedCache::ingestClaim(const json& obj) {
  json keep = detail::storeIdentity(obj);
  auto c = api::parseClaim(obj);
  std::lock_guard<std::mutex> lock(mu_);
  if (!c) {
    // A claim we cannot read is treated as absent: its pods wait, with the reason.
    const auto& m = keep["metadata"];
    spdlog::warn("ResourceClaim {}/{}: {}", m.value("namespace", ""), m.value("name", ""),
                 c.error().message);
    dra_.removeClaim(m.value("namespace", "") + "/" + m.value("name", ""));
  } else if (!dra_.setClaim(std::move(*c))) {
    return keep;
  }
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeClaim(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  if (dra_.removeClaim(key)) {
    reservationsDirty_ = !reservedByOrder_.empty();
    released_ = true;
    dirty_ = true;
    cv_.notify_all();
  }
}

json SchedCache::ingestDeviceClass(const json& obj) {
  json keep = detail::storeIdentity(obj);
  std::lock_guard<std::mutex> lock(mu_);
  dra_.setDeviceClass(keep["metadata"].value("name", ""), classSelectors(obj));
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeDeviceClass(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  dra_.removeDeviceClass(name);
  dirty_ = true;
  cv_.notify_all();
}

void SchedCache::applyClaimGpusLocked(PodInfo& pod) {
  if (!pod.pod.usesClaims) {
    return;
  }
  // The GPUs the pod's claims ask for, as far as the claims are known: a bound pod holds them
  // on its node in the model, as one asking them in its limits would.
  std::int64_t gpus = 0;
  for (const auto& ref : pod.claimRefs) {
    if (const api::Claim* c = dra_.claim(pod.ns + "/" + ref.claimName); c != nullptr) {
      for (const auto& r : c->requests) {
        gpus += r.all ? 0 : r.count;
      }
    }
  }
  if (!pod.draPicks.empty()) {
    gpus = static_cast<std::int64_t>(pod.draPicks.size());
  }
  pod.pod.claimGpus = gpus;
  pod.request = alloc::podRequests(pod.pod);
  pod.gpus = pod.request.scalarOr0(alloc::kGpuResource);
}

Action SchedCache::draRefusalLocked(PodInfo& pod, Action::Kind kind, std::string message,
                                    Clock::time_point now) {
  Action a = baseAction(pod, kind);
  a.message = std::move(message);
  backoffLocked(pod.key, now);
  return a;
}

void SchedCache::adoptDraAllocationLocked(PodInfo& pod, const DraDemand& d, Clock::time_point now) {
  // Allocated for this pod before (by this scheduler before a restart, or the previous
  // leader): wait for the binding conditions, the timeout counted from the allocation.
  pod.draPicks.clear();
  for (const api::Claim& c : d.claims) {
    for (const auto& dev : c.allocation->results) {
      pod.draPicks.push_back(DraPick{c.ns + "/" + c.name, dev, ""});
    }
  }
  applyClaimGpusLocked(pod);
  Reservation r;
  r.node = d.node;
  r.gpus = static_cast<std::uint32_t>(pod.draPicks.size());
  r.reservedAt = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  auto since = std::chrono::milliseconds(0);
  for (const api::Claim& c : d.claims) {
    if (auto t = parseRfc3339(c.allocation->allocationTimestamp); t && *t < r.reservedAt) {
      since =
          std::max(since, std::chrono::duration_cast<std::chrono::milliseconds>(r.reservedAt - *t));
    }
  }
  r.deadline = now + std::chrono::duration_cast<Clock::duration>(opts_.bindingTimeout - since);
  r.requested = true;
  r.order = nextOrder_++;
  setHoldLocked(pod, PodInfo::Hold::kReserved, {}, &r);
  reservationsDirty_ = true;
}

// Partly allocated (a write cut short): clear the allocations, then place the pod again.
Action SchedCache::draClearPartialLocked(PodInfo& pod, const DraDemand& d, Clock::time_point now) {
  Action a = draRefusalLocked(pod, Action::Kind::kCancel,
                              "some of the pod's claims were allocated and others not; the "
                              "allocations are cleared and the pod scheduled again",
                              now);
  for (const api::Claim& c : d.claims) {
    if (c.allocation) {
      a.clearClaims.push_back(c.ns + "/" + c.name);
    }
  }
  pod.clearing = true;
  return a;
}

std::optional<Action> SchedCache::decideDraLocked(PodInfo& pod, Clock::time_point now) {
  using V = DraDemand::Verdict;
  const DraDemand d = dra_.demand(pod.ns, pod.uid, pod.claimRefs, model_.draProbes());
  if (pod.clearing) {
    if (d.verdict == V::kAllocated || !d.message.empty()) {
      backoffLocked(pod.key, now);  // our clearing has not come back through the watch yet
      return std::nullopt;
    }
    pod.clearing = false;
  }
  switch (d.verdict) {
    case V::kWait:
    case V::kRefuse:
    case V::kNotOurs:
      return draRefusalLocked(pod, Action::Kind::kUnschedulable, d.message, now);
    case V::kAllocated:
      adoptDraAllocationLocked(pod, d, now);
      return std::nullopt;
    case V::kServe:
      break;
  }
  if (!d.message.empty()) {
    return draClearPartialLocked(pod, d, now);
  }
  pod.draPicks.clear();
  pod.pod.claimGpus = d.gpus;
  pod.request = alloc::podRequests(pod.pod);
  pod.gpus = d.gpus;
  Clock& clock = clockOr(opts_.clock);
  const auto t0 = clock.now();
  auto placed =
      alloc::placePod(pod.pod, model_.nodes(), model_.usage(), model_.state(), opts_.placement);
  std::vector<DraCandidate> local;
  std::vector<DraCandidate> remote;
  std::optional<Result<std::vector<DraPick>>> picks;
  if (placed) {
    model_.draCandidates(model_.nodes()[placed->node].name, &local, &remote);
    picks = dra_.pick(d.claims, local, remote,
                      [this](const std::string& key) { return draInflight_.count(key) != 0; });
  }
  decisions_.total += clock.now() - t0;
  ++decisions_.decisions;
  if (!placed) {
    // The DRA path does not preempt (docs/sched.md "Priority and preemption"): said so where
    // kube-scheduler's PostFilter text would stand.
    return draRefusalLocked(
        pod, Action::Kind::kUnschedulable,
        placed.error().code == kc::errc::kUnschedulable
            ? placed.error().message + " preemption: " + std::string(kDraNoPreemptionMessage)
            : "scheduler error: " + placed.error().message,
        now);
  }
  if (!*picks) {
    return draRefusalLocked(pod, Action::Kind::kUnschedulable, (*picks).error().message, now);
  }
  const std::string& node = model_.nodes()[placed->node].name;
  pod.draPicks = std::move(**picks);
  const auto fabric = static_cast<std::uint32_t>(
      std::count_if(pod.draPicks.begin(), pod.draPicks.end(),
                    [](const DraPick& p) { return !p.device.bindingConditions.empty(); }));
  if (fabric > 0) {
    if (auto wait = draReleaseWaitLocked(pod, d, local, remote, fabric, node, now)) {
      pod.draPicks.clear();
      return wait;
    }
  }
  Action a = baseAction(pod, Action::Kind::kAllocate);
  if (pod.gang.member()) {
    a.message = gangDraNotice(pod.gang, pod.ns);  // a GangNotCovered Event (executeAllocate)
  }
  a.node = node;
  a.picks = pod.draPicks;
  a.deficit = fabric;
  a.bindNow = fabric == 0;
  if (a.bindNow) {
    setHoldLocked(pod, PodInfo::Hold::kAssumed, node);
    pod.started = now;
    return a;
  }
  Reservation r;
  r.node = node;
  r.gpus = static_cast<std::uint32_t>(pod.draPicks.size());
  r.deficit = fabric;
  r.deadline = now + opts_.bindingTimeout;
  r.reservedAt = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  r.requested = false;
  r.order = nextOrder_++;
  setHoldLocked(pod, PodInfo::Hold::kReserved, {}, &r);
  a.reservedAt = r.reservedAt;
  return a;
}

bool SchedCache::claimReleasingLocked(const api::Claim& c, Clock::time_point now) const {
  if (!c.allocation || c.reservedFor.empty()) {
    return false;  // unreserved: an allocation being made, or one nobody will let go of
  }
  for (const auto& r : c.reservedFor) {
    std::optional<Clock::time_point> ended;
    if (auto p = pods_.find(c.ns + "/" + r.name); p != pods_.end() && p->second->uid == r.uid) {
      ended = p->second->ended;
    } else if (auto g = goneClaimPods_.find(r.uid); g != goneClaimPods_.end()) {
      ended = g->second;
    }
    if (r.resource != "pods" || !ended || now - *ended >= opts_.draReleaseWait) {
      return false;
    }
  }
  return true;
}

std::optional<Action> SchedCache::draReleaseWaitLocked(PodInfo& pod, const DraDemand& d,
                                                       const std::vector<DraCandidate>& local,
                                                       const std::vector<DraCandidate>& remote,
                                                       std::uint32_t fabric,
                                                       const std::string& node,
                                                       Clock::time_point now) {
  const std::set<std::string> soon =
      dra_.freeSoon([&](const api::Claim& c) { return claimReleasingLocked(c, now); });
  if (soon.empty()) {
    return std::nullopt;
  }
  auto alt = dra_.pick(
      d.claims, local, remote,
      [this](const std::string& key) { return draInflight_.count(key) != 0; }, &soon);
  if (!alt) {
    return std::nullopt;
  }
  const auto altFabric =
      static_cast<std::uint32_t>(std::count_if(alt->begin(), alt->end(), [](const DraPick& p) {
        return !p.device.bindingConditions.empty();
      }));
  if (altFabric >= fabric) {
    return std::nullopt;
  }
  return draRefusalLocked(
      pod, Action::Kind::kUnschedulable,
      "waiting for " + std::to_string(fabric - altFabric) + " device(s) on " + node +
          " that ResourceClaims of finished pods still hold, rather than moving " +
          std::to_string(fabric - altFabric) + " GPU(s) there (such claims are deallocated " +
          "once their pods are done)",
      now);
}

std::optional<std::uint32_t> SchedCache::draFreedOnNodeLocked(const PodInfo& pod) {
  // The picks still waiting for an attach, and the ones the pod already has on the node (its
  // node-local picks and attached ones), which an allocation made again would keep.
  std::set<std::string> own;
  std::vector<api::Claim> claims;
  std::set<std::string> claimKeys;
  std::uint32_t pending = 0;
  for (const DraPick& p : pod.draPicks) {
    const api::Claim* c = dra_.claim(p.claim);
    if (c == nullptr || !c->allocation) {
      return std::nullopt;
    }
    if (claimKeys.insert(p.claim).second) {
      claims.push_back(*c);
    }
    const bool waits = !p.device.bindingConditions.empty() &&
                       api::bindingState(*c, p.device) == api::BindingState::kWaiting;
    if (waits) {
      ++pending;
    } else {
      own.insert(deviceKey(p.device.pool, p.device.device));
    }
  }
  if (pending == 0) {
    return std::nullopt;
  }
  std::vector<DraCandidate> local;
  std::vector<DraCandidate> remote;
  model_.draCandidates(pod.reservation.node, &local, &remote);
  const std::set<std::string> mine(pod.heldDevices.begin(), pod.heldDevices.end());
  auto alt = dra_.pick(
      claims, local, {},
      [&](const std::string& key) {
        auto it = draInflight_.find(key);
        return it != draInflight_.end() && it->second > (mine.count(key) != 0 ? 1 : 0);
      },
      &own);
  if (!alt) {
    return std::nullopt;
  }
  return pending;
}

std::optional<Action> SchedCache::checkDraReservationLocked(PodInfo& pod, Clock::time_point now) {
  const Reservation& r = pod.reservation;
  std::set<std::string> claims;
  for (const DraPick& p : pod.draPicks) {
    claims.insert(p.claim);
  }
  auto cancel = [&](std::string message) {
    Action a = baseAction(pod, Action::Kind::kCancel);
    a.node = r.node;
    a.message = std::move(message);
    a.clearClaims.assign(claims.begin(), claims.end());
    return a;
  };
  if (now >= r.deadline) {
    return cancel(
        "the binding conditions of the pod's devices were not all True within " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(opts_.bindingTimeout).count()) +
        "s of the allocation; the allocation is cleared and the pod scheduled again");
  }
  if (!r.requested) {
    return std::nullopt;  // the allocation is still being written
  }
  bool waiting = false;
  for (const std::string& key : claims) {
    const api::Claim* c = dra_.claim(key);
    if (c == nullptr) {
      return cancel("ResourceClaim " + key + " is gone; the pod is scheduled again");
    }
    if (!c->allocation) {
      waiting = true;  // our write has not come back through the watch yet
      continue;
    }
    for (const auto& d : c->allocation->results) {
      switch (api::bindingState(*c, d)) {
        case api::BindingState::kFailed: {
          std::string why;
          for (const auto& f : d.bindingFailureConditions) {
            if (const auto* cond = c->condition(d, f); cond != nullptr && cond->status == "True") {
              why = f + " (" + cond->reason + (cond->message.empty() ? "" : ": " + cond->message) +
                    ")";
            }
          }
          return cancel("device " + d.device + " of ResourceClaim " + key + " failed to bind: " +
                        why + "; the allocation is cleared and the pod scheduled again");
        }
        case api::BindingState::kWaiting:
          waiting = true;
          break;
        case api::BindingState::kNone:
        case api::BindingState::kAttached:
          break;
      }
    }
  }
  if (waiting) {
    if (auto freed = draFreedOnNodeLocked(pod)) {
      return cancel(std::to_string(*freed) + " device(s) of node " + r.node +
                    " became free while the pod waited for GPUs to be attached; the allocation "
                    "is cleared and made again with the node's own devices");
    }
    return std::nullopt;
  }
  Action a = baseAction(pod, Action::Kind::kBind);
  a.node = r.node;
  return a;
}

void SchedCache::allocateDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  PodInfo* p = findLocked(key);
  if (p == nullptr) {
    return;
  }
  if (ok) {
    if (p->reserved()) {
      p->reservation.requested = true;
      reservationsDirty_ = true;
      dirty_ = true;
      cv_.notify_all();
    }
    return;
  }
  setHoldLocked(*p, PodInfo::Hold::kNone);
  p->draPicks.clear();
  backoffLocked(key, now);
  dirty_ = true;
  cv_.notify_all();
}

}  // namespace kc::sched
