#pragma once
// Idle-time recomposition in reconfig-mgr (--recompose-policy idle-gather, beyond the paper):
// when a pool's fabric is idle and no real request waits for it, the one background move to
// start now, decided by the same pure code the simulator runs (alloc::planIdleMoves,
// libcore/alloc/idle_recompose.hpp). Pure: everything is passed in.
//
// What the planner is given, built from what reconfig-mgr already knows:
//   * the cluster: the pool model the demand planner builds (poolModel: the view with every
//     GPU a claim holds counted in use), each node's CPU and memory from its Node object
//     (status.allocatable) with the kubecomp-sched pods on it reserved;
//   * running pods: every kubecomp-sched pod bound to a node of the pool, and every waiting pod
//     already served there (its GPUs are on its node, the bind is pending), with its GPUs (those
//     its node's device plugin shows it using, then the claimed free GPUs of the node) and its
//     expected end: status.startTime (now when not started) + its expected run time
//     (annotation kubecomp.io/expected-runtime-seconds, else spec.activeDeadlineSeconds, else
//     `defaultRuntime`);
//   * the head: the first pending kubecomp-sched pod in queue order (alloc::podBefore:
//     priority, then age) the scheduler has not placed yet (no kubecomp.io/dst-node): a pod
//     with the annotation is placed and holds its claims;
//   * the recent arrivals: the last alloc::kRecentArrivals kubecomp-sched pods (by
//     creationTimestamp) asking for GPUs of any model, as the simulator keeps them;
//   * the fabric: idle (busy until now); the move time: the latest successful move's duration
//     in the journal (else 20 s, about the paper's 19.5 s a GPU).
// The plan's first move becomes a background Move; a GPU that a background move placed less
// than `cooldown` ago (the journal's history) is not moved again in the background, so a plan
// that changes its mind does not move GPUs back and forth.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/idle_recompose.hpp"
#include "libcore/base/result.hpp"
#include "services/reconfig-mgr/move_journal.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/pool_spec.hpp"
#include "services/reconfig-mgr/pool_view.hpp"

namespace kc::reconfig {

struct IdleInputs {
  const PoolSpec* spec = nullptr;
  const PoolView* view = nullptr;
  const std::vector<PodInfo>* pods = nullptr;  // every kubecomp-sched pod
  const PlanResult* demand = nullptr;          // planMoves on the same view and pods
  const std::map<std::string, NodeCapacity>* nodes = nullptr;  // by node name
  const Journal* journal = nullptr;
  alloc::RecomposeKind kind = alloc::RecomposeKind::None;
  alloc::GpuPolicy gpuPolicy{};
  std::chrono::system_clock::time_point now{};
  std::chrono::seconds defaultRuntime{300};
  std::chrono::seconds cooldown{300};
};

struct IdlePlan {
  std::optional<Move> next;          // kind Background, phase Draining (Attaching if unattached)
  std::vector<std::string> planned;  // the whole plan, "gpu>node", for logs and tests
};

// Nothing (no error) under policy none, while a real request waits (demandWaits) or a demand
// move is planned. Errors: the pool model's or the policy's ("invalid"...).
Result<IdlePlan> planIdle(const IdleInputs& in);

// A background move still Draining: why it must be given up now (a real request waits for the
// pool's fabric; a pod bound to the source node may need the GPU), or nullopt.
std::optional<std::string> backgroundCancelReason(const PlanResult& demand, const PoolView& view,
                                                  const std::vector<PodInfo>& pods,
                                                  const Move& move);

// How long one move takes here: the latest Succeeded move of the journal (startedAt to its
// end), else 20 s.
std::chrono::milliseconds moveTimeEstimate(const Journal& journal);

}  // namespace kc::reconfig
