#pragma once
// Idle-time recomposition (beyond the paper; the paper moves GPUs only when a pod is placed and
// waits for them): while GPUs sit free and a pool's fabric is idle, move free GPUs in the
// background toward the layout the queue and the recent arrivals will need.
//
//   * A head is waiting (the queue's oldest pod does not fit now): its reservation is made as
//     the EASY queue policy makes it (reserveHead: node R and the time its resources are free),
//     and free GPUs of R's pool are moved onto R, at most as many as R still lacks (head GPUs
//     minus the usable GPUs attached to R, free or in use), and only if a move started now lands
//     before that time (so it never delays the head: each landed GPU is one move fewer at its
//     start). Nothing else moves while a pod waits.
//   * Nothing waits: the largest GPU request among the recent arrivals (k GPUs, k >= 2) is
//     prepared for in every pool. The target is the pool's node (with the CPU and memory free for
//     that request) holding the most free GPUs; free GPUs are moved there until it holds k, but
//     only if the pool has enough free GPUs to complete it. "Keep singles near CPU-heavy
//     nodes": when recent arrivals include one-GPU requests, a node with the CPU free for the
//     most CPU-hungry of them keeps its last free GPU.
//
// Bounds: only free GPUs (healthy, not in use, not draining) move; a GPU is never moved off the
// head's reserved node; when the head fits now nothing moves (the scheduler places it, and may
// use any free GPU). Donors: unattached GPUs first (no detach needed), then GPUs of the nodes
// with the fewest free GPUs (fragments), by index.
//
// The plan is a list per pool, in order. The caller starts only the first move of a pool whose
// fabric is idle, treats the fabric as busy until it lands, and plans again then: the rest of a
// plan is thereby cancelled the moment a real request takes the fabric (a real request waits at
// most for the one move in flight). Pure code: no I/O, threads or clocks; times are passed in.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

enum class RecomposeKind : std::uint8_t {
  None,        // the paper: GPUs move only for a placement
  IdleGather,  // background moves toward the head's node and the recent mix's largest request
};

// A registry entry (policy_registry.hpp lists them).
struct RecomposePolicy {
  std::string_view name;
  std::string_view description;
  RecomposeKind kind;
};

struct NoRecomposePolicy {
  static constexpr std::string_view kName = "none";
  static constexpr std::string_view kDescription =
      "paper: GPUs move only when a pod is placed and waits for them";
  static constexpr RecomposeKind kKind = RecomposeKind::None;
};
struct IdleGatherRecomposePolicy {
  static constexpr std::string_view kName = "idle-gather";
  static constexpr std::string_view kDescription =
      "while a pool's fabric is idle, move free GPUs toward the waiting head's reserved node, or "
      "(nothing waiting) gather them for the recent arrivals' largest request; one move at a "
      "time, cancelled when a real request needs the fabric";
  static constexpr RecomposeKind kKind = RecomposeKind::IdleGather;
};

// How many recent arrivals the caller should pass (the "recent arrival mix").
inline constexpr std::size_t kRecentArrivals = 32;

struct IdleMove {
  GpuIndex gpu = 0;
  NodeIndex to = kNoNode;
  friend bool operator==(const IdleMove&, const IdleMove&) = default;
};

struct RecomposeInput {
  std::span<const RunningPod> running{};  // for the head's reservation
  FabricClock fabric{};                   // busy-until per pool
  const PodRequest* head = nullptr;       // the oldest waiting pod, or none
  GpuModelFilter headModels{};            // the head's accepted GPU models
  std::span<const PodRequest> recent{};   // recent arrivals (unconstrained), any order
  bool anticipate = true;                 // false: no moves unless a head waits
};

// The moves to make now, in order, at most one list per pool (pools appear in index order).
// Empty in preconfigured mode. Errors: "invalid" (fabric clock not one entry per pool, bad
// running pods), or a policy error.
Result<std::vector<IdleMove>> planIdleMoves(const ClusterState& state, const RecomposeInput& in,
                                            const PlacementRules& rules, std::int64_t now);

}  // namespace kc::alloc
