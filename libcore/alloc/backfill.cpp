#include "libcore/alloc/backfill.hpp"

#include <algorithm>
#include <string>

namespace kc::alloc {
namespace {

Error tooLate() {
  return makeError(kc::errc::kInvalid, "reservation time overflows int64");
}

// max(at, busyUntil) + deficit x moveTime, checked.
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

Status releasePod(ClusterState& state, const RunningPod& r) {
  for (GpuIndex g : r.gpus) {
    if (auto s = state.releaseGpu(g); !s) {
      return s;
    }
  }
  return state.release(r.node, r.pod.cpuMilli, r.pod.memoryMiB);
}

}  // namespace

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
  if (fabric.busyUntil.size() != state.poolCount()) {
    return makeError(kc::errc::kInvalid, "fabric clock has " + std::to_string(fabric.busyUntil.size()) +
                                    " pools, the cluster " + std::to_string(state.poolCount()));
  }
  std::vector<const RunningPod*> byEnd;
  byEnd.reserve(running.size());
  for (const RunningPod& r : running) {
    if (r.node >= state.nodeCount()) {
      return makeError(kc::errc::kInvalid, "running pod on node " + std::to_string(r.node) + " of " +
                                      std::to_string(state.nodeCount()));
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
      const PoolIndex pool = projected.node(choice->node).pool;
      const std::int64_t busy = pool == kNoPool ? instant : fabric.busyUntil[pool];
      auto start = startAfterMoves(instant, busy, choice->deficit, rules.moveTime);
      if (!start) {
        return start.error();
      }
      return Reservation{choice->node, *start, instant, choice->deficit};
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
  if (fabric.busyUntil.size() != state.poolCount()) {
    return makeError(kc::errc::kInvalid, "fabric clock does not match the cluster's pools");
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
    auto start = startAfterMoves(now, fabric.busyUntil[pool], choice->deficit, rules.moveTime);
    if (!start) {
      return start.error();
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
    out.start = *start;
    fabric.busyUntil[pool] = *start;
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
  auto after = reserveHead(trial, withCandidate, trialFabric, head, headModels, rules, now);
  if (!after) {
    if (after.error().code == kc::errc::kUnschedulable) {
      return makeError(kc::errc::kConflict, "starting it now would leave the head no reservation");
    }
    return after.error();
  }
  if (after->start > current.start) {
    return makeError(kc::errc::kConflict, "starting it now would delay the head's reservation from " +
                                     std::to_string(current.start) + " to " +
                                     std::to_string(after->start));
  }
  return *after;
}

}  // namespace kc::alloc
