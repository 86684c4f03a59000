#pragma once
// Shared fixtures of the queue and recomposition policy tests (backfill_test.cpp,
// idle_recompose_test.cpp): placement rules with the default policies, a pod request, and a
// running pod on a builder-made cluster (cluster_builder.hpp).

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

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

// The queue property tests' cluster: 1-2 pools of 2-3 nodes, 0-4 GPUs attached each, 0-3
// unattached; 16 CPUs a node. `minPoolGpus`: the smallest pool's GPU count (a request up to it
// runs on the empty cluster).
inline ClusterState randomQueueCluster(std::mt19937_64& gen, std::uint32_t& minPoolGpus) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  auto b = makeCluster();
  minPoolGpus = 1000;
  const int pools = static_cast<int>(uni(1, 2));
  for (int p = 0; p < pools; ++p) {
    b.pool(named("p", static_cast<std::uint64_t>(p)));
    std::uint32_t poolGpus = 0;
    const int nodes = static_cast<int>(uni(2, 3));
    for (int n = 0; n < nodes; ++n) {
      const auto g = static_cast<std::uint32_t>(uni(0, 4));
      poolGpus += g;
      b.node(named("n", static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(n)), g, 0, 16'000,
             64 * 1024);
    }
    const auto u = static_cast<std::uint32_t>(uni(0, 3));
    b.unattached(u);
    minPoolGpus = std::min(minPoolGpus, poolGpus + u);
  }
  return b.build();
}

}  // namespace kc::alloc::test
