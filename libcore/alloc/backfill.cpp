#include "libcore/alloc/backfill.hpp"

#include <algorithm>
#include <string>

namespace kc::alloc {
namespace {

Error tooLate() {
  return makeError(kc::errc::kInvalid, "reservation time overflows int64");
}

// max(at, busyUntil) + deficit x moveTime, checked: the paper's serial fabric.
Result<std::int64_t> startAfterMoves(std::int64_t at, std::int64_t busyUntil, std::uint32_t deficit,
                                     std::int64_t moveTime) {
  if (deficit == 0) {
    return at;
  }
  std::int64_t moving = 0;
  std::int64_t start = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(deficit), moveTime, &moving) ||
      __builtin_add_overflow(std::max(at, busyUntil), moving, &start)) {
    return tooLate();
  }
  return start;
}

Status checkFabric(const ClusterState& state, const FabricClock& fabric) {
  if (fabric.busyUntil.size() != state.poolCount()) {
    return makeError(kc::errc::kInvalid,
                     "fabric clock has " + std::to_string(fabric.busyUntil.size()) +
                         " pools, the cluster " + std::to_string(state.poolCount()));
  }
  if (!fabric.booked.empty() && fabric.booked.size() != state.poolCount()) {
    return makeError(kc::errc::kInvalid,
                     "fabric clock books moves for " + std::to_string(fabric.booked.size()) +
                         " pools, the cluster has " + std::to_string(state.poolCount()));
  }
  return okStatus();
}

// When the `deficit` GPUs `choice` needs at `instant` have landed on its node: serial, the
// paper's formula; parallel, the schedule of the GPUs the policy would move then (on `state`
// as it is at that instant).
Result<std::int64_t> landedAt(const ClusterState& state, const FabricClock& fabric,
                              const PlacementRules& rules, const NodeChoice& choice,
                              const GpuModelFilter& models, std::int64_t instant) {
  const PoolIndex pool = state.node(choice.node).pool;
  if (choice.deficit == 0 || pool == kNoPool || rules.moves == kSerialMoves) {
    const std::int64_t busy = pool == kNoPool ? instant : fabric.busyUntil[pool];
    return startAfterMoves(instant, busy, choice.deficit, rules.moveTime);
  }
  SplitMix64 predicted(0);  // a random policy's actual draw is not known ahead
  auto sources =
      chooseGpus(state, choice.node, choice.deficit, rules.gpuPolicy, &predicted, models);
  if (!sources) {
    return sources.error();
  }
  const std::vector<std::string> chassis = chassisOfGpus(state, *sources);
  auto slots = poolMoveSlots(fabric, pool, chassis, rules, instant);
  if (!slots) {
    return tooLate();
  }
  std::int64_t last = instant;
  for (const MoveSlot& m : *slots) {
    last = std::max(last, m.end);
  }
  return last;
}

// backfillKeeps' verdict on the head's reservation with the candidate placed.
Result<Reservation> keepsVerdict(Result<Reservation> after, const Reservation& current) {
  if (!after) {
    if (after.error().code == kc::errc::kUnschedulable) {
      return makeError(kc::errc::kConflict, "starting it now would leave the head no reservation");
    }
    return after.error();
  }
  if (after->start > current.start) {
    return makeError(kc::errc::kConflict,
                     "starting it now would delay the head's reservation from " +
                         std::to_string(current.start) + " to " + std::to_string(after->start));
  }
  return after;
}

// The reservation when node selection chose `choice` at `instant`: its start waits for the
// moves of the deficit (landedAt).
Result<Reservation> reservationAt(const ClusterState& state, const FabricClock& fabric,
                                  const PlacementRules& rules, const NodeChoice& choice,
                                  const GpuModelFilter& models, std::int64_t instant) {
  auto start = landedAt(state, fabric, rules, choice, models, instant);
  if (!start) {
    return start.error();
  }
  return Reservation{choice.node, *start, instant, choice.deficit};
}

Status releasePod(ClusterState& state, const RunningPod& r) {
  for (GpuIndex g : r.gpus) {
    if (auto s = state.releaseGpu(g); !s) {
      return s;
    }
  }
  return state.release(r.node, r.pod.cpuMilli, r.pod.memoryMiB);
}

}  // namespace

std::vector<std::string> chassisOfGpus(const ClusterState& state, std::span<const GpuIndex> gpus) {
  std::vector<std::string> out;
  out.reserve(gpus.size());
  for (GpuIndex g : gpus) {
    out.emplace_back(chassisOfGpu(state.gpu(g).id));
  }
  return out;
}

Result<std::vector<MoveSlot>> poolMoveSlots(const FabricClock& fabric, PoolIndex pool,
                                            std::span<const std::string> chassis,
                                            const PlacementRules& rules, std::int64_t at) {
  if (pool == kNoPool || pool >= fabric.busyUntil.size()) {
    return scheduleMoves(chassis, at, rules.moveTime, rules.moves, {});
  }
  const std::int64_t busy = fabric.busyUntil[pool];
  if (rules.moves == kSerialMoves) {
    std::vector<MoveSlot> out;
    out.reserve(chassis.size());
    std::int64_t t = std::max(at, busy);
    for (std::size_t i = 0; i < chassis.size(); ++i) {
      MoveSlot slot{t, 0};
      if (__builtin_add_overflow(t, rules.moveTime, &slot.end)) {
        return makeError(kc::errc::kInvalid, "a move would land past the int64 time range");
      }
      out.push_back(slot);
      t = slot.end;
    }
    return out;
  }
  if (pool < fabric.booked.size()) {
    return scheduleMoves(chassis, at, rules.moveTime, rules.moves, fabric.booked[pool]);
  }
  return scheduleMoves(chassis, std::max(at, busy), rules.moveTime, rules.moves, {});
}

Result<NodeChoice> selectNodeFor(const ClusterState& state, const PodRequest& pod,
                                 const GpuModelFilter& models, const PlacementRules& rules) {
  if (pod.gpus > 0 && !models.acceptsAny()) {
    return selectNodeForModels(state, pod, models, rules.nodePolicy, rules.mode);
  }
  return selectNode(state, pod, rules.nodePolicy, rules.mode);
}

Result<Reservation> reserveHead(const ClusterState& state, std::span<const RunningPod> running,
                                const FabricClock& fabric, const PodRequest& head,
                                const GpuModelFilter& headModels, const PlacementRules& rules,
                                std::int64_t now) {
  if (auto s = checkFabric(state, fabric); !s) {
    return s.error();
  }
  std::vector<const RunningPod*> byEnd;
  byEnd.reserve(running.size());
  for (const RunningPod& r : running) {
    if (r.node >= state.nodeCount()) {
      return makeError(kc::errc::kInvalid, "running pod on node " + std::to_string(r.node) +
                                               " of " + std::to_string(state.nodeCount()));
    }
    byEnd.push_back(&r);
  }
  std::stable_sort(byEnd.begin(), byEnd.end(),
                   [](const RunningPod* a, const RunningPod* b) { return a->end < b->end; });
  ClusterState projected = state;
  std::size_t next = 0;
  std::int64_t instant = now;
  while (true) {
    // Everything ending by `instant` has released its resources.
    while (next < byEnd.size() && byEnd[next]->end <= instant) {
      if (auto s = releasePod(projected, *byEnd[next]); !s) {
        return makeError(kc::errc::kInvalid, "running pod: " + s.error().message);
      }
      ++next;
    }
    auto choice = selectNodeFor(projected, head, headModels, rules);
    if (choice) {
      return reservationAt(projected, fabric, rules, *choice, headModels, instant);
    }
    if (choice.error().code != kc::errc::kUnschedulable) {
      return choice.error();
    }
    if (next == byEnd.size()) {
      return makeError(
          kc::errc::kUnschedulable,
          "the head does not fit even when every running pod has ended: " + choice.error().message);
    }
    instant = std::max(instant, byEnd[next]->end);
  }
}

Result<Placement> placeNow(ClusterState& state, FabricClock& fabric, const PodRequest& pod,
                           const GpuModelFilter& models, const PlacementRules& rules,
                           SplitMix64* rng, std::int64_t now) {
  if (auto s = checkFabric(state, fabric); !s) {
    return s.error();
  }
  auto choice = selectNodeFor(state, pod, models, rules);
  if (!choice) {
    return choice.error();
  }
  Placement out;
  out.node = choice->node;
  out.start = now;
  if (choice->deficit > 0) {
    auto moves = chooseGpus(state, out.node, choice->deficit, rules.gpuPolicy, rng, models);
    if (!moves) {
      return moves.error();
    }
    const PoolIndex pool = state.node(out.node).pool;
    const std::vector<std::string> chassis = chassisOfGpus(state, *moves);
    auto slots = poolMoveSlots(fabric, pool, chassis, rules, now);
    if (!slots) {
      return tooLate();
    }
    std::int64_t start = now;
    for (const MoveSlot& m : *slots) {
      start = std::max(start, m.end);
    }
    for (GpuIndex g : *moves) {
      if (auto s = state.detachGpu(g); !s) {
        return s.error();
      }
      if (auto s = state.attachGpu(g, out.node); !s) {
        return s.error();
      }
    }
    out.moved = std::move(*moves);
    out.start = start;
    fabric.busyUntil[pool] = std::max(fabric.busyUntil[pool], start);
    if (!fabric.booked.empty()) {
      for (std::size_t i = 0; i < chassis.size(); ++i) {
        fabric.booked[pool].push_back(MoveInFlight{chassis[i], (*slots)[i].end});
      }
    }
  }
  for (GpuIndex g : state.nodeGpus(out.node)) {
    if (out.gpus.size() == pod.gpus) {
      break;
    }
    if (state.gpu(g).free() && models.accepts(state.gpu(g).model)) {
      out.gpus.push_back(g);
    }
  }
  if (out.gpus.size() != pod.gpus) {
    return makeError(kc::errc::kInternal, "node '" + state.node(out.node).name +
                                              "' lacks the GPUs node selection promised");
  }
  for (GpuIndex g : out.gpus) {
    if (auto s = state.allocateGpu(g); !s) {
      return s.error();
    }
  }
  if (auto s = state.reserve(out.node, pod.cpuMilli, pod.memoryMiB); !s) {
    return s.error();
  }
  return out;
}

Result<Reservation> backfillKeeps(const ClusterState& state, std::span<const RunningPod> running,
                                  const FabricClock& fabric, const Reservation& current,
                                  const PodRequest& head, const GpuModelFilter& headModels,
                                  const PodRequest& candidate,
                                  const GpuModelFilter& candidateModels,
                                  std::int64_t candidateDuration, const PlacementRules& rules,
                                  SplitMix64 rng, std::int64_t now) {
  ClusterState trial = state;
  FabricClock trialFabric = fabric;
  auto placed = placeNow(trial, trialFabric, candidate, candidateModels, rules, &rng, now);
  if (!placed) {
    return placed.error();
  }
  std::vector<RunningPod> withCandidate(running.begin(), running.end());
  RunningPod mine{placed->node, candidate, std::move(placed->gpus), 0};
  if (__builtin_add_overflow(placed->start, candidateDuration, &mine.end)) {
    return tooLate();
  }
  withCandidate.push_back(std::move(mine));
  return keepsVerdict(reserveHead(trial, withCandidate, trialFabric, head, headModels, rules, now),
                      current);
}

Status BackfillPlanner::reset(const ClusterState& state, std::span<const RunningPod> running,
                              const FabricClock& fabric) {
  if (auto s = checkFabric(state, fabric); !s) {
    return s.error();
  }
  for (const RunningPod& r : running) {
    if (r.node >= state.nodeCount()) {
      return makeError(kc::errc::kInvalid, "running pod on node " + std::to_string(r.node) +
                                               " of " + std::to_string(state.nodeCount()));
    }
  }
  scratch_.assignFrom(state);
  scratch_.setJournaling(true);
  running_ = running;
  fabric_ = fabric;
  // The release order: when the running pods are those of the last reset with a few more
  // appended (a pass's starts), only the new ones are merged in, each after every pod ending no
  // later (what the stable sort gives, as their indices are larger); otherwise a stable sort.
  const std::size_t before = ends_.size();
  const bool appended = before > 0 && running.size() >= before && running.size() - before <= 64 &&
                        std::equal(ends_.begin(), ends_.end(), running.begin(),
                                   [](std::int64_t e, const RunningPod& r) { return e == r.end; });
  if (!appended) {
    byEnd_.resize(running.size());
    ends_.resize(running.size());
    for (std::uint32_t i = 0; i < byEnd_.size(); ++i) {
      byEnd_[i] = i;
      ends_[i] = running[i].end;
    }
    std::stable_sort(byEnd_.begin(), byEnd_.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return ends_[a] < ends_[b]; });
  } else {
    for (auto i = static_cast<std::uint32_t>(before); i < running.size(); ++i) {
      ends_.push_back(running[i].end);
      const auto at =
          std::upper_bound(byEnd_.begin(), byEnd_.end(), ends_[i],
                           [&](std::int64_t e, std::uint32_t j) { return e < ends_[j]; });
      byEnd_.insert(at, i);
    }
  }
  poolNodes_.resize(state.poolCount());
  for (auto& nodes : poolNodes_) {
    nodes.clear();
  }
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    if (state.node(n).pool != kNoPool) {
      poolNodes_[state.node(n).pool].push_back(n);
    }
  }
  touchedPool_.assign(state.poolCount(), 0);
  return okStatus();
}

// The running pods in reserveHead's order (stably by expected end) with `extra`, if any,
// merged in after every pod ending no later than it.
class BackfillPlanner::ReleaseOrder {
 public:
  ReleaseOrder(std::span<const RunningPod> running, std::span<const std::uint32_t> byEnd,
               const RunningPod* extra)
      : pods_(running), order_(byEnd), extra_(extra), extraDone_(extra == nullptr) {}

  // The next pod to release, or null when all have been.
  const RunningPod* peek() const {
    const RunningPod* r = next_ < order_.size() ? &pods_[order_[next_]] : nullptr;
    if (!extraDone_ && (r == nullptr || extra_->end < r->end)) {
      return extra_;
    }
    return r;
  }

  // Moves past `r`, the pod peek() returned.
  void pop(const RunningPod* r) {
    if (r == extra_) {
      extraDone_ = true;
    } else {
      ++next_;
    }
  }

 private:
  std::span<const RunningPod> pods_;
  std::span<const std::uint32_t> order_;  // indices into pods_, stably sorted by end
  const RunningPod* extra_;
  bool extraDone_;
  std::size_t next_ = 0;
};

Result<Reservation> BackfillPlanner::reserve(const RunningPod* extra, const FabricClock& fabric,
                                             const PodRequest& head,
                                             const GpuModelFilter& headModels,
                                             const PlacementRules& rules, std::int64_t now) {
  const std::size_t mark = scratch_.journalSize();
  touchedPools_.clear();
  touchedNodes_.clear();
  ReleaseOrder order(running_, byEnd_, extra);
  auto out = firstReservation(order, fabric, head, headModels, rules, now);
  for (PoolIndex p : touchedPools_) {
    touchedPool_[p] = 0;
  }
  scratch_.rollbackTo(mark);
  return out;
}

Result<Reservation> BackfillPlanner::firstReservation(
    ReleaseOrder& order, const FabricClock& fabric, const PodRequest& head,
    const GpuModelFilter& headModels, const PlacementRules& rules, std::int64_t now) {
  bool whole = true;  // the first try looks at every node
  std::int64_t instant = now;
  while (true) {
    if (auto s = releaseEndedBy(order, instant); !s) {
      return s.error();
    }
    Result<NodeChoice> choice = whole ? selectNodeFor(scratch_, head, headModels, rules)
                                      : selectTouched(head, headModels, rules);
    untouchAll();
    if (choice) {
      return reservationAt(scratch_, fabric, rules, *choice, headModels, instant);
    }
    if (choice.error().code != kc::errc::kUnschedulable) {
      return choice.error();
    }
    const RunningPod* following = order.peek();
    if (following == nullptr) {
      if (!whole) {
        // reserveHead's answer names what the whole cluster lacks: ask it as reserveHead did.
        choice = selectNodeFor(scratch_, head, headModels, rules);
        if (choice) {
          return reservationAt(scratch_, fabric, rules, *choice, headModels, instant);
        }
        if (choice.error().code != kc::errc::kUnschedulable) {
          return choice.error();
        }
      }
      return makeError(
          kc::errc::kUnschedulable,
          "the head does not fit even when every running pod has ended: " + choice.error().message);
    }
    whole = false;
    instant = std::max(instant, following->end);
  }
}

Status BackfillPlanner::releaseEndedBy(ReleaseOrder& order, std::int64_t instant) {
  for (const RunningPod* r = order.peek(); r != nullptr && r->end <= instant; r = order.peek()) {
    if (auto s = releasePod(scratch_, *r); !s) {
      return makeError(kc::errc::kInvalid, "running pod: " + s.error().message);
    }
    touch(r->node);
    order.pop(r);
  }
  return okStatus();
}

void BackfillPlanner::touch(NodeIndex n) {
  const PoolIndex p = scratch_.node(n).pool;
  if (p == kNoPool) {
    if (std::find(touchedNodes_.begin(), touchedNodes_.end(), n) == touchedNodes_.end()) {
      touchedNodes_.push_back(n);
    }
  } else if (touchedPool_[p] == 0) {
    touchedPool_[p] = 1;
    touchedPools_.push_back(p);
  }
}

void BackfillPlanner::untouchAll() {
  for (PoolIndex p : touchedPools_) {
    touchedPool_[p] = 0;
  }
  touchedPools_.clear();
  touchedNodes_.clear();
}

Result<NodeChoice> BackfillPlanner::selectTouched(const PodRequest& pod,
                                                  const GpuModelFilter& models,
                                                  const PlacementRules& rules) {
  among_.clear();
  for (PoolIndex p : touchedPools_) {
    among_.insert(among_.end(), poolNodes_[p].begin(), poolNodes_[p].end());
  }
  among_.insert(among_.end(), touchedNodes_.begin(), touchedNodes_.end());
  return pod.gpus > 0 && !models.acceptsAny()
             ? selectNodeForModelsAmong(scratch_, pod, models, rules.nodePolicy, rules.mode, among_)
             : selectNodeAmong(scratch_, pod, rules.nodePolicy, rules.mode, among_);
}

Result<Reservation> BackfillPlanner::reserveHead(const PodRequest& head,
                                                 const GpuModelFilter& headModels,
                                                 const PlacementRules& rules, std::int64_t now) {
  return reserve(nullptr, fabric_, head, headModels, rules, now);
}

Result<Reservation> BackfillPlanner::backfillKeeps(
    const Reservation& current, const PodRequest& head, const GpuModelFilter& headModels,
    const PodRequest& candidate, const GpuModelFilter& candidateModels,
    std::int64_t candidateDuration, const PlacementRules& rules, SplitMix64 rng, std::int64_t now) {
  const std::size_t mark = scratch_.journalSize();
  FabricClock trialFabric = fabric_;
  auto answer = [&]() -> Result<Reservation> {
    auto placed = placeNow(scratch_, trialFabric, candidate, candidateModels, rules, &rng, now);
    if (!placed) {
      return placed.error();
    }
    RunningPod mine{placed->node, candidate, std::move(placed->gpus), 0};
    if (__builtin_add_overflow(placed->start, candidateDuration, &mine.end)) {
      return tooLate();
    }
    return keepsVerdict(reserve(&mine, trialFabric, head, headModels, rules, now), current);
  };
  auto out = answer();
  scratch_.rollbackTo(mark);
  return out;
}

}  // namespace kc::alloc
