#pragma once
// Which GPU to move next in one pool, decided level-triggered from what is true now: the
// pods waiting for a reconfiguration (unbound, schedulerName kubecomp-sched, annotation
// kubecomp.io/dst-node naming a node of this pool), the pool's inventory and usage, and the
// move in flight. Pure.
//
// Deficit of a waiting pod P on node N, pods taken in the queue order both daemons share
// (libcore/alloc/pod_order.hpp: spec.priority, then creation time, namespace, name):
//   deficit(P) = gpuRequest(P) - free GPUs on N of a model P accepts that no earlier claim
//                holds - the moves in flight for P
// where the earlier claims on N are the GPUs that bound pods on N still need (their request
// minus what the device plugin shows in use there) and those of earlier waiting pods on N.
// Every waiting pod claims what it needs of its destination's free GPUs before any pod's
// sources are chosen, so a GPU delivered to (or free on) a waiting pod's node is never the
// source of another pod's move while that pod waits (issue 24 §6: a GPU moved twice). A GPU a
// move delivered for a pod (`Deliveries`) stays its own until the pod binds or stops waiting
// for that node, even while the pool cannot supply the rest of its request.
// Sources are chosen by a libcore GPU policy (Algorithm 1 family, default unattached-first)
// among the free GPUs not on N that no claim holds; the GPUs chosen for one pod are claimed,
// so a later pod never plans on them. A pod the pool cannot supply in full gets no move at
// all and holds no claim beyond its deliveries (so it does not stop the others; it is planned
// again, claiming its node's free GPUs only in its turn, as in the single FCFS pass).

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
#include "libcore/alloc/pod_order.hpp"
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
  std::int32_t priority = 0;  // spec.priority
  std::string nodeName;       // bound to; "" while pending
  std::string phase;          // status.phase
  std::string dstNode;        // annotation kubecomp.io/dst-node; "" if none
  std::int64_t gpus = 0;      // gpuRequest
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

// The queue order kubecomp-sched uses too (alloc::podBefore): higher priority, then older, then
// namespace and name.
alloc::PodOrderKey orderKey(const PodInfo& p);
bool queuedBefore(const PodInfo& a, const PodInfo& b);

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

// The GPUs demand moves delivered to a waiting pod's destination, by GPU id: held for that pod
// (by uid) while it waits for that node. The pool worker keeps them across plans (the journal
// keeps only its latest records) with noteDeliveries.
struct Delivery {
  std::string podUid;
  std::string node;
  friend bool operator==(const Delivery&, const Delivery&) = default;
};
using Deliveries = std::map<std::string, Delivery>;
// Adds the journal's succeeded demand moves (a newer record of a GPU replaces an older one) and
// drops every delivery whose pod no longer waits for its node (bound, deleted, request withdrawn
// or moved to another node).
void noteDeliveries(const Journal& journal, const std::vector<PodInfo>& pods,
                    Deliveries& delivered);

struct PlanInputs {
  const PoolSpec* spec = nullptr;
  const PoolView* view = nullptr;
  const std::vector<PodInfo>* pods = nullptr;  // every kubecomp-sched pod (waiting and bound)
  const ActiveMoves* active = nullptr;         // the moves in flight
  alloc::MoveConcurrency concurrency = alloc::kSerialMoves;
  alloc::GpuPolicy policy{};
  alloc::SplitMix64* rng = nullptr;
  const Deliveries* delivered = nullptr;  // null: none
};

PlanResult planMoves(const PlanInputs& in);

}  // namespace kc::reconfig
