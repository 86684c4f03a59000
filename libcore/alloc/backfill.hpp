#pragma once
// Queue policies (beyond the paper; the paper runs strict FCFS): which waiting pods may start
// now. EASY backfill with a reservation for the head, as HPC batch schedulers do:
//
//   1. The head (oldest waiting pod) that does not fit now gets a reservation: the node and the
//      earliest start, found by releasing the running pods in order of their expected end on a
//      copy of the pool model and asking node selection (Eq. 1 and the pool filter, the same
//      call the placement makes) at each release instant. The start counts the GPU moves the
//      head will need: max(fit time, its pool's fabric busy-until) + deficit x move time on the
//      paper's serial fabric; with a parallel move schedule (PlacementRules::moves,
//      move_schedule.hpp) when the last of its moves lands by scheduleMoves, the sources being
//      those the GPU policy would choose at the fit time.
//   2. A later pod may start now only if the head's reservation, computed again with that pod
//      placed (its GPUs moved, its fabric time taken, its expected end known), is no later. This
//      covers both classic EASY cases (it uses resources the reservation does not need, or it
//      ends before the reservation) and the composable ones (it takes fabric time from the
//      head's pool, or it leaves moved GPUs where the head needs them).
//
// So the head's reserved start never moves later because of a backfilled pod, and no pod
// starves: every pod that can run on the empty cluster reaches the head and then starts by its
// reservation. Pure code: no I/O, threads or clocks; times are passed in (any unit, e.g. ms).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/move_schedule.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

enum class QueueDiscipline : std::uint8_t {
  Fcfs,          // the paper: only the head may start; it blocks every later pod
  Backfill,      // greedy: any waiting pod that fits starts, oldest first, no reservation
  EasyBackfill,  // a reservation for the head; later pods start only if they keep it
  // Slack-based (relaxed) backfill: as EasyBackfill, but a later pod may delay the head's
  // reservation up to a bound fixed when the pod became the head: its first reservation plus
  // its own expected run time. The head still starts by that bound (no starvation).
  SlackBackfill,
};

// A registry entry (policy_registry.hpp lists them; the simulator and the scheduler select one
// by name).
struct QueuePolicy {
  std::string_view name;
  std::string_view description;
  QueueDiscipline discipline;
};

struct FcfsQueuePolicy {
  static constexpr std::string_view kName = "fcfs";
  static constexpr std::string_view kDescription =
      "paper: first come first serve, the head blocks every later pod";
  static constexpr QueueDiscipline kDiscipline = QueueDiscipline::Fcfs;
};
struct GreedyBackfillQueuePolicy {
  static constexpr std::string_view kName = "backfill";
  static constexpr std::string_view kDescription =
      "greedy: any waiting pod that fits starts, oldest first (large pods may starve)";
  static constexpr QueueDiscipline kDiscipline = QueueDiscipline::Backfill;
};
struct EasyBackfillQueuePolicy {
  static constexpr std::string_view kName = "easy-backfill";
  static constexpr std::string_view kDescription =
      "the head gets a reservation (node, start counting GPU moves); later pods start only if "
      "they do not delay it";
  static constexpr QueueDiscipline kDiscipline = QueueDiscipline::EasyBackfill;
};

struct SlackBackfillQueuePolicy {
  static constexpr std::string_view kName = "slack-backfill";
  static constexpr std::string_view kDescription =
      "as easy-backfill, but later pods may delay the head's reservation by up to its own run "
      "time (a bound fixed when it became the head; it still starts by it)";
  static constexpr QueueDiscipline kDiscipline = QueueDiscipline::SlackBackfill;
};

// How pods are placed: the same policies the placement itself uses.
struct PlacementRules {
  Composability mode = Composability::Composable;
  NodePolicy nodePolicy{};
  GpuPolicy gpuPolicy{};
  std::int64_t moveTime = 0;  // per GPU
  // How the moves of one pool overlap (move_schedule.hpp); by default the paper's serial fabric.
  MoveConcurrency moves = kSerialMoves;
};

// A pod holding resources until its expected end.
struct RunningPod {
  NodeIndex node = kNoNode;
  PodRequest pod{};
  std::vector<GpuIndex> gpus{};  // the GPUs it runs on (all in use)
  std::int64_t end = 0;          // expected end
};

// The fabric of each pool: busy until busyUntil[pool] (the last booked move lands then).
struct FabricClock {
  std::vector<std::int64_t> busyUntil{};  // per pool
  // Per pool, the moves booked and not landed (chassis, landing), for a parallel schedule
  // (PlacementRules::moves other than kSerialMoves): empty, or one list per pool. Empty: not
  // known, and each pool is taken as wholly busy until busyUntil. placeNow appends to it.
  std::vector<std::vector<MoveInFlight>> booked{};
};

// The chassis of each GPU (chassisOfGpu of its id), in the same order.
std::vector<std::string> chassisOfGpus(const ClusterState& state, std::span<const GpuIndex> gpus);

// The slots of moving GPUs from `chassis` (best first) into `pool` from `at` on. Serial rules
// (kSerialMoves): back to back from max(at, busyUntil[pool]), whatever the chassis. Otherwise
// scheduleMoves over the pool's booked moves, or, when none are known (booked empty), from
// max(at, busyUntil[pool]). kNoPool: from `at`, no wait. Error "invalid" (a time past int64).
Result<std::vector<MoveSlot>> poolMoveSlots(const FabricClock& fabric, PoolIndex pool,
                                            std::span<const std::string> chassis,
                                            const PlacementRules& rules, std::int64_t at);

struct Reservation {
  NodeIndex node = kNoNode;
  std::int64_t start = 0;    // earliest start, moves included
  std::int64_t fitTime = 0;  // when the resources are free (start - moves and fabric wait)
  std::uint32_t gpusToMove = 0;
  friend bool operator==(const Reservation&, const Reservation&) = default;
};

// Node selection as the placement runs it: selectNode, or selectNodeForModels for a filter.
Result<NodeChoice> selectNodeFor(const ClusterState& state, const PodRequest& pod,
                                 const GpuModelFilter& models, const PlacementRules& rules);

// The head's reservation at time `now`. `running` in any order; a pod ending at or before
// `now` counts as ended. The first instant (now, then each distinct end) at which node
// selection finds a node gives the reservation, with start = max(instant, busyUntil[pool]) +
// deficit x moveTime (serial), or the last landing of poolMoveSlots for the GPUs chooseGpus
// would move then (parallel; a policy that needs a generator is given a fixed one). Errors:
// "unschedulable" (the head fits even with every running pod ended nowhere), "invalid" (bad indices
// in `running`, busyUntil not one entry per pool).
Result<Reservation> reserveHead(const ClusterState& state, std::span<const RunningPod> running,
                                const FabricClock& fabric, const PodRequest& head,
                                const GpuModelFilter& headModels, const PlacementRules& rules,
                                std::int64_t now);

// What placing a pod now did: its node, the GPUs moved to it, the GPUs it runs on, its start
// (after the moves) and the fabric clock after.
struct Placement {
  NodeIndex node = kNoNode;
  std::vector<GpuIndex> moved{};
  std::vector<GpuIndex> gpus{};
  std::int64_t start = 0;
};

// Places `pod` now on `state` as the placement does (node selection, chooseGpus for the
// deficit, the moves, the GPUs taken first-free in the node's order, CPU and memory reserved)
// and advances `fabric` (busyUntil, and the booked moves when it keeps them). Error "unschedulable"
// (nothing fits now; nothing changes), or the pool model's error.
Result<Placement> placeNow(ClusterState& state, FabricClock& fabric, const PodRequest& pod,
                           const GpuModelFilter& models, const PlacementRules& rules,
                           SplitMix64* rng, std::int64_t now);

// The EASY test for one later pod: would starting `candidate` now (placed as placeNow would,
// with `rng` copied, so the caller's real placement is the same) keep the head's reservation
// no later than `current`? On yes, returns the new reservation (never later than `current`;
// earlier when the candidate frees what the head waits for). Errors: "unschedulable" (the
// candidate does not fit now), "conflict" (it would delay the head: the message gives both
// starts); others as above.
Result<Reservation> backfillKeeps(const ClusterState& state, std::span<const RunningPod> running,
                                  const FabricClock& fabric, const Reservation& current,
                                  const PodRequest& head, const GpuModelFilter& headModels,
                                  const PodRequest& candidate,
                                  const GpuModelFilter& candidateModels,
                                  std::int64_t candidateDuration, const PlacementRules& rules,
                                  SplitMix64 rng, std::int64_t now);

// reserveHead and backfillKeeps for many questions on one cluster view, with the same answers
// (a QueuePass asks once per waiting pod). Built from the view once (reset), it keeps one copy
// of the pool model on which each question is applied and then undone through the model's
// journal, the running pods in the order of their expected ends, and the nodes of each pool;
// at each release instant after the first, node selection runs only over the pools (and
// pool-less nodes) that the releases since the last try touched: every other node failed the
// filter then and still does, so the choice is the whole cluster's (selectNodeAmong). A
// question then costs what it touches plus one node selection over the cluster, not copies of
// the model. reset() again whenever the view changes; a reset on a view of the same shape
// reuses the copy's storage. `running` must outlive the questions asked until the next reset.
// The free functions above stay the reference: the planner's answers are tested against them.
class BackfillPlanner {
 public:
  // Errors "invalid" as reserveHead's (busyUntil not one entry per pool, bad indices).
  Status reset(const ClusterState& state, std::span<const RunningPod> running,
               const FabricClock& fabric);

  Result<Reservation> reserveHead(const PodRequest& head, const GpuModelFilter& headModels,
                                  const PlacementRules& rules, std::int64_t now);
  Result<Reservation> backfillKeeps(const Reservation& current, const PodRequest& head,
                                    const GpuModelFilter& headModels, const PodRequest& candidate,
                                    const GpuModelFilter& candidateModels,
                                    std::int64_t candidateDuration, const PlacementRules& rules,
                                    SplitMix64 rng, std::int64_t now);

 private:
  // The reservation on scratch_ as it is (plus `extra`, a pod placed on it, if any).
  Result<Reservation> reserve(const RunningPod* extra, const FabricClock& fabric,
                              const PodRequest& head, const GpuModelFilter& headModels,
                              const PlacementRules& rules, std::int64_t now);
  // The running pods in release order, plus the extra one (backfill.cpp).
  class ReleaseOrder;
  // reserve's search: release the pods ending by each instant in turn (now, then each distinct
  // end) until node selection finds the head a node.
  Result<Reservation> firstReservation(ReleaseOrder& order, const FabricClock& fabric,
                                       const PodRequest& head, const GpuModelFilter& headModels,
                                       const PlacementRules& rules, std::int64_t now);
  // Releases on scratch_ every pod in `order` ending by `instant`, touching their nodes.
  Status releaseEndedBy(ReleaseOrder& order, std::int64_t instant);
  // Notes that node `n` had resources released: its pool, or itself when pool-less.
  void touch(NodeIndex n);
  // Forgets what was touched (after each node selection).
  void untouchAll();
  // Node selection over the touched pools and pool-less nodes only.
  Result<NodeChoice> selectTouched(const PodRequest& pod, const GpuModelFilter& models,
                                   const PlacementRules& rules);

  ClusterState scratch_;
  std::span<const RunningPod> running_;
  std::vector<std::uint32_t> byEnd_;  // indices into running_, stably sorted by end
  std::vector<std::int64_t> ends_;    // running_[i].end at the last reset
  FabricClock fabric_;
  std::vector<std::vector<NodeIndex>> poolNodes_;  // per pool, ascending
  // Per question (kept for their storage).
  std::vector<std::uint8_t> touchedPool_;
  std::vector<PoolIndex> touchedPools_;
  std::vector<NodeIndex> touchedNodes_;  // pool-less nodes released on
  std::vector<NodeIndex> among_;
};

}  // namespace kc::alloc
