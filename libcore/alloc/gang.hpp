#pragma once
// Gang planning (issue 27): the pods of one gang (a scheduler-plugins PodGroup, a Kueue pod
// group) placed as one unit, all or nothing. The pool policy chooses the node of every member
// and the GPUs to move for all of them at once, on one working copy of the cluster: member k is
// placed (placePod: kube filters, then Eq. 1) on the cluster as it will be once members 0..k-1
// sit where the plan put them with their GPUs moved there. The moves of the whole gang are then
// scheduled together (move_schedule.hpp), in parallel across pools and, within a pool, across
// chassis, so the gang is ready when its last move lands instead of after one pod's moves after
// another's.
//
// Members are planned largest GPU request first (first-fit decreasing; ties in the caller's
// order). Within one pool any free GPU can be moved to any node of the pool, so on a cluster of
// one pool whose nodes have room for the members' CPU and memory the plan is found whenever
// one exists (the pool's free GPUs cover the sum of the requests). Across pools the choice of
// pool per member is a bin packing the greedy pass may miss; the plan it returns is always
// valid (gang_test checks both against a brute-force oracle).
//
// Order and reserve by gang, not by pod: planGangsInOrder plans gangs one after another in the
// queue's order (pod_order.hpp: by the gang's earliest member), each on the cluster as the
// earlier gangs' plans leave it, each all or nothing. A gang that does not fit takes nothing,
// so a later gang never holds part of what an earlier one needs, and two gangs that each fit
// alone but not together cannot deadlock: the earlier one gets everything, the later nothing.
//
// gangNeverFits says at once when a gang cannot run on this cluster even with every GPU free
// and moved where it is wanted (a member larger than any pool, or more GPUs in all than the
// cluster's healthy GPUs), instead of letting it wait forever.
//
// One loop, two callers: planGangWith is the gang rule itself (the order, each member on the
// cluster as the earlier ones left it, the GPUs moved and allocated, all or nothing, the moves'
// schedule). kubecomp-sched reaches it through planGangOn, whose members' nodes are chosen by
// placePod; the simulator (tools/kubecomp-sim) calls it with its own node choice for one pod
// (the same Eq. 1 selection, sim_parity_test), its GPU policy's generator and its CPU and memory
// bookkeeping, so a gang is decided in both by the same code.
//
// Pure: no I/O, threads or clocks.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/move_schedule.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pod_order.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

struct GangOptions {
  PlacementOptions placement{};
  // Which GPUs move (gpu_candidate.hpp); chassis-spread makes a gang's moves run side by side.
  GpuPolicy gpuPolicy{ChassisSpreadGpuPolicy::kName, ChassisSpreadGpuPolicy::kDescription, false,
                      &ChassisSpreadGpuPolicy::rank};
  // The fabric: moves in flight per chassis and per pool (reconfig-mgr's flags), and how long a
  // move takes (any unit; GangPlan::ready is in it).
  MoveConcurrency concurrency{1, 0};
  std::int64_t moveTime = 1;
  // false: the moves get no slots (start, end, ready and serialReady stay 0), for a caller that
  // books them on a fabric of its own (the simulator's, which knows the moves already booked).
  bool timeline = true;
};

// Where one member goes.
struct GangMemberPlacement {
  std::size_t member = 0;             // index into the members given
  NodeIndex node = kNoNode;           // the node chosen
  std::uint32_t gpus = 0;             // its GPU request
  std::uint32_t deficit = 0;          // GPUs to move to the node for it (after the earlier members)
  std::vector<GpuIndex> allocated{};  // the GPUs of the node the plan gave it (`gpus` of them)
  friend bool operator==(const GangMemberPlacement&, const GangMemberPlacement&) = default;
};

// One GPU move of the plan, with its slot on the fabric's timeline (from 0).
struct GangMove {
  GpuIndex gpu = 0;
  NodeIndex from = kNoNode;  // kNoNode: unattached
  NodeIndex to = kNoNode;
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::size_t member = 0;  // the member it is moved for (index into the members given)
};

struct GangPlan {
  std::vector<GangMemberPlacement> placements;  // one per member, in the members' order
  std::vector<GangMove> moves;                  // every move the gang needs
  std::int64_t ready = 0;        // when the last move lands (0: none needed); moves run in parallel
                                 // across pools and chassis as GangOptions::concurrency allows
  std::int64_t serialReady = 0;  // the same moves one after another (the paper's fabric)
};

// One member as the gang loop sees it.
struct GangMember {
  std::uint32_t gpus = 0;                  // its GPU request
  const GpuModelFilter* models = nullptr;  // the GPU models it accepts (null: any)
};

// What the callers of the gang loop do their own way: the node of one member, and what a placed
// member takes besides its GPUs (kubecomp-sched: its requests in the node usage and its place
// among the placed pods; the simulator: its CPU and memory in the model).
class GangSite {
 public:
  virtual ~GangSite() = default;
  // Member k's node and the GPUs to move there, on `state` as the members placed before it left
  // it. Error "unschedulable" when it has none (the message says why); any other error ends
  // the plan with it.
  virtual Result<NodeChoice> chooseNode(std::size_t k, const ClusterState& state) = 0;
  // Member k now sits on `node`, its GPUs moved there and allocated in `state`.
  virtual Status placed(std::size_t k, NodeIndex node, ClusterState& state) = 0;
};

// The gang rule (the header comment): the members placed largest GPU request first (ties in the
// given order), each on `state` as the members before it left it: its node from the site, the
// deficit chosen by options.gpuPolicy (with `rng`, which a random policy needs) and moved there,
// its GPUs allocated, the site told. Leaves the plan applied on `state` (as planGangOn); on
// error the state may be half changed and the caller restores it. Errors: the site's.
Result<GangPlan> planGangWith(std::span<const GangMember> members, GangSite& site,
                              ClusterState& state, const GangOptions& options,
                              SplitMix64* rng = nullptr);

// Plans gangs against one cluster. Keeps its working copy between calls (refreshed without
// allocating when the cluster has the same shape; ClusterState::assignFrom).
class GangPlanner {
 public:
  // The gang `members` (all of them, each a whole pod: the caller passes only the members that
  // must start together, e.g. minMember of them) placed on the cluster (nodes[i], usage[i],
  // state.node(i) the same node, as placePod takes them). Errors: "unschedulable" when some
  // member has no place once the members before it are placed (the message names it and gives
  // kube-scheduler's FitError); "insufficient" when the gang can never fit (gangNeverFits);
  // "invalid" as placePod's. The cluster is not changed.
  Result<GangPlan> plan(std::span<const SchedPod* const> members, std::span<const SchedNode> nodes,
                        std::span<const NodeUsage> usage, const ClusterState& state,
                        const GangOptions& options);

 private:
  ClusterState work_;
  std::vector<NodeUsage> use_;
};

// Plans `members` on `state` and `usage` and leaves the plan applied there (GPUs moved and
// allocated, requests added): for a caller that commits, as planGangsInOrder does. On error
// the inputs may be half changed: the caller restores them (journal, copy).
Result<GangPlan> planGangOn(std::span<const SchedPod* const> members,
                            std::span<const SchedNode> nodes, std::vector<NodeUsage>& usage,
                            ClusterState& state, const GangOptions& options);

// Why the gang can never run here, or nullopt when it might: some member asks more GPUs (of the
// models it accepts) than the largest pool holds healthy (preconfigured: than any node has
// attached), or all members together more than every pool together. In-use GPUs count as
// available (their pods end); unhealthy ones do not.
std::optional<std::string> gangNeverFits(std::span<const SchedPod* const> members,
                                         const ClusterState& state, Composability mode);

// One gang waiting: its members and its place in the queue.
struct GangRequest {
  std::string name;                        // for messages ("ns/podgroup")
  PodOrderKey order{};                     // its earliest member's key (or the PodGroup's)
  std::vector<const SchedPod*> members{};  // the members that must start together
};

// The gangs planned in queue order (podBefore on GangRequest::order), each on the cluster as
// the earlier gangs' plans leave it, all or nothing. Result i belongs to gangs[i].
std::vector<Result<GangPlan>> planGangsInOrder(std::span<const GangRequest> gangs,
                                               std::span<const SchedNode> nodes,
                                               std::span<const NodeUsage> usage,
                                               const ClusterState& state,
                                               const GangOptions& options);

}  // namespace kc::alloc
