// The pieces of the stock-dra baseline (libcore/alloc): kube's least-allocated node scoring,
// the stock DRA device offer and first-fit GPU choice, the idle-timeout return, and their
// registry entries. Expected values are computed by hand from the definitions in the headers.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/idle_timeout.hpp"
#include "libcore/alloc/least_allocated.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

using namespace kc::alloc;
using test::makeCluster;

namespace {

NodeState nodeState(std::uint64_t cpuCap, std::uint64_t cpuUsed, std::uint64_t memCap,
                    std::uint64_t memUsed, std::uint32_t attached, std::uint32_t free) {
  NodeState n;  // unnamed: GCC 12 reports a false -Wrestrict on assigning a literal name at -O3
  n.cpuMilliCapacity = cpuCap;
  n.cpuMilliUsed = cpuUsed;
  n.memoryMiBCapacity = memCap;
  n.memoryMiBUsed = memUsed;
  n.attachedGpus = attached;
  n.freeGpus = free;
  return n;
}

std::vector<std::string> ids(const ClusterState& s, const std::vector<GpuIndex>& gpus) {
  std::vector<std::string> out;
  for (GpuIndex g : gpus) {
    out.push_back(s.gpu(g).id);
  }
  return out;
}

NodePolicy leastAllocated() {
  return *findNodeOrBaselinePolicy(LeastAllocatedNodePolicy::kName);
}

}  // namespace

TEST_CASE("leastRequestedScore is kube's: 0..100, total", "[sim][stock-dra]") {
  auto [requested, capacity, score] = GENERATE(table<std::uint64_t, std::uint64_t, std::int64_t>({
      {0, 0, 0},        // capacity 0
      {5, 4, 0},        // over-request
      {0, 10, 100},     // empty
      {3, 10, 70},      // (10-3)*100/10
      {1, 3, 66},       // 200/3 rounds down
      {10, 10, 0},      // full
      {0, ~0ULL, 100},  // no overflow at the top of the range
      {1, ~0ULL, 99},
  }));
  CAPTURE(requested, capacity);
  CHECK(leastRequestedScore(requested, capacity) == score);
}

TEST_CASE("leastAllocatedScore: mean over CPU, memory and attached GPUs", "[sim][stock-dra]") {
  // cpu, memory: (cap - used) * 100 / cap; GPUs: (attached - (attached - free) - req) * 100 /
  // attached; integer mean of the terms present.
  auto [node, req, score] = GENERATE(table<NodeState, std::uint32_t, std::int64_t>({
      {nodeState(1000, 250, 100, 0, 4, 4), 1, (75 + 100 + 75) / 3},
      {nodeState(1000, 250, 100, 0, 4, 4), 0, (75 + 100) / 2},     // no GPU asked: term left out
      {nodeState(1000, 250, 0, 0, 4, 2), 1, (75 + 25) / 2},        // no memory: left out
      {nodeState(1000, 0, 100, 50, 4, 1), 2, (100 + 50 + 0) / 3},  // 3 + 2 > 4 GPUs: 0
      {nodeState(1000, 0, 100, 0, 0, 0), 2, (100 + 100 + 0) / 3},  // no GPU attached: 0
      {nodeState(0, 0, 0, 0, 0, 0), 0, 0},                         // nothing at all
  }));
  CAPTURE(node.cpuMilliUsed, node.attachedGpus, node.freeGpus, req);
  CHECK(leastAllocatedScore(node, req) == score);
}

TEST_CASE("least-allocated picks the emptiest node, eq1 the fullest that fits",
          "[sim][stock-dra]") {
  // a: 4 free GPUs, half its CPU used; b: 4 free, CPU idle; c: 1 free of 2, CPU idle.
  auto b = makeCluster().pool("p").node("a", 4).node("b", 4).node("c", 1, 1);
  ClusterState& s = b.state();
  REQUIRE(s.reserve(0, 32'000, 0).ok());
  const PodRequest pod{.cpuMilli = 1000, .memoryMiB = 0, .gpus = 1};
  // Scores (cpu, memory, GPUs): a (50, 100, 75) = 75; b (100, 100, 75) = 91; c (100, 100, 0) =
  // 66. Eq. 1: best fit among nodes with a free GPU is the one with the fewest: c.
  auto la = selectNode(s, pod, leastAllocated(), Composability::Composable);
  auto eq1 = selectNode(s, pod, *findNodePolicy("eq1"), Composability::Composable);
  REQUIRE(la.ok());
  REQUIRE(eq1.ok());
  CHECK(s.node(la->node).name == "b");
  CHECK(s.node(eq1->node).name == "c");
  // Equal scores: the name decides (kube would pick at random).
  const ClusterState twins = makeCluster().pool("p").node("y", 2).node("x", 2).build();
  CHECK(
      twins.node(selectNode(twins, pod, leastAllocated(), Composability::Composable)->node).name ==
      "x");
}

TEST_CASE("first-fit-local: unattached GPUs first, then attached elsewhere, inventory order",
          "[sim][stock-dra]") {
  // t (target) holds g0000; a holds g0001 g0002; unattached g0003 g0004.
  const ClusterState s = makeCluster().pool("p").node("t", 1).node("a", 2).unattached(2).build();
  const GpuPolicy ff = *findGpuOrBaselinePolicy(FirstFitLocalGpuPolicy::kName);
  auto [count, expected] = GENERATE(table<std::uint32_t, std::vector<std::string>>({
      {1, {"g0003"}},
      {2, {"g0003", "g0004"}},
      {3, {"g0003", "g0004", "g0001"}},
  }));
  auto chosen = chooseGpus(s, 0, count, ff);
  REQUIRE(chosen.ok());
  CHECK(ids(s, *chosen) == expected);
}

TEST_CASE("offer: stock DRA offers a node its own and the pool's unattached GPUs only",
          "[sim][stock-dra]") {
  // a: g0000 in use, g0001 free; b: 3 free; 1 unattached. One pool.
  const ClusterState s = makeCluster().pool("p").node("a", 1, 1).node("b", 3).unattached(1).build();
  CHECK(offeredGpus(s, 0, {}, DeviceOffer::Pool) == 5);
  CHECK(offeredGpus(s, 0, {}, DeviceOffer::LocalOrUnattached) == 2);
  CHECK(offeredGpus(s, 1, {}, DeviceOffer::LocalOrUnattached) == 4);
  const NodePolicy eq1 = *findNodePolicy("eq1");
  const PodRequest three{.cpuMilli = 0, .memoryMiB = 0, .gpus = 3};
  const PodRequest four{.cpuMilli = 0, .memoryMiB = 0, .gpus = 4};
  SECTION("pool: the pool model's choice") {
    auto c = selectNodeOffered(s, four, {}, eq1, Composability::Composable, DeviceOffer::Pool);
    auto plain = selectNodeForModels(s, four, {}, eq1, Composability::Composable);
    REQUIRE(c.ok());
    CHECK(*c == *plain);
    CHECK(s.node(c->node).name == "b");  // least demand: b lacks 1, a lacks 3
  }
  SECTION("local-or-unattached: a cannot reach b's idle GPUs") {
    auto c = selectNodeOffered(s, four, {}, eq1, Composability::Composable,
                               DeviceOffer::LocalOrUnattached);
    REQUIRE(c.ok());
    CHECK(s.node(c->node).name == "b");
    CHECK(c->deficit == 1);  // the unattached one
    // Five GPUs are free in the pool, but no node is offered five.
    const PodRequest five{.cpuMilli = 0, .memoryMiB = 0, .gpus = 5};
    CHECK(selectNodeOffered(s, five, {}, eq1, Composability::Composable, DeviceOffer::Pool).ok());
    auto none = selectNodeOffered(s, five, {}, eq1, Composability::Composable,
                                  DeviceOffer::LocalOrUnattached);
    REQUIRE_FALSE(none.ok());
    CHECK(none.error().code == "unschedulable");
    // a is offered 2: a 3-GPU pod may only go to b.
    auto onB = selectNodeOffered(s, three, {}, eq1, Composability::Composable,
                                 DeviceOffer::LocalOrUnattached);
    REQUIRE(onB.ok());
    CHECK(s.node(onB->node).name == "b");
  }
}

TEST_CASE("offer: local-or-unattached against an oracle over random clusters",
          "[sim][stock-dra][property]") {
  const std::uint64_t seed = GENERATE(range<std::uint64_t>(1, 301));
  CAPTURE(seed);
  SplitMix64 rng(seed);
  auto b = makeCluster();
  const auto pools = static_cast<std::uint32_t>(1 + rng.below(2));
  for (std::uint32_t p = 0; p < pools; ++p) {
    b.pool(test::named("p", p));
    const auto nodes = static_cast<std::uint32_t>(1 + rng.below(4));
    for (std::uint32_t n = 0; n < nodes; ++n) {
      b.node(test::named("n", p, n), static_cast<std::uint32_t>(rng.below(4)),
             static_cast<std::uint32_t>(rng.below(3)));
    }
    b.unattached(static_cast<std::uint32_t>(rng.below(4)));
  }
  const ClusterState s = b.build();
  const PodRequest pod{
      .cpuMilli = 0, .memoryMiB = 0, .gpus = static_cast<std::uint32_t>(1 + rng.below(6))};
  for (const NodePolicy& policy : {leastAllocated(), *findNodePolicy("eq1")}) {
    CAPTURE(policy.name);
    // Oracle: offered = free GPUs on the node + free unattached GPUs of its pool, counted from
    // the GPU list; the best offered node by the policy, then the name.
    NodeIndex best = kNoNode;
    for (NodeIndex n = 0; n < s.nodeCount(); ++n) {
      std::uint32_t offered = 0;
      for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
        const GpuState& gpu = s.gpu(g);
        if (!gpu.inUse && gpu.pool == s.node(n).pool && (gpu.node == n || !gpu.attached())) {
          ++offered;
        }
      }
      if (offered < pod.gpus) {
        continue;
      }
      if (best == kNoNode) {
        best = n;
        continue;
      }
      const int c = policy.compare(s.node(n), s.node(best), pod.gpus);
      if (c < 0 || (c == 0 && s.node(n).name < s.node(best).name)) {
        best = n;
      }
    }
    auto choice = selectNodeOffered(s, pod, {}, policy, Composability::Composable,
                                    DeviceOffer::LocalOrUnattached);
    REQUIRE(choice.ok() == (best != kNoNode));
    if (best != kNoNode) {
      CHECK(choice->node == best);
      CHECK(choice->deficit <= s.pool(s.node(best).pool).freeUnattachedGpus);
    }
  }
}

TEST_CASE("idle-timeout returns an idle attached GPU exactly at the timeout, never a busy one",
          "[sim][stock-dra]") {
  // a holds g0000 (in use) and g0001 (free); g0002 unattached.
  ClusterState s = makeCluster().pool("p").node("a", 1, 1).unattached(1).build();
  const std::int64_t since = 1'000;
  const std::int64_t timeout = 600'000;
  auto [gpu, now, expired] = GENERATE_COPY(table<GpuIndex, std::int64_t, bool>({
      {1, since + timeout - 1, false},  // 1 ms short
      {1, since + timeout, true},       // exactly at the timeout
      {1, since + timeout + 1, true},
      {1, since - 1, false},             // before it became idle
      {0, since + 10 * timeout, false},  // in use
      {2, since + 10 * timeout, false},  // unattached: nothing to return
      {7, since + 10 * timeout, false},  // no such GPU
  }));
  CAPTURE(gpu, now);
  CHECK(idleExpired(s, gpu, since, now, timeout) == expired);
  SECTION("a GPU that turns unhealthy or draining stays where it is") {
    REQUIRE(s.setGpuDraining(1, true).ok());
    CHECK_FALSE(idleExpired(s, 1, since, since + timeout, timeout));
  }
}

TEST_CASE("expiredIdleGpus lists every GPU due, in index order", "[sim][stock-dra]") {
  // a: g0000 g0001 free; b: g0002 in use, g0003 free.
  const ClusterState s = makeCluster().pool("p").node("a", 2).node("b", 1, 1).build();
  const std::vector<std::int64_t> since{0, 500, 0, 100};
  auto due = expiredIdleGpus(s, since, 600, 500);
  REQUIRE(due.ok());
  CHECK(*due == std::vector<GpuIndex>{0, 3});  // g0001 idle 100 ms only, g0002 in use
  CHECK(expiredIdleGpus(s, std::vector<std::int64_t>{0, 0}, 600, 500).error().code == "invalid");
  // Extremes: no overflow, a span beyond int64 is longer than any timeout.
  CHECK(idleExpired(s, 0, INT64_MIN, INT64_MAX, INT64_MAX));
  CHECK_FALSE(idleExpired(s, 0, 0, 600, -1));
}

TEST_CASE("registry: the stock-dra preset names registered parts only", "[sim][stock-dra]") {
  auto preset = findPolicyPreset("stock-dra");
  REQUIRE(preset.ok());
  CHECK(findNodeOrBaselinePolicy(preset->nodePolicy).ok());
  CHECK(findGpuOrBaselinePolicy(preset->gpuPolicy).ok());
  CHECK(findQueuePolicy(preset->queuePolicy)->discipline == QueueDiscipline::Backfill);
  CHECK(findRecomposePolicy(preset->recomposePolicy)->kind == RecomposeKind::None);
  CHECK(findOfferPolicy(preset->offerPolicy)->offer == DeviceOffer::LocalOrUnattached);
  CHECK(findReturnPolicy(preset->returnPolicy)->kind == ReturnKind::IdleTimeout);
  CHECK(preset->idleTimeoutMs == 600'000);  // CoHDI's DEVICE_NO_REMOVAL_DURATION default
  // Baselines are not what the scheduler offers: its finders do not know them.
  CHECK(findNodePolicy("least-allocated").error().code == "not_found");
  CHECK(findGpuPolicy("first-fit-local").error().code == "not_found");
  // The combined finders find both, and say what they know when they find neither.
  CHECK(findNodeOrBaselinePolicy("eq1").ok());
  auto unknown = findNodeOrBaselinePolicy("most-allocated");
  REQUIRE_FALSE(unknown.ok());
  CHECK_THAT(unknown.error().message, Catch::Contains("eq1") && Catch::Contains("least-allocated"));
  CHECK(findPolicyPreset("kubecomp").error().code == "not_found");
}
