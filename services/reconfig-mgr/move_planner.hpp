#pragma once
// Which GPU to move next in one pool, decided level-triggered from what is true now: the
// pods waiting for a reconfiguration (unbound, schedulerName kubecomp-sched, annotation
// kubecomp.io/dst-node naming a node of this pool), the pool's inventory and usage, and the
// move in flight. Pure.
//
// Deficit of a waiting pod P on node N, pods taken first come first served (creation time,
// then namespace/name):
//   deficit(P) = gpuRequest(P) - free GPUs on N of a model P accepts that no earlier claim
//                holds - the moves in flight for P
// where the earlier claims on N are the GPUs that bound pods on N still need (their request
// minus what the device plugin shows in use there) and those of earlier waiting pods on N.
// Sources are chosen by a libcore GPU policy (Algorithm 1 family, default unattached-first)
// among the free GPUs not on N that no claim holds; the GPUs chosen for one pod are claimed,
// so a later pod never plans on them. A pod the pool cannot supply in full gets no move at
// all and holds no claim (so it does not stop later pods; it is reconsidered first each time).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/move_schedule.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/api/names.hpp"
#include "services/reconfig-mgr/move_journal.hpp"
#include "services/reconfig-mgr/pool_spec.hpp"
#include "services/reconfig-mgr/pool_view.hpp"

namespace kc::reconfig {

using api::kDstNodeAnnotation;

// A kubecomp-sched pod, as much as the planner reads.
struct PodInfo {
  std::string ns;
  std::string name;
  std::string uid;
  std::chrono::system_clock::time_point created{};
  std::string nodeName;   // bound to; "" while pending
  std::string phase;      // status.phase
  std::string dstNode;    // annotation kubecomp.io/dst-node; "" if none
  std::int64_t gpus = 0;  // gpuRequest
  alloc::GpuModelFilter models;
  bool deleting = false;  // metadata.deletionTimestamp set
  // For idle-time recomposition (idle_planner.hpp): the effective CPU and memory request, the
  // expected run time (alloc::SchedPod::expectedRuntimeSeconds) and status.startTime.
  std::uint64_t cpuMilli = 0;
  std::uint64_t memoryMiB = 0;  // rounded up
  std::optional<std::int64_t> expectedRuntimeSeconds;
  std::optional<std::chrono::system_clock::time_point> started;

  std::string key() const { return ns + "/" + name; }
  // Waiting for a reconfiguration: unbound, not being deleted, not finished, with a dst-node.
  bool waiting() const {
    return nodeName.empty() && !deleting && !dstNode.empty() && phase != "Succeeded" &&
           phase != "Failed";
  }
  // Holds (or is about to hold) GPUs on its node.
  bool holdsNode() const { return !nodeName.empty() && phase != "Succeeded" && phase != "Failed"; }
};

// Reads a Pod object. Error "invalid" when it cannot be read (a bad kubecomp.io/gpu-models
// annotation, a bad quantity): such a pod is reported and skipped.
Result<PodInfo> parsePodInfo(const nlohmann::json& pod);

struct PodPlan {
  std::string pod;  // namespace/name
  std::string uid;
  std::string node;
  std::int64_t request = 0;
  std::int64_t deficit = 0;  // GPUs still to move to `node` for it
  enum class Verdict : std::uint8_t {
    kSatisfied,
    kMoving,
    kInsufficient
  } verdict = Verdict::kSatisfied;
  std::vector<std::string> sources;  // chosen GPUs, best first (kMoving)
  std::string reason;                // kInsufficient: why, for people
};

struct PlanResult {
  std::vector<PodPlan> pods;  // waiting pods of this pool, FCFS order
  // The moves to start now beside those in flight (alloc::movesToStart over every kMoving
  // pod's sources in FCFS order, best first, with PlanInputs::concurrency), and the first of
  // them: GPU, the pod it is for. Empty / nullopt: nothing to start.
  std::vector<Move> starts;
  std::optional<Move> next;
  // Every GPU a claim holds after planning: those bound pods still need on their node, those
  // of waiting pods on their destination and the sources chosen for them.
  std::set<std::string> claimed;
};

// A real request waits for this pool's fabric: some waiting pod of the pool still lacks GPUs
// (a move for it is planned, in flight, or the pool cannot supply it yet).
bool demandWaits(const PlanResult& plan);

// The pool as libcore's model sees it: one pool, the spec's nodes (CPU and memory capacity from
// `capacity` by node name, else 0; `unschedulable` nodes cordoned), every GPU of the view, with
// every GPU in `claimed` counted as in use (an unattached one as draining) so no policy picks
// it. A GPU attached to a host of no node of the pool is unhealthy here (not ours to move).
struct NodeCapacity {
  std::uint64_t cpuMilli = 0;
  std::uint64_t memoryMiB = 0;
  bool unschedulable = false;
};
Result<alloc::ClusterState> poolModel(
    const PoolSpec& spec, const PoolView& view, const std::set<std::string>& claimed,
    const std::map<std::string, NodeCapacity>* capacity = nullptr);

struct PlanInputs {
  const PoolSpec* spec = nullptr;
  const PoolView* view = nullptr;
  const std::vector<PodInfo>* pods = nullptr;  // every kubecomp-sched pod (waiting and bound)
  const ActiveMoves* active = nullptr;         // the moves in flight
  alloc::MoveConcurrency concurrency = alloc::kSerialMoves;
  alloc::GpuPolicy policy{};
  alloc::SplitMix64* rng = nullptr;
};

PlanResult planMoves(const PlanInputs& in);

}  // namespace kc::reconfig
