#pragma once
// The discrete-event engine (paper 001, section VI-A-2): jobs arrive, wait in a queue, are
// placed by the SAME libcore/alloc code the scheduler runs (selectNode: Eq. 1 and the
// multi-pool filter; chooseGpus: Algorithm 1 / ours / baselines), run for their duration, and
// leave. Only the clock differs from the daemons: here it is simulated time.
//
// Queue disciplines (alloc::QueueDiscipline, chosen by name from the policy registry):
//   fcfs           the paper's First-Come-First-Serve: only the oldest waiting job may start;
//                  when it does not fit, every later job waits too (head-of-line blocking).
//                  Default.
//   backfill       BEYOND THE PAPER: greedy backfill, any waiting job that fits starts, oldest
//                  first (no reservation for the head, so large jobs may be delayed).
//   easy-backfill  BEYOND THE PAPER: EASY backfill (libcore/alloc/backfill.hpp): the head gets
//                  a reservation (node, earliest start counting its GPU moves); a later job
//                  starts now only if the head's reservation stays no later. Durations are
//                  known in a trace, so a job's expected end is its real end.
//                  The pass is alloc::QueuePass (libcore/alloc/queue_pass.hpp), the one
//                  kubecomp-sched runs; the engine hosts it and places what it starts.
//   slack-backfill BEYOND THE PAPER: as easy-backfill, but a later job may delay the head's
//                  reservation up to a bound fixed when it became the head (its first
//                  reservation plus its own duration times SimConfig::slackFactor, 1 by
//                  default); it still starts by that bound.
//
// Idle-time recomposition (BEYOND THE PAPER, alloc::RecomposeKind, libcore/alloc/
// idle_recompose.hpp): after each scheduling pass, in every pool whose fabric is idle, the
// first move of alloc::planIdleMoves is started (the GPU is attached to its new node in the
// pool model at once and stays free; a job placed on it starts only when it has landed). The
// fabric is busy until it lands, then the planner runs again: a real request arriving meanwhile
// waits for that one move and the rest of the plan is dropped (cancelled). The planner is given
// the FCFS head (the queue's oldest job) and the last alloc::kRecentArrivals arrivals; it
// prepares ahead only while jobs are still to arrive.
//
// Composable mode: when the chosen node lacks GPUs (deficit > 0), the chosen GPUs are moved to
// it, each move taking `moveTime`, on the schedule reconfig-mgr follows (SimConfig::moves,
// sim_fabric.hpp): by default serialised per pool (the paper), or in parallel across chassis.
// The job starts when its last GPU lands. The moved GPUs are the job's from the decision on.
// Preconfigured mode: GPUs never move.
//
// DRA path (docs/results.md, "DRA path: stock-dra vs the pool policy"; the `stock-dra` preset,
// libcore/alloc/stock_dra.hpp). Two settings model a stock cluster (Kubernetes DRA + CoHDI):
//   offer local-or-unattached  (alloc::selectNodeOffered) a node is offered its own free GPUs
//                              and its pool's unattached ones only; a GPU idle on another node
//                              is not offered until it is returned. FCFS or greedy backfill,
//                              no recomposition: the other queue passes and the planner reason
//                              over the whole pool's free GPUs.
//   idle return idle-timeout   (alloc::idleExpired) a GPU attached to a node and idle for
//                              SimConfig::idleTimeout is detached back to its pool at that
//                              instant (after the scheduling pass, so a pod arriving at the same
//                              instant may still take it). The detach takes a slot of the
//                              move schedule on its GPU's chassis for SimConfig::returnTime
//                              (serialised with the moves on the default serial fabric) and
//                              counts as one GPU moved (SimResult::idleReturns), paid while a
//                              pod waited when some job was queued or waiting for GPUs at any
//                              event during its flight. Attaching a returned GPU later is a move
//                              like any other (the full move time, as for every unattached GPU
//                              here). Initially attached GPUs are idle from the first arrival.
//                              Once no job is left to arrive and none waits, nothing more is
//                              returned (no pod could use it: counting those would only pad
//                              the baseline's moves).
// The defaults (pool, keep) are ours and leave every earlier result unchanged.
//
// A job that could not run even on the empty cluster (e.g. 8 GPUs on a 4+4 preconfigured
// cluster) is rejected at arrival and counted; it never blocks the queue. The paper reports
// such jobs as failing to complete.
//
// Gangs and priorities (issue 27; docs/simulator.md, "Gangs and priorities"): the queue is kept
// in alloc::podBefore order (priority, then arrival; plain arrival order when every priority is
// 0). A job with Job::members > 1 is placed all or nothing: every member is first placed on a
// copy of the cluster (the same node and GPU policies, a copy of the random state); only when
// all fit are they placed for real, with the same choices, and all start when the last
// member's GPUs have landed. SimResult::strandedGpuMs counts the GPU time left unallocated
// while a gang waits. Gangs need the fcfs or backfill queue.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/idle_timeout.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/queue_pass.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

using QueueDiscipline = alloc::QueueDiscipline;

// Measured on the H3 Falcon 4005 (reference logs): one GPU's reconfiguration takes 17-22 s end
// to end (unassign 5-8 s + assign 8-16 s); we take the midpoint.
inline constexpr SimMs kDefaultMoveTime = 19'500;
// An idle return is a detach alone: the unassign part, 5-8 s; its midpoint.
inline constexpr SimMs kDefaultReturnTime = 6'500;

struct SimConfig {
  alloc::Composability mode = alloc::Composability::Composable;
  alloc::NodePolicy nodePolicy{};
  alloc::GpuPolicy gpuPolicy{};
  std::uint64_t seed = 1;  // for random GPU choice
  SimMs moveTime = kDefaultMoveTime;
  // How moves in one pool overlap (libcore/alloc/move_schedule.hpp): the paper's serial fabric
  // by default; {perChassis, perPool} runs them in parallel across chassis (a GPU's chassis is
  // the part of its id before the first '.').
  alloc::MoveConcurrency moves = alloc::kSerialMoves;
  QueueDiscipline queue = QueueDiscipline::Fcfs;
  alloc::RecomposeKind recompose = alloc::RecomposeKind::None;
  // slack-backfill: the head may slip by up to this many of its own run times (queue_pass.hpp).
  double slackFactor = alloc::kDefaultSlackFactor;
  // DRA path (above): which free GPUs a node is offered, and what happens to an idle one.
  alloc::DeviceOffer offer = alloc::DeviceOffer::Pool;
  alloc::ReturnKind idleReturn = alloc::ReturnKind::Keep;
  SimMs idleTimeout = alloc::kDefaultIdleTimeoutMs;  // idle-timeout only
  SimMs returnTime = kDefaultReturnTime;             // fabric time of one idle return
  // Called with (jobs finished, jobs total) now and then during long runs; may be empty.
  std::function<void(std::uint64_t, std::uint64_t)> progress;
  // Called at each placement with (job index, node, GPUs moved to it, GPUs the job runs on);
  // may be empty. Tests use it to compare the GPU choice with the policy registry's.
  std::function<void(std::size_t, alloc::NodeIndex, const std::vector<alloc::GpuIndex>&,
                     const std::vector<alloc::GpuIndex>&)>
      onPlace;
  // easy-backfill only: called with (head job index, its reserved start, now) each time the
  // head's reservation is made or renewed; may be empty. Tests check it never moves later.
  std::function<void(std::size_t, SimMs, SimMs)> onReserve;
};

// Defaults: eq1 node policy, our GPU policy.
SimConfig defaultSimConfig();

struct JobOutcome {
  SimMs start = -1;  // -1: rejected (never runnable on this cluster)
  SimMs end = -1;
  alloc::NodeIndex node = alloc::kNoNode;
  std::uint32_t gpusMoved = 0;
  bool rejected() const { return start < 0; }
};

// Time-weighted record of how many GPUs run jobs.
struct UsageRecord {
  // histogramMs[k] = simulated ms during which exactly k GPUs ran jobs, over
  // [first arrival, last end].
  std::vector<SimMs> histogramMs;
  // Utilisation over time: bucket i covers [origin + i*bucketMs, origin + (i+1)*bucketMs) and
  // holds the GPU-ms used in it. At most kMaxBuckets buckets (the width doubles as needed).
  SimMs origin = 0;
  SimMs bucketMs = 1000;
  std::vector<SimMs> bucketGpuMs;
  static constexpr std::size_t kMaxBuckets = 512;
};

struct SimResult {
  std::vector<JobOutcome> jobs;  // same order as the trace
  UsageRecord usage;
  std::uint64_t totalGpus = 0;
  std::uint64_t gpusMoved = 0;  // every GPU move: for placements and in the background
  std::uint64_t jobsWithMoves = 0;
  // GPU moves paid while a pod waited: every move made for a placement (the job waits for it)
  // and every background move or idle return during whose flight some job was queued or
  // waiting for its GPUs.
  // gpusMoved - gpusMovedWhileWaiting moves were made while nothing waited.
  std::uint64_t gpusMovedWhileWaiting = 0;
  std::uint64_t idleMoves = 0;  // background moves (idle-time recomposition), landed
  // Placements that waited for a background move in flight (its pool's fabric or a GPU it got):
  // each time, the rest of that pool's background plan was cancelled.
  std::uint64_t idleMovesInterrupted = 0;
  // Idle-timeout returns (GPUs detached back to the pool), landed; each is one of gpusMoved.
  std::uint64_t idleReturns = 0;
  std::uint64_t rejected = 0;
  // Of `rejected`: jobs whose gpu_spec no GPU can serve (they would run without it: no pool or
  // node offers enough healthy GPUs of an accepted model).
  std::uint64_t rejectedGpuModel = 0;
  std::uint64_t placementAttempts = 0;  // selectNode calls
  // Stranded GPU time (gangs, issue 27): GPU-ms during which GPUs were allocated to no job while
  // at least one gang waited in the queue (0 without gangs).
  double strandedGpuMs = 0;
};

// Runs the trace to the end on a copy of `cluster`. A job with a gpuSpec runs only on GPUs of
// an accepted model (alloc::GpuModelFilter of its Trace::gpuSpecs text, parsed with '|').
// Errors: "invalid" (trace not sorted by arrival, negative duration, members outside
// 1..kMaxMembers, gangs with easy- or slack-backfill, a gpu_spec that does not
// parse or an index past Trace::gpuSpecs, a policy that needs a generator without one, the
// local-or-unattached offer without idle-timeout returns or with another queue or
// recomposition), or an
// internal inconsistency reported by the pool model (a bug: the message says which call failed).
Result<SimResult> simulate(const alloc::ClusterState& cluster, const Trace& trace,
                           const SimConfig& config);

}  // namespace kc::sim
