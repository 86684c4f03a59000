#pragma once
// Building the simulated cluster as a kc::alloc::ClusterState, the same pool model the scheduler
// keeps. Two sources: a synthetic layout (pools of identical nodes with a per-node initial GPU
// attachment such as "4+4+8+8") or the Alibaba node list grouped into pools.

#include <cstdint>
#include <string>
#include <vector>

#include "libcore/alloc/pool_model.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/trace_reader.hpp"

namespace kc::sim {

struct LayoutSpec {
  std::uint32_t pools = 1;
  // GPUs attached to each node of one pool at the start, e.g. {4,4,8,8}; the number of
  // entries is the number of nodes per pool.
  std::vector<std::uint32_t> perNodeGpus;
  std::uint32_t unattachedPerPool = 0;  // GPUs in each pool attached to no node at the start
  std::int64_t nodeCpuMilli = 0;
  std::int64_t nodeMemoryMib = 0;
  std::string gpuModel{};  // the model of every GPU ("": unknown, serves no gpu_spec)
  // Chassis: 0 keeps the ids g<index> (no chassis part: to the move schedule each GPU is a
  // chassis of its own); N > 0 deals each pool's GPUs round-robin, in inventory order, over
  // ceil(pool GPUs / N) chassis (ChassisNames).
  std::uint32_t gpusPerChassis = 0;
};

// The ids of a pool's GPUs when they sit in chassis of `gpusPerChassis` (0: none): the i-th GPU
// of the pool (inventory order: node by node, then the unattached ones) goes to chassis
// i mod C, C = ceil(pool GPUs / gpusPerChassis), as tools/demo's topology deals the testbed's
// GPUs (a 4+4 pool of 2 chassis x 4 holds 2 GPUs of each chassis on each node). Chassis are
// numbered across the cluster (falcon-0, falcon-1, ... pool by pool); an id is
// "<chassis>.g<global index, 7 digits>", e.g. "falcon-1.g0000005", as fabric ids are
// "<chassis>.<local id>" (alloc::chassisOfGpu).
class ChassisNames {
 public:
  explicit ChassisNames(std::uint32_t gpusPerChassis) : perChassis_(gpusPerChassis) {}
  // A new pool of `gpus` GPUs begins.
  void startPool(std::uint64_t gpus);
  // The id of the pool's next GPU, whose global index is `index`.
  std::string nextId(std::uint64_t index);

 private:
  std::uint32_t perChassis_;
  std::uint64_t firstChassis_ = 0;  // of the current pool
  std::uint64_t chassisInPool_ = 1;
  std::uint64_t nextChassis_ = 0;  // first chassis number of the next pool
  std::uint64_t inPool_ = 0;       // GPUs of the current pool named so far
};

// "4+4+8+8" -> {4,4,8,8}; "0+8" -> {0,8}. Error "invalid" for anything else.
Result<std::vector<std::uint32_t>> parseLayout(const std::string& text);

// Nodes are named n<index, 6 digits> in pool order, GPUs g<index, 7 digits>, pools
// pool<index, 5 digits>: zero-padded so that name order (the node-selection tie-break) is
// index order.
Result<alloc::ClusterState> buildCluster(const LayoutSpec& spec);

// Nodes of the Alibaba node list, each keeping its own GPUs attached (of the node's model),
// grouped into pools of
// `nodesPerPool` consecutive nodes (0: one pool holding every node).
// `gpusPerChassis` as LayoutSpec's (0: ids g<index>, no chassis).
Result<alloc::ClusterState> buildClusterFromNodes(const std::vector<NodeSpec>& nodes,
                                                  std::uint32_t nodesPerPool,
                                                  std::uint32_t gpusPerChassis = 0);

std::uint64_t totalGpus(const alloc::ClusterState& state);

}  // namespace kc::sim
