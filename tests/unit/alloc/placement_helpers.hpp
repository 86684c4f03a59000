#pragma once
// Shared fixtures of the queue and recomposition policy tests (backfill_test.cpp,
// idle_recompose_test.cpp): placement rules with the default policies, a pod request, and a
// running pod on a builder-made cluster (cluster_builder.hpp).

#include <cstdint>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"

namespace kc::alloc::test {

inline PlacementRules rules(std::int64_t moveTime, Composability mode = Composability::Composable) {
  return PlacementRules{mode, *findNodePolicy("eq1"), *findGpuPolicy("unattached-first"), moveTime};
}

inline PodRequest pod(std::uint32_t gpus, std::uint64_t cpuMilli = 1000) {
  return PodRequest{cpuMilli, 1024, gpus};
}

// A running pod on `node` holding the listed GPUs (already in use in the builder) and
// `cpuMilli` CPU (the caller reserves it on the node), ending at `end`.
inline RunningPod runningOn(const ClusterState& s, const char* node, std::vector<const char*> gpus,
                            std::int64_t end, std::uint64_t cpuMilli = 0) {
  RunningPod r;
  r.node = *s.findNode(node);
  r.pod = PodRequest{cpuMilli, 0, static_cast<std::uint32_t>(gpus.size())};
  for (const char* g : gpus) {
    r.gpus.push_back(*s.findGpu(g));
  }
  r.end = end;
  return r;
}

}  // namespace kc::alloc::test
