#pragma once
// Builders for pool-model test fixtures: makeCluster().pool("p0").node("n1", 4).unattached(2)
// reads as the cluster it builds. GPU ids are "g0000", "g0001", ... in creation order, so id
// order is inventory order.

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "libcore/alloc/pool_model.hpp"

namespace kc::alloc::test {

class ClusterBuilder {
 public:
  // Starts a new pool; later nodes and GPUs go into it.
  ClusterBuilder& pool(const std::string& name) {
    auto p = state_.addPool(name);
    REQUIRE(p.ok());
    pool_ = *p;
    return *this;
  }

  // A node of the current pool with `freeGpus` free GPUs attached (and `usedGpus` in use).
  ClusterBuilder& node(const std::string& name, std::uint32_t freeGpus, std::uint32_t usedGpus = 0,
                       std::uint64_t cpuMilli = 64'000, std::uint64_t memoryMiB = 256 * 1024) {
    auto n = state_.addNode(NodeSpec{
        .name = name, .pool = pool_, .cpuMilliCapacity = cpuMilli, .memoryMiBCapacity = memoryMiB});
    REQUIRE(n.ok());
    for (std::uint32_t i = 0; i < freeGpus + usedGpus; ++i) {
      addGpu(*n, i < usedGpus);
    }
    last_ = *n;
    return *this;
  }

  // Free GPUs of the current pool attached to no node.
  ClusterBuilder& unattached(std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) {
      addGpu(kNoNode, false);
    }
    return *this;
  }

  GpuIndex addGpu(NodeIndex node, bool inUse) {
    char id[16];
    std::snprintf(id, sizeof id, "g%04u", next_++);
    auto g = state_.addGpu(GpuSpec{
        .id = id, .uuid = std::string("GPU-") + id, .pool = pool_, .node = node, .inUse = inUse});
    REQUIRE(g.ok());
    return *g;
  }

  NodeIndex lastNode() const { return last_; }
  ClusterState& state() { return state_; }
  ClusterState build() { return state_; }

 private:
  ClusterState state_;
  PoolIndex pool_ = kNoPool;
  NodeIndex last_ = kNoNode;
  unsigned next_ = 0;
};

// prefix + n (+ "-" + m), built by appending: GCC 12 reports a false -Wrestrict on
// "literal" + std::string temporaries at -O3.
inline std::string named(std::string_view prefix, std::uint64_t n) {
  std::string out(prefix);
  out += std::to_string(n);
  return out;
}
inline std::string named(std::string_view prefix, std::uint64_t n, std::uint64_t m) {
  std::string out = named(prefix, n);
  out += '-';
  out += std::to_string(m);
  return out;
}

inline ClusterBuilder makeCluster() {
  return ClusterBuilder{};
}

}  // namespace kc::alloc::test
