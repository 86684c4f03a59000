#include "libcore/alloc/node_score.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/naive_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;

namespace {

constexpr std::uint32_t kMax32 = std::numeric_limits<std::uint32_t>::max();

NodePolicy policyNamed(const std::string& name) {
  auto p = findNodePolicy(name);
  REQUIRE(p.ok());
  return *p;
}

// One pool; nodes n0, n1, ... with the given free GPUs; `loose` unattached GPUs.
ClusterState onePool(const std::vector<std::uint32_t>& freeGpus, std::uint32_t loose) {
  auto b = makeCluster().pool("p0");
  for (std::size_t i = 0; i < freeGpus.size(); ++i) {
    b.node(test::named("n", i), freeGpus[i]);
  }
  b.unattached(loose);
  return b.build();
}

}  // namespace

TEST_CASE("Eq. 1 score is total and matches the original integer form", "[alloc][node]") {
  // clang-format off
  auto [req, avail, score] = GENERATE(table<std::uint32_t, std::uint32_t, std::int64_t>({
    {4, 4, 100}, {2, 4, 50}, {1, 3, 33}, {3, 8, 37},
    {0, 0, 100},            // nothing asked, nothing there: exact fit
    {0, 5, 0},              // capacity unused by the pod
    {4, 2, -2}, {4, 0, -4}, // least-demand: minus the deficit
    {kMax32, kMax32, 100}, {1, kMax32, 0}, {kMax32, kMax32 - 1, -1}, // no division or product overflow
    {kMax32 - 1, kMax32, 99},
    {kMax32, 0, -static_cast<std::int64_t>(kMax32)},
  }));
  // clang-format on
  CAPTURE(req, avail);
  CHECK(eq1Score(req, avail) == score);
}

TEST_CASE("node selection per policy (paper Fig. 13 policies)", "[alloc][node]") {
  // clang-format off
  auto [freeGpus, loose, req, policy, node, deficit] = GENERATE(table<std::vector<std::uint32_t>, std::uint32_t, std::uint32_t, std::string, std::string, std::uint32_t>({
    // enough GPUs on n0 (6) and n1 (3): best-fit picks the smallest sufficient node
    {{6, 3, 1, 0}, 2, 2, "eq1",          "n1", 0},
    {{6, 3, 1, 0}, 2, 2, "best-fit",     "n1", 0},
    {{6, 3, 1, 0}, 2, 2, "least-demand", "n0", 0},  // n0 and n1 tie at deficit 0: name order
    {{6, 3, 1, 0}, 2, 2, "none",         "n0", 0},
    // no node has 7: least-demand picks the node needing the fewest moves
    {{0, 3, 1, 6}, 2, 7, "eq1",          "n3", 1},
    {{0, 3, 1, 6}, 2, 7, "best-fit",     "n0", 7},
    {{0, 3, 1, 6}, 2, 7, "least-demand", "n3", 1},
    {{0, 3, 1, 6}, 2, 7, "none",         "n0", 7},
    // exact fit beats a larger node; a smaller node would need a move
    {{2, 0, 1}, 0, 1, "eq1", "n2", 0},
    {{4, 4, 2}, 0, 4, "eq1", "n0", 0},            // tie between equal nodes: name order
    // req 0: score 100 on a node without GPUs, 0 elsewhere
    {{2, 0, 1}, 0, 0, "eq1",          "n1", 0},
    {{2, 0, 1}, 0, 0, "least-demand", "n0", 0},
    // everything must come from the unattached GPUs
    {{0, 0}, 5, 5, "eq1", "n0", 5},
  }));
  // clang-format on
  CAPTURE(freeGpus, loose, req, policy);
  const ClusterState s = onePool(freeGpus, loose);
  auto choice = selectNode(s, PodRequest{.cpuMilli = 1000, .memoryMiB = 1024, .gpus = req},
                           policyNamed(policy), Composability::Composable);
  REQUIRE(choice.ok());
  CHECK(s.node(choice->node).name == node);
  CHECK(choice->deficit == deficit);
  CHECK(choice->score == eq1Score(req, s.node(choice->node).freeGpus));
}

TEST_CASE("node selection filters CPU, memory, cordoned nodes and short pools", "[alloc][node]") {
  // Pool A: a1 (3 free, small CPU), a2 (1 free). Pool B: b1 (1 free) + 4 unattached.
  auto b = makeCluster()
               .pool("A")
               .node("a1", 3, 0, /*cpuMilli=*/2000, /*memoryMiB=*/4096)
               .node("a2", 1)
               .pool("B")
               .node("b1", 1)
               .unattached(4);
  ClusterState& s = b.state();
  const NodePolicy eq1 = policyNamed("eq1");

  SECTION("multi-pool: a node whose pool cannot supply the pod is filtered") {
    auto c = selectNode(s, PodRequest{.gpus = 5}, eq1, Composability::Composable);
    REQUIRE(c.ok());
    CHECK(s.node(c->node).name == "b1");
    CHECK(c->deficit == 4);
  }
  SECTION("CPU and memory filter before GPU scoring") {
    auto c = selectNode(s, PodRequest{.cpuMilli = 4000, .gpus = 3}, eq1, Composability::Composable);
    REQUIRE(c.ok());
    // a1 holds 3 GPUs but lacks CPU; a2 and b1 both need 2 moves: name order.
    CHECK(s.node(c->node).name == "a2");
    CHECK(c->deficit == 2);
    CHECK(filterNode(s, 0, PodRequest{.cpuMilli = 4000}, Composability::Composable) ==
          NodeFilterReason::InsufficientCpu);
    CHECK(filterNode(s, 0, PodRequest{.memoryMiB = 5000}, Composability::Composable) ==
          NodeFilterReason::InsufficientMemory);
  }
  SECTION("cordoned nodes are skipped") {
    REQUIRE(s.setNodeSchedulable(0, false).ok());
    auto c = selectNode(s, PodRequest{.gpus = 3}, eq1, Composability::Composable);
    REQUIRE(c.ok());
    CHECK(s.node(c->node).name == "a2");  // a2 and b1 both hold 1: name order
    CHECK(c->deficit == 2);
  }
  SECTION("preconfigured mode never moves GPUs") {
    auto c = selectNode(s, PodRequest{.gpus = 2}, eq1, Composability::Preconfigured);
    REQUIRE(c.ok());
    CHECK(s.node(c->node).name == "a1");
    CHECK(c->deficit == 0);
    auto none = selectNode(s, PodRequest{.gpus = 4}, eq1, Composability::Preconfigured);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == "unschedulable");
    CHECK(none.error().message.find("3 node lacks free GPUs") != std::string::npos);
  }
  SECTION("nothing fits: the reason counts say why") {
    auto c = selectNode(s, PodRequest{.cpuMilli = 3000, .gpus = 6}, eq1, Composability::Composable);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code == "unschedulable");
    CHECK(c.error().message.find("1 insufficient cpu") != std::string::npos);
    CHECK(c.error().message.find("2 pool lacks free GPUs") != std::string::npos);
  }
}

TEST_CASE("node selection is total on degenerate clusters", "[alloc][node]") {
  const NodePolicy eq1 = policyNamed("eq1");
  SECTION("no nodes") {
    ClusterState empty;
    auto c = selectNode(empty, PodRequest{.gpus = 1}, eq1, Composability::Composable);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().code == "unschedulable");
  }
  SECTION("zero capacity nodes and a node without pool") {
    ClusterState s;
    REQUIRE(s.addNode(NodeSpec{.name = "bare"}).ok());
    CHECK(selectNode(s, PodRequest{}, eq1, Composability::Composable)->node == 0);
    CHECK_FALSE(selectNode(s, PodRequest{.cpuMilli = 1}, eq1, Composability::Composable).ok());
    auto c = selectNode(s, PodRequest{.gpus = 1}, eq1, Composability::Composable);
    REQUIRE_FALSE(c.ok());
    CHECK(c.error().message.find("no GPU pool") != std::string::npos);
  }
  SECTION("over-request at the integer limits") {
    const ClusterState s = onePool({2}, 0);
    auto c =
        selectNode(s, PodRequest{.cpuMilli = UINT64_MAX, .memoryMiB = UINT64_MAX, .gpus = kMax32},
                   eq1, Composability::Composable);
    CHECK_FALSE(c.ok());
  }
}

TEST_CASE("node selection equals a brute-force oracle on random clusters",
          "[alloc][node][property]") {
  const std::uint64_t seed = GENERATE(range<std::uint64_t>(1, 801));
  CAPTURE(seed);
  SplitMix64 rng(seed);
  ClusterState s;
  const auto pools = static_cast<std::uint32_t>(1 + rng.below(4));
  for (std::uint32_t p = 0; p < pools; ++p) {
    REQUIRE(s.addPool(test::named("p", p)).ok());
  }
  const auto nodes = static_cast<std::uint32_t>(rng.below(12));
  for (std::uint32_t n = 0; n < nodes; ++n) {
    // Names in scrambled order so that the name tie-break differs from index order.
    REQUIRE(s.addNode(NodeSpec{.name = test::named("n", rng.below(1000), n),
                               .pool = rng.below(6) == 0 ? kNoPool
                                                         : static_cast<PoolIndex>(rng.below(pools)),
                               .cpuMilliCapacity = rng.below(8) * 1000,
                               .memoryMiBCapacity = rng.below(8) * 1024})
                .ok());
    REQUIRE(s.reserve(n, rng.below(s.node(n).cpuMilliCapacity + 1), 0).ok());
    REQUIRE(s.setNodeSchedulable(n, rng.below(8) != 0).ok());
  }
  const auto gpus = static_cast<std::uint32_t>(rng.below(40));
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const auto pool = static_cast<PoolIndex>(rng.below(pools));
    NodeIndex node = kNoNode;
    if (nodes > 0 && rng.below(3) != 0) {
      const auto n = static_cast<NodeIndex>(rng.below(nodes));
      node = s.node(n).pool == pool ? n : kNoNode;
    }
    const bool inUse = node != kNoNode && rng.below(3) == 0;
    REQUIRE(s.addGpu(GpuSpec{.id = test::named("g", g),
                             .pool = pool,
                             .node = node,
                             .inUse = inUse,
                             .healthy = rng.below(10) != 0,
                             .draining = rng.below(10) == 0})
                .ok());
  }
  const PodRequest pod{.cpuMilli = rng.below(4) * 1000,
                       .memoryMiB = rng.below(4) * 1024,
                       .gpus = static_cast<std::uint32_t>(rng.below(10))};
  const Composability mode =
      rng.below(4) == 0 ? Composability::Preconfigured : Composability::Composable;

  for (const NodePolicy& policy : nodePolicies()) {
    CAPTURE(policy.name);
    // Oracle: feasibility and availability recomputed from the GPU list.
    std::vector<NodeIndex> feasible;
    for (NodeIndex n = 0; n < s.nodeCount(); ++n) {
      const NodeState& node = s.node(n);
      const std::uint32_t avail = test::naiveFreeOnNode(s, n);
      const bool gpuOk =
          pod.gpus <= avail || (mode == Composability::Composable && node.pool != kNoPool &&
                                test::naiveFreeInPool(s, node.pool, false) >= pod.gpus);
      if (node.schedulable && pod.cpuMilli <= node.cpuMilliCapacity - node.cpuMilliUsed &&
          pod.memoryMiB <= node.memoryMiBCapacity && gpuOk) {
        feasible.push_back(n);
      }
    }
    auto choice = selectNode(s, pod, policy, mode);
    REQUIRE(choice.ok() == !feasible.empty());
    if (!choice.ok()) {
      CHECK(choice.error().code == "unschedulable");
      continue;
    }
    const NodeIndex chosen = choice->node;
    REQUIRE(std::find(feasible.begin(), feasible.end(), chosen) != feasible.end());
    const std::uint32_t avail = test::naiveFreeOnNode(s, chosen);
    CHECK(choice->deficit == (pod.gpus > avail ? pod.gpus - avail : 0));
    if (mode == Composability::Preconfigured) {
      CHECK(choice->deficit == 0);
    }
    for (NodeIndex other : feasible) {
      const int c = policy.compare(s.node(other), s.node(chosen), pod.gpus);
      CHECK(c >= 0);  // nothing strictly better was passed over
      if (c == 0) {
        CHECK(s.node(chosen).name <= s.node(other).name);  // deterministic tie-break
      }
    }
    // Independent oracle: each policy's ranking written out from its definition (paper Eq. 1
    // and its halves), with avail counted from the GPU list, smallest key wins, then the name.
    {
      auto key = [&](NodeIndex n) {
        const std::int64_t avail = test::naiveFreeOnNode(s, n);
        const std::int64_t req = pod.gpus;
        const bool enough = avail >= req;
        const std::int64_t fit = req == 0 ? (avail == 0 ? 0 : 1) : avail;  // higher req/avail first
        std::int64_t a = 0;
        std::int64_t b = 0;
        if (policy.name == Eq1NodePolicy::kName) {
          a = enough ? 0 : 1;
          b = enough ? fit : -avail;  // best-fit when it fits, else least demand (most free)
        } else if (policy.name == BestFitNodePolicy::kName) {
          a = enough ? 0 : 1;
          b = enough ? fit : 0;
        } else if (policy.name == LeastDemandNodePolicy::kName) {
          a = enough ? 0 : 1;
          b = enough ? 0 : -avail;
        }
        return std::make_tuple(a, b, s.node(n).name);
      };
      NodeIndex expected = feasible.front();
      for (NodeIndex n : feasible) {
        if (key(n) < key(expected)) {
          expected = n;
        }
      }
      CHECK(s.node(chosen).name == s.node(expected).name);
    }
    if (policy.name == Eq1NodePolicy::kName) {
      // Eq. 1 order agrees with the original's integer score wherever that score is strict.
      for (NodeIndex other : feasible) {
        CHECK(eq1Score(pod.gpus, s.node(other).freeGpus) <= eq1Score(pod.gpus, avail));
      }
    }
    // selectNodeAmong: every node in reverse order, and only the nodes of pools holding at
    // least req free GPUs (what the simulator passes), give selectNode's choice.
    std::vector<NodeIndex> reversed;
    std::vector<NodeIndex> richPools;
    for (NodeIndex n = static_cast<NodeIndex>(s.nodeCount()); n-- > 0;) {
      reversed.push_back(n);
      const PoolIndex p = s.node(n).pool;
      if (pod.gpus == 0 || (p != kNoPool && s.pool(p).freeGpus >= pod.gpus)) {
        richPools.push_back(n);
      }
    }
    for (const auto* subset : {&reversed, &richPools}) {
      auto among = selectNodeAmong(s, pod, policy, mode, *subset);
      REQUIRE(among.ok());
      CHECK(*among == *choice);
    }
  }
}
