// kubecomp-sched's decisions (the leader's loop): the reservations waiting for reconfig-mgr
// checked oldest first, then the queue, each pod decided with alloc::placePod (the backfill
// queue policy; the others run their pass in sched_queue.cpp).

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iterator>
#include <thread>
#include <utility>

#include "libcore/alloc/node_filter.hpp"
#include "services/kubecomp-sched/reservation_supply.hpp"
#include "services/kubecomp-sched/sched_cache.hpp"

namespace kc::sched {
namespace {

std::int64_t gpuOf(const alloc::Resources& r) {
  return r.scalarOr0(alloc::kGpuResource);
}

}  // namespace

Action SchedCache::baseAction(const PodInfo& pod, Action::Kind kind) const {
  Action a;
  a.kind = kind;
  a.key = pod.key;
  a.ns = pod.ns;
  a.name = pod.name;
  a.uid = pod.uid;
  a.gpus = static_cast<std::uint32_t>(std::max<std::int64_t>(0, pod.gpus));
  a.firstSeen = pod.firstSeen.value_or(Clock::time_point{});
  return a;
}

void SchedCache::adoptReservationLocked(PodInfo& pod, Clock::time_point now,
                                        std::vector<Action>* out) {
  auto request = api::parseReconfigRequest(pod.reconfig);
  if (!request) {
    Action a = baseAction(pod, Action::Kind::kInvalid);
    a.message = request.error().message +
                "; the reconfiguration request is removed and the pod scheduled again";
    a.clearAnnotations = true;
    out->push_back(std::move(a));
    pod.clearing = true;
    backoffLocked(pod.key, now);
    return;
  }
  Reservation r;
  r.node = request->dstNode;
  r.gpus = static_cast<std::uint32_t>(std::max<std::int64_t>(0, pod.gpus));
  r.deficit = request->demand;
  const auto wall = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  r.reservedAt = wall;
  if (request->reservedAt) {
    r.reservedAt = *request->reservedAt;
    if (r.reservedAt > wall + kReservedAtSkew) {
      spdlog::warn(
          "pod {}: annotation {} {} is {} ms ahead of this clock (more than the {} s allowed for "
          "clock "
          "skew); its reservation's timeout starts now",
          pod.key, kReservedAtAnnotation, *pod.reconfig.reservedAt,
          std::chrono::duration_cast<std::chrono::milliseconds>(r.reservedAt - wall).count(),
          kReservedAtSkew.count());
      r.reservedAt = wall;
    }
  }
  // The timeout continues from the request's time: what is left of it on this clock (none, if it
  // has run out: the next pass cancels the request).
  r.deadline = now + std::chrono::duration_cast<Clock::duration>(opts_.reservationTimeout -
                                                                 (wall - r.reservedAt));
  r.requested = true;
  r.order = nextOrder_++;
  setHoldLocked(pod, PodInfo::Hold::kReserved, {}, &r);
  reservationsDirty_ = true;
}

std::optional<Action> SchedCache::checkReservationLocked(PodInfo& pod, Clock::time_point now) {
  if (pod.pod.usesClaims) {
    return checkDraReservationLocked(pod, now);
  }
  const Reservation& r = pod.reservation;
  auto cancel = [&](std::string message) {
    Action a = baseAction(pod, Action::Kind::kCancel);
    a.node = r.node;
    a.message = std::move(message);
    return a;
  };
  bool volumesPending = false;
  if (auto v = checkVolumesLocked(pod, now, volumesPending)) {
    return v;  // a volume binding failed, or the wait for the claims timed out
  }
  if (now >= r.deadline) {
    return cancel(
        "node " + r.node + " did not show the " + std::to_string(r.gpus) +
        " kubecomp.io/gpu the pod needs within " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(opts_.reservationTimeout).count()) +
        "s of the reconfiguration request; trying again");
  }
  auto n = model_.indexOf(r.node);
  if (!n) {
    return cancel("node " + r.node + " of the reconfiguration request is gone; trying again");
  }
  const std::size_t i = *n;
  // The node without this pod's own reservation: does it still pass the filters?
  alloc::NodeUsage others = model_.usage()[i];
  alloc::removePodUsage(others, pod.request);
  // Reservations on the node are served in the order they were made: a later one does not
  // hold GPUs (or CPU) against this one.
  for (auto later = reservedByOrder_.upper_bound(r.order); later != reservedByOrder_.end();
       ++later) {
    const PodInfo* other = findLocked(later->second);
    if (other != nullptr && other->reservation.node == r.node) {
      alloc::removePodUsage(others, other->request);
    }
  }
  alloc::FilterOptions filter = opts_.placement.filter;
  filter.fit.ignoredResources.emplace(alloc::kGpuResource);
  // InterPodAffinity and PodTopologySpread count over the whole cluster (a topology domain
  // spans nodes), not over the one node checked here.
  alloc::PreparedFilters prepared;
  alloc::prepareFilters(pod.pod, model_.nodes(), filter, prepared);
  auto result =
      alloc::filterNodes(pod.pod, std::span<const alloc::SchedNode>(&model_.nodes()[i], 1),
                         std::span<const alloc::NodeUsage>(&others, 1), filter);
  if (!result || result->feasible.empty()) {
    return cancel("node " + r.node + " can no longer run the pod (" +
                  (result ? (result->rejected.empty() ? std::string("?")
                                                      : result->rejected.front().reasons.front())
                          : result.error().message) +
                  "); trying again");
  }
  // GPUs: visible on the node minus what the others there hold, counted over accepted models.
  const std::int64_t othersHeld = gpuOf(others.requested);
  std::int64_t visible = model_.visibleGpus(i);
  if (!pod.pod.gpuModels.acceptsAny()) {
    std::int64_t accepted = 0;
    const alloc::ClusterState& state = model_.state();
    for (alloc::GpuIndex g : state.nodeGpus(static_cast<alloc::NodeIndex>(i))) {
      const auto& gpu = state.gpu(g);
      // Visible = healthy, not draining in the inventory, advertised (counted in visible).
      if (gpu.healthy && !model_.inventoryDraining(g) && pod.pod.gpuModels.accepts(gpu.model)) {
        ++accepted;
      }
    }
    visible = std::min(visible, accepted);
  }
  if (visible - othersHeld < static_cast<std::int64_t>(r.gpus)) {
    // Still waiting for reconfig-mgr and kubelet, unless the pool shrank below what it needs
    // (reservation_supply.hpp): this pod and the later reservations do not count against it.
    const PoolSupply supply = poolSupply(model_, r.node, pod.pod.gpuModels);
    std::int64_t heldByLater = gpuOf(pod.request);
    for (auto later = reservedByOrder_.upper_bound(r.order); later != reservedByOrder_.end();
         ++later) {
      const PodInfo* other = findLocked(later->second);
      if (other != nullptr && poolOfNode(model_, other->reservation.node) == supply.pool) {
        heldByLater += gpuOf(other->request);
      }
    }
    if (auto why = unservableReservation(supply, r.node, r.gpus, heldByLater, pod.pod.gpuModels)) {
      return cancel(std::move(*why));
    }
    return std::nullopt;
  }
  if (volumesPending) {
    return std::nullopt;  // kube-scheduler's PreBind: the pod's claims are not all bound yet
  }
  Action a = baseAction(pod, Action::Kind::kBind);
  a.node = r.node;
  return a;
}

std::optional<Action> SchedCache::decideLocked(PodInfo& pod, Clock::time_point now) {
  holdNominatedLocked(pod);
  std::optional<Action> a = decidePodLocked(pod, now);
  releaseNominatedLocked(pod);
  return a;
}

std::optional<Action> SchedCache::decidePodLocked(PodInfo& pod, Clock::time_point now) {
  if (!pod.invalid.empty()) {
    // Reported once per distinct problem (our own status write comes back as an update).
    if (pod.invalidReported == pod.invalid) {
      return std::nullopt;
    }
    pod.invalidReported = pod.invalid;
    Action a = baseAction(pod, Action::Kind::kInvalid);
    a.message = "pod cannot be scheduled: " + pod.invalid;
    return a;
  }
  pod.invalidReported.clear();
  if (pod.pod.usesClaims) {
    return decideDraLocked(pod, now);
  }
  if (pod.reconfig.present() && !pod.clearing) {
    // A request made earlier (by us before a restart, or by the previous leader): adopt it,
    // send nothing again.
    std::vector<Action> out;
    adoptReservationLocked(pod, now, &out);
    if (!out.empty()) {
      return std::move(out.front());
    }
    return std::nullopt;
  }
  if (std::optional<Action> g; pod.gang.member() && decideGangLocked(pod, now, g)) {
    return g;  // its gang decided as one unit (sched_gang.cpp)
  }
  Clock& clock = clockOr(opts_.clock);
  const auto t0 = clock.now();
  auto placed = placeNominatedFirstLocked(pod);
  decisions_.total += clock.now() - t0;
  ++decisions_.decisions;
  if (!placed) {
    Action a = baseAction(pod, Action::Kind::kUnschedulable);
    a.message = placed.error().code == kc::errc::kUnschedulable
                    ? placed.error().message
                    : "scheduler error: " + placed.error().message;
    if (placed.error().code == kc::errc::kUnschedulable) {
      preemptLocked(pod, a, now);  // fits nowhere even with GPUs moved: preempt lower priority
    }
    backoffLocked(pod.key, now);
    return a;
  }
  const std::string& node = model_.nodes()[placed->node].name;
  VolumeWrites volumeWrites;
  const bool waitVolumes = planVolumesLocked(pod, node, now, volumeWrites);
  if (placed->deficit == 0 && !waitVolumes) {
    Action a = baseAction(pod, Action::Kind::kBind);
    a.node = node;
    setHoldLocked(pod, PodInfo::Hold::kAssumed, node);
    pod.started = now;
    return a;
  }
  Reservation r;
  r.node = node;
  r.gpus = placed->gpus;
  r.deficit = placed->deficit;
  r.deadline = now + opts_.reservationTimeout;
  if (waitVolumes) {
    // The node is held while the claims are bound (and the GPUs moved, if any).
    r.deadline = std::min(r.deadline, pod.volumeWait.deadline);
  }
  r.reservedAt = std::chrono::floor<std::chrono::milliseconds>(wallNow());
  r.requested = false;
  r.order = nextOrder_++;
  setHoldLocked(pod, PodInfo::Hold::kReserved, {}, &r);
  Action a =
      baseAction(pod, placed->deficit > 0 ? Action::Kind::kReserve : Action::Kind::kBindVolumes);
  a.node = node;
  a.deficit = placed->deficit;
  a.reservedAt = r.reservedAt;
  a.volumeWrites = std::move(volumeWrites);
  return a;
}

std::vector<Action> SchedCache::next(Clock::time_point now, std::size_t max) {
  std::unique_lock<std::mutex> lock(mu_);
  dirty_ = false;
  std::vector<Action> out;
  if (!leading_) {
    return out;
  }
  model_.refresh();
  // Backoffs that ran out go back to the queue; after a release, every backing-off pod does
  // (its attempt count stays, so a pod that still does not fit backs off longer).
  queue_.release(now, std::exchange(released_, false),
                 [&](const std::string& key) -> std::optional<SchedulingQueue::Order> {
                   const PodInfo* p = findLocked(key);
                   if (p == nullptr || !p->pending()) {
                     return std::nullopt;
                   }
                   return p->queueOrder();
                 });
  const bool reservationBound = serveReservationsLocked(now, out);
  if (opts_.queue.discipline != alloc::QueueDiscipline::Backfill) {
    // A head that waited for its GPUs has started: the pods held behind it are retried now.
    if (reservationBound) {
      queue_.release(now, true,
                     [&](const std::string& key) -> std::optional<SchedulingQueue::Order> {
                       const PodInfo* p = findLocked(key);
                       if (p == nullptr) {
                         return std::nullopt;
                       }
                       return p->queueOrder();
                     });
    }
    if (!queue_.empty()) {
      queuePassLocked(now, out);
    }
    std::move(gangActions_.begin(), gangActions_.end(), std::back_inserter(out));
    gangActions_.clear();
    if (reservationsDirty_) {
      dirty_ = true;
    }
    return out;
  }
  // Then the queue, in queue order (priority, then FCFS). The lock is let go between two
  // decisions so that the informers' updates are not held up behind a whole batch.
  for (bool first = true; out.size() < max && !queue_.empty(); first = false) {
    if (!first) {
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
      if (!leading_ || queue_.empty()) {
        break;
      }
    }
    PodInfo* pod = findLocked(*queue_.pop());
    if (pod == nullptr || !pod->ours || pod->bound() || pod->deleting ||
        pod->hold != PodInfo::Hold::kNone) {
      continue;
    }
    model_.refresh();
    if (auto a = decideLocked(*pod, now)) {
      out.push_back(std::move(*a));
    }
    std::move(gangActions_.begin(), gangActions_.end(), std::back_inserter(out));
    gangActions_.clear();
  }
  if (!queue_.empty() || reservationsDirty_) {
    dirty_ = true;
  }
  return out;
}

bool SchedCache::serveReservationsLocked(Clock::time_point now, std::vector<Action>& out) {
  // Reservations, oldest first.
  bool deadlinePassed = false;
  for (const auto& [order, key] : reservedByOrder_) {
    const PodInfo* p = findLocked(key);
    deadlinePassed = deadlinePassed || (p != nullptr && p->reservation.deadline <= now);
  }
  if (!reservationsDirty_ && !deadlinePassed) {
    return false;
  }
  reservationsDirty_ = false;
  std::vector<std::string> keys;
  for (const auto& [order, key] : reservedByOrder_) {
    keys.push_back(key);
  }
  bool bound = false;
  for (const std::string& key : keys) {
    PodInfo* p = findLocked(key);
    if (p == nullptr || !p->reserved() || gangHeldLocked(*p)) {
      continue;  // a gang's reservations are served together, below
    }
    model_.refresh();
    auto a = checkReservationLocked(*p, now);
    if (!a) {
      continue;
    }
    if (a->kind == Action::Kind::kBind) {
      setHoldLocked(*p, PodInfo::Hold::kAssumed, a->node);
      p->started = now;
      bound = true;
    } else {
      setHoldLocked(*p, PodInfo::Hold::kNone);
      backoffLocked(key, now);
      p->clearing = true;
    }
    out.push_back(std::move(*a));
  }
  model_.refresh();
  return serveGangsLocked(now, out) || bound;
}

Clock::time_point SchedCache::nextWake(Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  Clock::time_point wake = queue_.nextWake(now + std::chrono::seconds(1));
  for (const auto& [order, key] : reservedByOrder_) {
    if (auto p = pods_.find(key); p != pods_.end()) {
      wake = std::min(wake, p->second->reservation.deadline);
    }
  }
  return wake;
}

void SchedCache::bindDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    return;  // the assumption stands until the watch shows the pod bound
  }
  if (PodInfo* p = findLocked(key); p != nullptr && p->assumed()) {
    setHoldLocked(*p, PodInfo::Hold::kNone);
  }
  backoffLocked(key, now);
  dirty_ = true;
  cv_.notify_all();
}

void SchedCache::reserveDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  PodInfo* p = findLocked(key);
  if (p == nullptr || !p->reserved()) {
    return;
  }
  if (ok) {
    p->reservation.requested = true;
    return;
  }
  setHoldLocked(*p, PodInfo::Hold::kNone);
  backoffLocked(key, now);
  dirty_ = true;
  cv_.notify_all();
}

}  // namespace kc::sched
