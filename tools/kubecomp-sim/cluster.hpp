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
Result<alloc::ClusterState> buildClusterFromNodes(const std::vector<NodeSpec>& nodes,
                                                  std::uint32_t nodesPerPool);

std::uint64_t totalGpus(const alloc::ClusterState& state);

}  // namespace kc::sim
