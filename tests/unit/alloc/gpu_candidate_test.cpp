#include "libcore/alloc/gpu_candidate.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;

namespace {

GpuPolicy policyNamed(const std::string& name) {
  auto p = findGpuPolicy(name);
  REQUIRE(p.ok());
  return *p;
}

std::vector<std::string> ids(const ClusterState& s, const std::vector<GpuIndex>& gpus) {
  std::vector<std::string> out;
  for (GpuIndex g : gpus) {
    out.push_back(s.gpu(g).id);
  }
  return out;
}

using Ids = std::vector<std::string>;

}  // namespace

TEST_CASE("Algorithm 1 scores: minus the free candidates on the same node", "[alloc][gpu]") {
  // target t (2 free, never candidates); a: g0002; b: g0003..g0005; unattached g0006, g0007.
  const ClusterState s =
      makeCluster().pool("p").node("t", 2).node("a", 1).node("b", 3).unattached(2).build();
  const auto candidates = gpuCandidates(s, 0);
  CHECK(ids(s, candidates) == Ids{"g0002", "g0003", "g0004", "g0005", "g0006", "g0007"});
  CHECK(algorithm1Scores(s, candidates) == std::vector<std::int64_t>{-1, -3, -3, -3, -2, -2});
}

TEST_CASE("GPU choice per policy", "[alloc][gpu]") {
  // clang-format off
  auto [unattachedCount, count, policy, expected] = GENERATE(table<std::uint32_t, std::uint32_t, std::string, Ids>({
    // a: g0002 (1 free), b: g0003-5 (3 free), unattached g0006.. ; target t holds g0000, g0001
    {2, 3, "alg1",             {"g0002", "g0006", "g0007"}},  // a (-1), then unattached group (-2)
    {2, 3, "unattached-first", {"g0006", "g0007", "g0002"}},
    {2, 3, "first-fit",        {"g0002", "g0003", "g0004"}},
    // A large unattached pool: the original takes it last, ours first.
    {5, 5, "alg1",             {"g0002", "g0003", "g0004", "g0005", "g0006"}},
    {5, 2, "unattached-first", {"g0006", "g0007"}},
    // No unattached: fragments first, then the fullest node.
    {0, 2, "alg1",             {"g0002", "g0003"}},
    {0, 2, "unattached-first", {"g0002", "g0003"}},
    {0, 0, "alg1",             {}},
  }));
  // clang-format on
  CAPTURE(unattachedCount, count, policy);
  const ClusterState s = makeCluster()
                             .pool("p")
                             .node("t", 2)
                             .node("a", 1)
                             .node("b", 3)
                             .unattached(unattachedCount)
                             .build();
  auto chosen = chooseGpus(s, 0, count, policyNamed(policy));
  REQUIRE(chosen.ok());
  CHECK(ids(s, *chosen) == expected);
}

TEST_CASE("GPU candidates exclude busy, unhealthy, draining, target and other-pool GPUs",
          "[alloc][gpu]") {
  auto b = makeCluster().pool("p").node("t", 1).node("a", 4, 1).unattached(1);
  ClusterState& s = b.state();
  // a holds g0001 (in use), g0002..g0005 free; g0006 unattached.
  REQUIRE(s.setGpuHealthy(2, false).ok());
  REQUIRE(s.setGpuDraining(3, true).ok());
  b.pool("q").node("other", 3);
  CHECK(ids(s, gpuCandidates(s, 0)) == Ids{"g0004", "g0005", "g0006"});
  for (const GpuPolicy& policy : gpuPolicies()) {
    CAPTURE(policy.name);
    SplitMix64 rng(7);
    auto four = chooseGpus(s, 0, 4, policy, &rng);
    REQUIRE_FALSE(four.ok());
    CHECK(four.error().code == "insufficient");
    auto three = chooseGpus(s, 0, 3, policy, &rng);
    REQUIRE(three.ok());
    CHECK(std::set<GpuIndex>(three->begin(), three->end()) == std::set<GpuIndex>{4, 5, 6});
  }
}

TEST_CASE("GPU choice rejects bad arguments", "[alloc][gpu]") {
  const ClusterState s = makeCluster().pool("p").node("t", 0).unattached(2).build();
  CHECK(chooseGpus(s, 5, 1, policyNamed("alg1")).error().code == "invalid");
  CHECK(chooseGpus(s, 0, 1, policyNamed("random"), nullptr).error().code == "invalid");
  ClusterState bare;
  REQUIRE(bare.addNode(NodeSpec{.name = "bare"}).ok());
  CHECK(gpuCandidates(bare, 0).empty());
  CHECK(chooseGpus(bare, 0, 1, policyNamed("first-fit")).error().code == "insufficient");
  CHECK(chooseGpus(bare, 0, 0, policyNamed("first-fit"))->empty());
}

TEST_CASE("random GPU choice is reproducible from its seed", "[alloc][gpu]") {
  const ClusterState s =
      makeCluster().pool("p").node("t", 0).node("a", 5).node("b", 5).unattached(10).build();
  const GpuPolicy random = policyNamed("random");
  SplitMix64 r1(42);
  SplitMix64 r2(42);
  SplitMix64 r3(43);
  auto a = chooseGpus(s, 0, 6, random, &r1);
  auto b = chooseGpus(s, 0, 6, random, &r2);
  auto c = chooseGpus(s, 0, 6, random, &r3);
  REQUIRE(a.ok());
  CHECK(*a == *b);
  CHECK(*a != *c);  // a different seed gives another sample (checked for these seeds)
}

TEST_CASE("select node then move GPUs: properties over random clusters", "[alloc][gpu][property]") {
  const std::uint64_t seed = GENERATE(range<std::uint64_t>(1, 1201));
  CAPTURE(seed);
  SplitMix64 rng(seed);
  ClusterState s;
  const auto pools = static_cast<std::uint32_t>(1 + rng.below(3));
  for (std::uint32_t p = 0; p < pools; ++p) {
    REQUIRE(s.addPool(test::named("p", p)).ok());
  }
  const auto nodes = static_cast<std::uint32_t>(1 + rng.below(10));
  for (std::uint32_t n = 0; n < nodes; ++n) {
    REQUIRE(s.addNode(NodeSpec{.name = test::named("n", n),
                               .pool = static_cast<PoolIndex>(rng.below(pools)),
                               .cpuMilliCapacity = 8000,
                               .memoryMiBCapacity = 8192})
                .ok());
  }
  const auto gpus = static_cast<std::uint32_t>(rng.below(48));
  for (std::uint32_t g = 0; g < gpus; ++g) {
    const auto pool = static_cast<PoolIndex>(rng.below(pools));
    const auto n = static_cast<NodeIndex>(rng.below(nodes));
    const NodeIndex node = (s.node(n).pool == pool && rng.below(4) != 0) ? n : kNoNode;
    REQUIRE(s.addGpu(GpuSpec{.id = test::named("g", 1000 + rng.below(9000), g),
                             .pool = pool,
                             .node = node,
                             .inUse = node != kNoNode && rng.below(3) == 0,
                             .healthy = rng.below(12) != 0,
                             .draining = rng.below(12) == 0})
                .ok());
  }
  const PodRequest pod{
      .cpuMilli = 1000, .memoryMiB = 1024, .gpus = static_cast<std::uint32_t>(1 + rng.below(12))};

  for (const NodePolicy& nodePolicy : nodePolicies()) {
    auto choice = selectNode(s, pod, nodePolicy, Composability::Composable);
    if (!choice.ok()) {
      continue;
    }
    const NodeIndex target = choice->node;
    // Candidates and Algorithm 1 scores recomputed here from their definitions (not with
    // gpuCandidates / algorithm1Scores, which the policies share): free GPUs of the target's
    // pool not on the target, in index order; score = -(candidates on the same node), the
    // unattached ones counted as one node.
    std::vector<GpuIndex> candidates;
    for (GpuIndex g = 0; g < s.gpuCount(); ++g) {
      const GpuState& gpu = s.gpu(g);
      if (gpu.free() && gpu.pool == s.node(target).pool && gpu.node != target) {
        candidates.push_back(g);
      }
    }
    REQUIRE(gpuCandidates(s, target) == candidates);
    std::vector<std::int64_t> scores;
    for (GpuIndex g : candidates) {
      scores.push_back(-std::count_if(candidates.begin(), candidates.end(),
                                      [&](GpuIndex o) { return s.gpu(o).node == s.gpu(g).node; }));
    }
    REQUIRE(algorithm1Scores(s, candidates) == scores);
    for (const GpuPolicy& gpuPolicy : gpuPolicies()) {
      CAPTURE(nodePolicy.name, gpuPolicy.name);
      SplitMix64 pick(seed * 31 + 7);
      auto chosen = chooseGpus(s, target, choice->deficit, gpuPolicy, &pick);
      // A feasible node always gets its deficit: the pool filter guarantees enough candidates.
      REQUIRE(chosen.ok());
      REQUIRE(chosen->size() == choice->deficit);
      std::set<GpuIndex> seen;
      for (GpuIndex g : *chosen) {
        CHECK(seen.insert(g).second);                 // no GPU chosen twice
        CHECK(s.gpu(g).node != target);               // none from the target node
        CHECK(s.gpu(g).free());                       // only free GPUs
        CHECK(s.gpu(g).pool == s.node(target).pool);  // only the target's pool
      }
      // Score-ranked policies take the best-scored candidates: no unchosen candidate has a
      // strictly better rank than a chosen one.
      if (gpuPolicy.name == Algorithm1GpuPolicy::kName ||
          gpuPolicy.name == UnattachedFirstGpuPolicy::kName) {
        const bool ours = gpuPolicy.name == UnattachedFirstGpuPolicy::kName;
        auto rankOf = [&](GpuIndex g) {
          const auto i = static_cast<std::size_t>(
              std::find(candidates.begin(), candidates.end(), g) - candidates.begin());
          // ours: unattached outrank every attached GPU
          return (ours && !s.gpu(g).attached()) ? std::int64_t{1} : scores[i];
        };
        std::int64_t worstChosen = std::numeric_limits<std::int64_t>::max();
        for (GpuIndex g : *chosen) {
          worstChosen = std::min(worstChosen, rankOf(g));
        }
        for (GpuIndex g : candidates) {
          if (!seen.contains(g)) {
            CHECK(rankOf(g) <= worstChosen);
          }
        }
      }
      // Applying the moves makes the pod runnable on the target.
      ClusterState after = s;
      for (GpuIndex g : *chosen) {
        REQUIRE(after.detachGpu(g).ok());
        REQUIRE(after.attachGpu(g, target).ok());
      }
      REQUIRE(after.node(target).freeGpus >= pod.gpus);
      REQUIRE(after.pool(after.node(target).pool).freeGpus == s.pool(s.node(target).pool).freeGpus);
    }
  }
}
