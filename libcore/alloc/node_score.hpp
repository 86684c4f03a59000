#pragma once
// Node selection for a pod that needs pooled GPUs (paper 001, section V-A-1, Eq. 1, and the
// multi-pool filter of section V-C).
//
//   score(req, avail) = req / avail * 100   if avail >= req   (best-fit)
//                       avail - req         otherwise         (least-demand)
//
// avail is the number of free GPUs attached to the node, req the pod's GPU count. Best-fit keeps
// the nodes with many GPUs for GPU-hungry pods; least-demand, when every node needs GPUs moved
// to it, picks the node that needs the fewest moves (each move costs 10-20 s on real chassis).
//
// selectNode is one pass over the nodes:
//   1. filter: cordoned nodes, nodes lacking CPU or memory, nodes wired to no pool when GPUs are
//      needed, and nodes whose pool cannot supply the GPUs (free attached on the node + free on
//      the pool's other nodes + free unattached < req). In the preconfigured ("no
//      composability") mode nothing moves, so the node itself must hold req free GPUs.
//   2. order the survivors with the policy's comparator (policies differ only in it, see
//      NodePolicy), ties broken by node name, so the choice never depends on input order.
//   3. return the winner and its deficit = max(0, req - avail): the GPUs to move to it.
// Every step reads O(1) aggregates of ClusterState, so a decision is O(nodes).
//
// Ordering is exact: within one decision req is fixed, so "higher req/avail" is "smaller
// avail" and no division (and no rounding, unlike the original's integer req*100/avail) is
// needed. eq1Score() gives the score itself, as the original reported it, for display.

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// Paper Eq. 1 as the original scheduler plugin computed it in integers: req*100/avail when
// avail > req, 100 when avail == req (so also req == avail == 0), avail - req (negative)
// otherwise. Total: no input divides by zero or overflows. Range: [-req, 100].
std::int64_t eq1Score(std::uint32_t req, std::uint32_t avail);

// Composable: GPUs may be moved to the chosen node (the KubeComp case). Preconfigured: the
// cluster's GPU placement is fixed (the paper's baseline clusters without composability).
enum class Composability : std::uint8_t { Composable, Preconfigured };

// A node-selection policy: how two feasible nodes compare for a pod needing `req` GPUs.
// compare < 0: a is preferred; > 0: b is preferred; 0: tie (broken by node name).
struct NodePolicy {
  std::string_view name;
  std::string_view description;
  int (*compare)(const NodeState& a, const NodeState& b, std::uint32_t req);
};

// The policies of the paper's Fig. 13 (no policy, best-fit only, least-demand only, both).
// Each is listed in policy_registry.hpp under its kName.
struct Eq1NodePolicy {
  static constexpr std::string_view kName = "eq1";
  static constexpr std::string_view kDescription =
      "paper Eq. 1: best-fit among nodes with enough free GPUs, else least-demand";
  static int compare(const NodeState& a, const NodeState& b, std::uint32_t req);
};
struct BestFitNodePolicy {
  static constexpr std::string_view kName = "best-fit";
  static constexpr std::string_view kDescription =
      "best-fit among nodes with enough free GPUs; no preference among the others";
  static int compare(const NodeState& a, const NodeState& b, std::uint32_t req);
};
struct LeastDemandNodePolicy {
  static constexpr std::string_view kName = "least-demand";
  static constexpr std::string_view kDescription =
      "fewest GPUs to move (all nodes with enough free GPUs tie)";
  static int compare(const NodeState& a, const NodeState& b, std::uint32_t req);
};
struct FirstFeasibleNodePolicy {
  static constexpr std::string_view kName = "none";
  static constexpr std::string_view kDescription =
      "no policy: the first feasible node in name order (Fig. 13 baseline)";
  static int compare(const NodeState& a, const NodeState& b, std::uint32_t req);
};

// Why a node was filtered out.
enum class NodeFilterReason : std::uint8_t {
  Feasible,
  Cordoned,
  InsufficientCpu,
  InsufficientMemory,
  NoPool,     // GPUs needed but the node is wired to no pool
  PoolShort,  // the node's pool has fewer than req free GPUs
  NodeShort,  // preconfigured mode: the node itself has fewer than req free GPUs
};
std::string_view toString(NodeFilterReason reason);

// The filter of step 1 for one node, O(1).
NodeFilterReason filterNode(const ClusterState& state, NodeIndex node, const PodRequest& pod,
                            Composability mode);

struct NodeChoice {
  NodeIndex node = kNoNode;
  std::uint32_t deficit = 0;  // GPUs to move to the node before the pod can run
  std::int64_t score = 0;     // eq1Score(req, avail) of the chosen node, for display
  friend bool operator==(const NodeChoice&, const NodeChoice&) = default;
};

// Error "unschedulable" (message counts the nodes per filter reason) when no node passes.
Result<NodeChoice> selectNode(const ClusterState& state, const PodRequest& pod,
                              const NodePolicy& policy, Composability mode);

// selectNode over `candidates` only (any order, no duplicates, every index < nodeCount()): the
// same filter, comparator and name tie-break, so when the left-out nodes would all be filtered
// out the choice is selectNode's. For callers that can skip whole groups cheaply, e.g. the
// simulator leaves out every node of a pool holding fewer than req free GPUs (those nodes fail
// the filter with PoolShort or NodeShort). O(candidates).
Result<NodeChoice> selectNodeAmong(const ClusterState& state, const PodRequest& pod,
                                   const NodePolicy& policy, Composability mode,
                                   std::span<const NodeIndex> candidates);

// Free GPUs of the accepted models only: node[n] attached to node n, pool[p] in pool p
// (attached or not). O(gpus).
struct ModelFreeGpus {
  std::vector<std::uint32_t> node;
  std::vector<std::uint32_t> pool;
};
ModelFreeGpus countFreeGpus(const ClusterState& state, const GpuModelFilter& models);

// selectNode for a pod that accepts only `models` (gpu_model.hpp): the same filter, policies
// and tie-break, with every "free GPUs" (the node's avail, the pool's supply) counted over GPUs
// of an accepted model; the deficit is then the accepted GPUs to move (chooseGpus with the
// same filter picks them). An unconstrained filter, or a pod needing no GPU, is selectNode.
// O(gpus + nodes). Error "unschedulable" as selectNode's, naming the accepted models.
Result<NodeChoice> selectNodeForModels(const ClusterState& state, const PodRequest& pod,
                                       const GpuModelFilter& models, const NodePolicy& policy,
                                       Composability mode);

// selectNodeForModels over `candidates` only (as selectNodeAmong is to selectNode): for the
// scheduler, which first runs kube-scheduler's filters (node_filter.hpp) and then Eq. 1 over the
// survivors. O(gpus + candidates).
Result<NodeChoice> selectNodeForModelsAmong(const ClusterState& state, const PodRequest& pod,
                                            const GpuModelFilter& models, const NodePolicy& policy,
                                            Composability mode,
                                            std::span<const NodeIndex> candidates);

// The selection of selectNodeForModels among the nodes `admit` accepts, asking `admit` only of
// nodes that pass the pool filter and would beat the best admitted node so far (the scheduler's
// kube filters, costly per node, then run on a few nodes instead of all). The same winner and
// deficit as selectNodeForModelsAmong over {n : admit(n)}; the error message when nothing is
// admitted counts only the pool filter's reasons. O(nodes) + the admit calls.
Result<NodeChoice> selectNodeAdmitted(const ClusterState& state, const PodRequest& pod,
                                      const GpuModelFilter& models, const NodePolicy& policy,
                                      Composability mode,
                                      const std::function<bool(NodeIndex)>& admit);

}  // namespace kc::alloc
