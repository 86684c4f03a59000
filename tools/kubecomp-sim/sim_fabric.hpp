#pragma once
// The simulated fabric: the moves booked in each pool and when they land, charged by the move
// schedule reconfig-mgr follows (libcore/alloc/move_schedule.hpp). A placement's moves, a
// background (idle-recomposition) move and an idle return each take a slot of
// alloc::poolMoveSlots: by default the paper's serial fabric (one move at a time per pool, back
// to back), or, with MoveConcurrency, in parallel across chassis. A GPU's chassis is read from
// its id as reconfig-mgr reads it (alloc::chassisOfGpu: "falcon-0.g0000003" -> "falcon-0"; an
// id without a '.' is a chassis of its own).
//
// A booked move holds its chassis and a place in the pool from the moment it is booked until it
// lands, also when the schedule starts it later (moves are booked in priority order, so under
// a pool limit of 1 or none, or one at least the chassis' total, this is exactly the timeline
// reconfig-mgr follows; with a pool limit in between a later move is never slipped into a gap
// before an earlier one, which reconfig-mgr may do).

#include <span>
#include <string>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/move_schedule.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

class SimFabric {
 public:
  SimFabric(const alloc::ClusterState& cluster, const alloc::MoveConcurrency& concurrency);

  // Forgets the moves landed by `now` (they hold nothing any more).
  void prune(SimMs now);

  // The slots of moving `gpus` (best first) into `pool` from `now` on, each taking `moveTime`.
  // Error "invalid" past int64 (the caller also bounds the times by kMaxSimMs).
  Result<std::vector<alloc::MoveSlot>> slots(alloc::PoolIndex pool,
                                             std::span<const alloc::GpuIndex> gpus, SimMs moveTime,
                                             SimMs now) const;

  // slots() as if the booked move of GPU `skip` landing at `skipEnd` were not there (what a
  // background move in flight costs a placement). Parallel schedules only: the serial fabric
  // is charged by busy-until, not by the moves booked.
  Result<std::vector<alloc::MoveSlot>> slotsWithout(alloc::PoolIndex pool,
                                                    std::span<const alloc::GpuIndex> gpus,
                                                    SimMs moveTime, SimMs now, alloc::GpuIndex skip,
                                                    SimMs skipEnd) const;

  // Books the moves of `gpus` into `pool` with their slots (as slots() gave them).
  void book(alloc::PoolIndex pool, std::span<const alloc::GpuIndex> gpus,
            std::span<const alloc::MoveSlot> slots);

  // What the queue pass and the planner see: busy-until and the booked moves per pool.
  const alloc::FabricClock& clock() const { return clock_; }
  const alloc::MoveConcurrency& concurrency() const { return concurrency_; }

 private:
  alloc::MoveConcurrency concurrency_;
  alloc::FabricClock clock_;
  std::vector<std::string> chassis_;  // per GPU
};

// The last landing of `slots` (`now` when empty).
SimMs lastEnd(std::span<const alloc::MoveSlot> slots, SimMs now);

}  // namespace kc::sim
