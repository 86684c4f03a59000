// The pool model's journal (rollbackTo) and assignFrom (libcore/alloc/pool_model.hpp): random
// mutation sequences, valid and invalid, undone back to a mark must leave the model exactly as
// it was, the order of the GPUs on each node included (placement takes GPUs first-free in that
// order, so a what-if question that changed it would change later decisions).
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "libcore/alloc/pool_model.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

using namespace kc::alloc;

namespace {

// Everything a reader can see, in order.
void requireExactlyEqual(const ClusterState& a, const ClusterState& b) {
  REQUIRE(a.poolCount() == b.poolCount());
  REQUIRE(a.nodeCount() == b.nodeCount());
  REQUIRE(a.gpuCount() == b.gpuCount());
  CHECK(a.freeGpus() == b.freeGpus());
  for (PoolIndex p = 0; p < a.poolCount(); ++p) {
    CHECK(a.pool(p) == b.pool(p));
    const auto pa = a.poolGpus(p);
    const auto pb = b.poolGpus(p);
    CHECK(std::vector<GpuIndex>(pa.begin(), pa.end()) ==
          std::vector<GpuIndex>(pb.begin(), pb.end()));
  }
  for (NodeIndex n = 0; n < a.nodeCount(); ++n) {
    CAPTURE(n);
    CHECK(a.node(n) == b.node(n));
    const auto na = a.nodeGpus(n);
    const auto nb = b.nodeGpus(n);
    CHECK(std::vector<GpuIndex>(na.begin(), na.end()) ==
          std::vector<GpuIndex>(nb.begin(), nb.end()));
  }
  for (GpuIndex g = 0; g < a.gpuCount(); ++g) {
    CHECK(a.gpu(g) == b.gpu(g));
  }
}

// 2 pools of 3 nodes (0-4 GPUs attached each, 0-3 unattached), one pool-less node.
ClusterState randomCluster(std::mt19937_64& gen) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  auto b = test::makeCluster();
  for (std::uint64_t p = 0; p < 2; ++p) {
    b.pool(test::named("p", p));
    for (std::uint64_t n = 0; n < 3; ++n) {
      const auto free = static_cast<std::uint32_t>(uni(0, 3));
      const auto used = static_cast<std::uint32_t>(uni(0, 1));
      b.node(test::named("n", p, n), free, used, 16'000, 64 * 1024);
    }
    b.unattached(static_cast<std::uint32_t>(uni(0, 3)));
  }
  ClusterState s = b.build();
  REQUIRE(s.addNode(NodeSpec{"cpu-only", kNoPool, 8'000, 1024}).ok());
  return s;
}

// One random mutation (it may fail: nothing changes then, nothing is journaled).
void mutate(ClusterState& s, std::mt19937_64& gen) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  const auto g = static_cast<GpuIndex>(uni(0, static_cast<std::int64_t>(s.gpuCount()) - 1));
  const auto n = static_cast<NodeIndex>(uni(0, static_cast<std::int64_t>(s.nodeCount()) - 1));
  switch (uni(0, 8)) {
    case 0:
      (void)s.allocateGpu(g);
      break;
    case 1:
      (void)s.releaseGpu(g);
      break;
    case 2:
      (void)s.attachGpu(g, n);
      break;
    case 3:
      (void)s.detachGpu(g);
      break;
    case 4:
      (void)s.reserve(n, static_cast<std::uint64_t>(uni(0, 9'000)),
                      static_cast<std::uint64_t>(uni(0, 40'000)));
      break;
    case 5:
      (void)s.release(n, static_cast<std::uint64_t>(uni(0, 9'000)),
                      static_cast<std::uint64_t>(uni(0, 40'000)));
      break;
    case 6:
      (void)s.setGpuHealthy(g, uni(0, 1) == 1);
      break;
    case 7:
      (void)s.setGpuDraining(g, uni(0, 1) == 1);
      break;
    default:
      (void)s.setNodeSchedulable(n, uni(0, 1) == 1);
      break;
  }
}

}  // namespace

TEST_CASE("pool journal: rollback to a mark restores the model exactly, GPU order included",
          "[alloc][pool]") {
  const std::uint64_t seed = GENERATE(range(1, 201));
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  ClusterState s = randomCluster(gen);
  for (int i = 0; i < 20; ++i) {
    mutate(s, gen);  // not journaled: the starting point
  }
  s.setJournaling(true);
  const ClusterState start = s;
  const std::size_t outer = s.journalSize();
  for (int i = 0; i < 40; ++i) {
    mutate(s, gen);
  }
  const ClusterState middle = s;
  const std::size_t inner = s.journalSize();
  CHECK(inner > outer);  // something was journaled
  for (int i = 0; i < 40; ++i) {
    mutate(s, gen);
  }
  s.rollbackTo(inner);
  requireExactlyEqual(s, middle);
  s.rollbackTo(outer);
  requireExactlyEqual(s, start);
  CHECK(s.journalSize() == outer);
}

TEST_CASE("pool journal: nothing is journaled while it is off, a rollback then changes nothing",
          "[alloc][pool]") {
  std::mt19937_64 gen(7);
  ClusterState s = randomCluster(gen);
  for (int i = 0; i < 50; ++i) {
    mutate(s, gen);
  }
  CHECK(s.journalSize() == 0);
  const ClusterState before = s;
  s.rollbackTo(0);
  requireExactlyEqual(s, before);
}

TEST_CASE("pool model: assignFrom equals copy assignment, whether the inventory is shared or not",
          "[alloc][pool]") {
  const std::uint64_t seed = GENERATE(range(1, 51));
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  const ClusterState base = randomCluster(gen);
  ClusterState scratch = base;  // shares the inventory
  ClusterState real = base;
  for (int i = 0; i < 30; ++i) {
    mutate(real, gen);
    mutate(scratch, gen);
  }
  scratch.setJournaling(true);
  mutate(scratch, gen);
  scratch.assignFrom(real);
  requireExactlyEqual(scratch, real);
  CHECK(scratch.journalSize() == 0);
  // Another inventory (one more GPU): a whole copy.
  ClusterState other = real;
  REQUIRE(other.addGpu(GpuSpec{"extra", "GPU-extra", "", 0, kNoNode, false, true, false}).ok());
  scratch.assignFrom(other);
  requireExactlyEqual(scratch, other);
  REQUIRE(scratch.findGpu("extra").ok());
}
