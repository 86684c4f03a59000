#pragma once
// Aggregates recomputed from the GPU list on every call: the slow, obviously-right oracle the
// O(1) aggregates of ClusterState are checked against.

#include <cstdint>

#include "libcore/alloc/pool_model.hpp"

namespace kc::alloc::test {

inline std::uint32_t naiveFreeOnNode(const ClusterState& s, NodeIndex n) {
  std::uint32_t count = 0;
  for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
    count += (s.gpu(g).node == n && s.gpu(g).free()) ? 1 : 0;
  }
  return count;
}

inline std::uint32_t naiveAttached(const ClusterState& s, NodeIndex n) {
  std::uint32_t count = 0;
  for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
    count += s.gpu(g).node == n ? 1 : 0;
  }
  return count;
}

inline std::uint32_t naiveFreeInPool(const ClusterState& s, PoolIndex p, bool unattachedOnly) {
  std::uint32_t count = 0;
  for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
    const GpuState& gpu = s.gpu(g);
    count += (gpu.pool == p && gpu.free() && (!unattachedOnly || !gpu.attached())) ? 1 : 0;
  }
  return count;
}

// Every aggregate of the state equals its recomputation.
inline bool aggregatesConsistent(const ClusterState& s) {
  std::uint64_t total = 0;
  for (PoolIndex p = 0; p < s.poolCount(); ++p) {
    if (s.pool(p).freeGpus != naiveFreeInPool(s, p, false) ||
        s.pool(p).freeUnattachedGpus != naiveFreeInPool(s, p, true)) {
      return false;
    }
    total += s.pool(p).freeGpus;
  }
  for (NodeIndex n = 0; n < s.nodeCount(); ++n) {
    if (s.node(n).freeGpus != naiveFreeOnNode(s, n) ||
        s.node(n).attachedGpus != naiveAttached(s, n) ||
        s.nodeGpus(n).size() != naiveAttached(s, n)) {
      return false;
    }
    for (GpuIndex g : s.nodeGpus(n)) {
      if (s.gpu(g).node != n) {
        return false;
      }
    }
  }
  return total == s.freeGpus();
}

}  // namespace kc::alloc::test
