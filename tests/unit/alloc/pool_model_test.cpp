#include "libcore/alloc/pool_model.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <tuple>

#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/naive_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;

namespace {

// Observable state, for "an error changes nothing".
bool sameState(const ClusterState& a, const ClusterState& b) {
  if (a.poolCount() != b.poolCount() || a.nodeCount() != b.nodeCount() ||
      a.gpuCount() != b.gpuCount() || a.freeGpus() != b.freeGpus()) {
    return false;
  }
  for (PoolIndex p = 0; p < a.poolCount(); ++p) {
    if (!(a.pool(p) == b.pool(p))) {
      return false;
    }
  }
  for (NodeIndex n = 0; n < a.nodeCount(); ++n) {
    if (!(a.node(n) == b.node(n))) {
      return false;
    }
  }
  for (GpuIndex g = 0; g < a.gpuCount(); ++g) {
    if (!(a.gpu(g) == b.gpu(g))) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("pool model: builder aggregates match the inventory", "[alloc][pool]") {
  auto c = makeCluster()
               .pool("p0")
               .node("n1", 2, 1)
               .node("n2", 0)
               .unattached(3)
               .pool("p1")
               .node("m1", 4);
  const ClusterState& s = c.state();
  REQUIRE(s.poolCount() == 2);
  CHECK(s.pool(0).nodes == 2);
  CHECK(s.pool(0).gpus == 6);
  CHECK(s.pool(0).freeGpus == 5);
  CHECK(s.pool(0).freeUnattachedGpus == 3);
  CHECK(s.node(0).freeGpus == 2);
  CHECK(s.node(0).attachedGpus == 3);
  CHECK(s.node(1).freeGpus == 0);
  CHECK(s.pool(1).freeGpus == 4);
  CHECK(s.freeGpus() == 9);
  CHECK(*s.findNode("m1") == 2);
  CHECK(*s.findPool("p1") == 1);
  CHECK(s.gpu(*s.findGpu("g0003")).node == kNoNode);
  CHECK(s.findNode("nope").error().code == "not_found");
  CHECK(test::aggregatesConsistent(s));
}

TEST_CASE("pool model: invalid building input is rejected and changes nothing", "[alloc][pool]") {
  auto c = makeCluster().pool("p0").node("n1", 1).pool("p1").node("m1", 0);
  ClusterState& s = c.state();
  const ClusterState before = s;

  CHECK(s.addPool("").error().code == "invalid");
  CHECK(s.addPool("p0").error().code == "conflict");
  CHECK(s.addNode(NodeSpec{.name = ""}).error().code == "invalid");
  CHECK(s.addNode(NodeSpec{.name = "n1", .pool = 0}).error().code == "conflict");
  CHECK(s.addNode(NodeSpec{.name = "x", .pool = 7}).error().code == "invalid");
  CHECK(s.addGpu(GpuSpec{.id = "", .pool = 0}).error().code == "invalid");
  CHECK(s.addGpu(GpuSpec{.id = "g0000", .pool = 0}).error().code == "conflict");
  CHECK(s.addGpu(GpuSpec{.id = "x", .pool = 9}).error().code == "invalid");
  CHECK(s.addGpu(GpuSpec{.id = "x", .pool = 0, .node = 42}).error().code == "invalid");
  // A GPU of pool p0 cannot sit on m1 (pool p1): a node reaches only its pool's GPUs.
  CHECK(s.addGpu(GpuSpec{.id = "x", .pool = 0, .node = 1}).error().code == "invalid");
  CHECK(s.addGpu(GpuSpec{.id = "x", .pool = 0, .inUse = true}).error().code == "invalid");
  CHECK(sameState(s, before));
}

TEST_CASE("pool model: mutators validate and report the reason", "[alloc][pool]") {
  // n1: g0000 free; n2: g0001 in use; g0002 unattached; pool p1: m1 (no GPUs).
  auto c = makeCluster()
               .pool("p0")
               .node("n1", 1)
               .node("n2", 0, 1)
               .unattached(1)
               .pool("p1")
               .node("m1", 0);
  ClusterState& s = c.state();
  using Op = std::function<kc::Status(ClusterState&)>;
  // clang-format off
  auto [what, op, code] = GENERATE(table<std::string, Op, std::string>({
    {"attach to a node of another pool", [](ClusterState& st) { return st.attachGpu(2, 2); }, "invalid"},
    {"attach an attached GPU elsewhere",  [](ClusterState& st) { return st.attachGpu(0, 1); }, "conflict"},
    {"attach unknown GPU",                [](ClusterState& st) { return st.attachGpu(99, 0); }, "invalid"},
    {"attach to unknown node",            [](ClusterState& st) { return st.attachGpu(2, 99); }, "invalid"},
    {"detach a GPU in use",               [](ClusterState& st) { return st.detachGpu(1); }, "conflict"},
    {"allocate an unattached GPU",        [](ClusterState& st) { return st.allocateGpu(2); }, "conflict"},
    {"allocate a GPU in use",             [](ClusterState& st) { return st.allocateGpu(1); }, "conflict"},
    {"release a free GPU",                [](ClusterState& st) { return st.releaseGpu(0); }, "conflict"},
    {"reserve more CPU than free",        [](ClusterState& st) { return st.reserve(0, 64'001, 0); }, "insufficient"},
    {"reserve more memory than free",     [](ClusterState& st) { return st.reserve(0, 0, 256 * 1024 + 1); }, "insufficient"},
    {"reserve at uint64 max",             [](ClusterState& st) { return st.reserve(0, UINT64_MAX, UINT64_MAX); }, "insufficient"},
    {"release more than used",            [](ClusterState& st) { return st.release(0, 1, 0); }, "conflict"},
    {"health of unknown GPU",             [](ClusterState& st) { return st.setGpuHealthy(5, false); }, "invalid"},
    {"cordon unknown node",               [](ClusterState& st) { return st.setNodeSchedulable(9, false); }, "invalid"},
  }));
  // clang-format on
  CAPTURE(what);
  const ClusterState before = s;
  const kc::Status result = op(s);
  REQUIRE_FALSE(result.ok());
  CHECK(result.error().code == code);
  CHECK_FALSE(result.error().message.empty());
  CHECK(sameState(s, before));
}

TEST_CASE("pool model: a GPU moves, serves a pod and comes back", "[alloc][pool]") {
  auto c = makeCluster().pool("p0").node("n1", 0).node("n2", 1).unattached(1);
  ClusterState& s = c.state();
  const GpuIndex onN2 = 0;
  const GpuIndex loose = 1;

  REQUIRE(s.attachGpu(loose, 0).ok());
  CHECK(s.attachGpu(loose, 0).ok());  // idempotent
  CHECK(s.node(0).freeGpus == 1);
  CHECK(s.pool(0).freeUnattachedGpus == 0);

  REQUIRE(s.detachGpu(onN2).ok());
  CHECK(s.detachGpu(onN2).ok());  // idempotent
  REQUIRE(s.attachGpu(onN2, 0).ok());
  CHECK(s.node(0).freeGpus == 2);
  CHECK(s.node(1).freeGpus == 0);

  REQUIRE(s.allocateGpu(onN2).ok());
  REQUIRE(s.reserve(0, 1000, 1024).ok());
  CHECK(s.node(0).freeGpus == 1);
  CHECK(s.pool(0).freeGpus == 1);
  CHECK(s.node(0).cpuMilliFree() == 63'000);

  REQUIRE(s.setGpuDraining(loose, true).ok());
  CHECK(s.node(0).freeGpus == 0);  // draining GPUs are neither usable nor movable
  CHECK(s.allocateGpu(loose).error().code == "conflict");
  REQUIRE(s.setGpuDraining(loose, false).ok());
  REQUIRE(s.setGpuHealthy(loose, false).ok());
  REQUIRE(s.setGpuHealthy(loose, false).ok());  // idempotent
  CHECK(s.pool(0).freeGpus == 0);
  CHECK(s.freeGpus() == 0);

  REQUIRE(s.releaseGpu(onN2).ok());
  REQUIRE(s.release(0, 1000, 1024).ok());
  CHECK(s.node(0).freeGpus == 1);
  CHECK(s.node(0).cpuMilliUsed == 0);
  CHECK(test::aggregatesConsistent(s));
}

TEST_CASE("pool model: aggregates stay exact over random mutation sequences",
          "[alloc][pool][property]") {
  const std::uint64_t seed = GENERATE(range<std::uint64_t>(1, 41));
  CAPTURE(seed);
  SplitMix64 rng(seed);
  ClusterState s;
  const auto pools = static_cast<std::uint32_t>(1 + rng.below(3));
  for (std::uint32_t p = 0; p < pools; ++p) {
    REQUIRE(s.addPool(test::named("p", p)).ok());
  }
  const auto nodes = static_cast<std::uint32_t>(1 + rng.below(8));
  for (std::uint32_t n = 0; n < nodes; ++n) {
    REQUIRE(s.addNode(NodeSpec{.name = test::named("n", n),
                               .pool = rng.below(5) == 0 ? kNoPool
                                                         : static_cast<PoolIndex>(rng.below(pools)),
                               .cpuMilliCapacity = rng.below(10'000),
                               .memoryMiBCapacity = rng.below(10'000)})
                .ok());
  }
  const auto gpus = static_cast<std::uint32_t>(rng.below(24));
  for (std::uint32_t g = 0; g < gpus; ++g) {
    REQUIRE(s.addGpu(GpuSpec{.id = test::named("g", g),
                             .pool = static_cast<PoolIndex>(rng.below(pools))})
                .ok());
  }
  // Mutations with random (often invalid) arguments: success must keep the aggregates exact,
  // failure must leave the state untouched.
  for (int step = 0; step < 400; ++step) {
    const ClusterState before = s;
    const auto g = static_cast<GpuIndex>(rng.below(gpus + 2));
    const auto n = static_cast<NodeIndex>(rng.below(nodes + 2));
    kc::Status result = kc::okStatus();
    switch (rng.below(9)) {
      case 0:
        result = s.attachGpu(g, n);
        break;
      case 1:
        result = s.detachGpu(g);
        break;
      case 2:
        result = s.allocateGpu(g);
        break;
      case 3:
        result = s.releaseGpu(g);
        break;
      case 4:
        result = s.setGpuHealthy(g, rng.below(4) != 0);
        break;
      case 5:
        result = s.setGpuDraining(g, rng.below(4) == 0);
        break;
      case 6:
        result = s.reserve(n, rng.below(4000), rng.below(4000));
        break;
      case 7:
        result = s.release(n, rng.below(4000), rng.below(4000));
        break;
      default:
        result = s.setNodeSchedulable(n, rng.below(2) == 0);
        break;
    }
    if (!result.ok()) {
      CHECK(sameState(s, before));
    }
    REQUIRE(test::aggregatesConsistent(s));
    for (NodeIndex i = 0; i < s.nodeCount(); ++i) {
      REQUIRE(s.node(i).cpuMilliUsed <= s.node(i).cpuMilliCapacity);
      REQUIRE(s.node(i).memoryMiBUsed <= s.node(i).memoryMiBCapacity);
    }
    for (GpuIndex i = 0; i < s.gpuCount(); ++i) {
      const GpuState& gpu = s.gpu(i);
      REQUIRE((!gpu.inUse || gpu.attached()));
      REQUIRE((!gpu.attached() || s.node(gpu.node).pool == gpu.pool));
    }
  }
}
