// Idle-time recomposition (libcore/alloc/idle_recompose.hpp): hand-computed plans on tiny
// clusters, and a seeded property test over random states: only free GPUs move, never one off
// the head's reserved node, nothing when the head fits now, and the first move (the one the
// caller starts) never makes the head's reservation later.
#include "libcore/alloc/idle_recompose.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/placement_helpers.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;
using kc::alloc::test::pod;
using kc::alloc::test::rules;
using kc::alloc::test::runningOn;

namespace {

std::vector<IdleMove> moves(const ClusterState& s,
                            std::vector<std::pair<const char*, const char*>> list) {
  std::vector<IdleMove> out;
  for (auto [g, n] : list) {
    out.push_back(IdleMove{*s.findGpu(g), *s.findNode(n)});
  }
  return out;
}

}  // namespace

TEST_CASE("registry: recomposition policies by name, none the default", "[alloc][registry]") {
  CHECK(kDefaultRecomposePolicy == "none");
  auto none = findRecomposePolicy("none");
  REQUIRE(none.ok());
  CHECK(none->kind == RecomposeKind::None);
  auto idle = findRecomposePolicy("idle-gather");
  REQUIRE(idle.ok());
  CHECK(idle->kind == RecomposeKind::IdleGather);
  CHECK(recomposePolicies().size() == 2);
  auto bad = findRecomposePolicy("idle");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "not_found");
  CHECK(bad.error().message.find("none, idle-gather") != std::string::npos);
  auto slack = findQueuePolicy("slack-backfill");
  REQUIRE(slack.ok());
  CHECK(slack->discipline == QueueDiscipline::SlackBackfill);
}

// n1: 192 CPUs, 4 GPUs in use (R1, 100 CPUs, ends 1000). n2: 30 CPUs, 4 free GPUs. The head
// (40 CPUs, 8 GPUs) fits only on n1 (CPU) once R1 ends: reserved n1 at fit time 1000. n1 lacks
// 4 GPUs (8 - 4 attached): all four of n2's move there, in GPU order.
TEST_CASE("planIdleMoves: toward the head's reserved node, by hand", "[alloc][recompose]") {
  auto c = makeCluster().pool("p").node("n1", 0, 4, 192'000).node("n2", 4, 0, 30'000).build();
  REQUIRE(c.reserve(*c.findNode("n1"), 100'000, 0).ok());
  const std::vector<RunningPod> running{
      runningOn(c, "n1", {"g0000", "g0001", "g0002", "g0003"}, 1000, 100'000)};
  const PodRequest head = pod(8, 40'000);
  RecomposeInput in;
  in.running = running;
  in.fabric = FabricClock{{0}};
  in.head = &head;
  auto [now, moveTime, expected] = GENERATE(table<std::int64_t, std::int64_t, std::size_t>({
      {0, 100, 4},    // lands at 100 <= 1000
      {900, 100, 4},  // lands at 1000: just in time
      {901, 100, 0},  // would land after the head's resources are free: never delays it
      {0, 0, 4},      // free moves
  }));
  CAPTURE(now, moveTime);
  auto plan = planIdleMoves(c, in, rules(moveTime), now);
  REQUIRE(plan.ok());
  if (expected == 0) {
    CHECK(plan->empty());
  } else {
    CHECK(*plan == moves(c, {{"g0004", "n1"}, {"g0005", "n1"}, {"g0006", "n1"}, {"g0007", "n1"}}));
  }
  // Anticipation is off while a head waits: the same state with a recent 8-GPU request and no
  // head gathers for it only when asked to.
  in.head = nullptr;
  const std::vector<PodRequest> recent{pod(8, 40'000)};
  in.recent = recent;
  in.anticipate = false;
  auto none = planIdleMoves(c, in, rules(moveTime), now);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

// Cancellation: the caller starts only the first move and plans again when it lands. Here the
// first move lands, then R1 ends early (a real release) and the head fits: the new plan is
// empty, so the three moves still planned are never made and the head is placed at once.
TEST_CASE("planIdleMoves: the rest of a plan is dropped once the head can be placed",
          "[alloc][recompose]") {
  auto c = makeCluster().pool("p").node("n1", 0, 4, 192'000).node("n2", 4, 0, 30'000).build();
  REQUIRE(c.reserve(*c.findNode("n1"), 100'000, 0).ok());
  std::vector<RunningPod> running{
      runningOn(c, "n1", {"g0000", "g0001", "g0002", "g0003"}, 1000, 100'000)};
  const PodRequest head = pod(8, 40'000);
  RecomposeInput in;
  in.running = running;
  in.fabric = FabricClock{{0}};
  in.head = &head;
  auto plan = planIdleMoves(c, in, rules(100), 0);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 4);
  const IdleMove first = plan->front();
  REQUIRE(c.detachGpu(first.gpu).ok());
  REQUIRE(c.attachGpu(first.gpu, first.to).ok());
  // Landed at 100; still waiting: the plan goes on with the three others.
  in.fabric = FabricClock{{100}};
  auto next = planIdleMoves(c, in, rules(100), 100);
  REQUIRE(next.ok());
  CHECK(next->size() == 3);
  // R1 ends at 150: the head fits now (one GPU on n1 already, three to move for it).
  for (GpuIndex g : running.front().gpus) {
    REQUIRE(c.releaseGpu(g).ok());
  }
  REQUIRE(c.release(*c.findNode("n1"), 100'000, 0).ok());
  running.clear();
  in.running = running;
  auto after = planIdleMoves(c, in, rules(100), 150);
  REQUIRE(after.ok());
  CHECK(after->empty());
  CHECK(selectNodeFor(c, head, {}, rules(100)).ok());
}

TEST_CASE("planIdleMoves: nothing moves when the head fits now, or in preconfigured mode",
          "[alloc][recompose]") {
  auto c = makeCluster().pool("p").node("n1", 2).node("n2", 2).build();
  const PodRequest head = pod(4);
  RecomposeInput in;
  in.fabric = FabricClock{{0}};
  in.head = &head;  // 4 free GPUs in the pool: it fits now (with 2 moves), nothing to prepare
  auto plan = planIdleMoves(c, in, rules(10), 0);
  REQUIRE(plan.ok());
  CHECK(plan->empty());
  const std::vector<PodRequest> recent{pod(4)};
  in.head = nullptr;
  in.recent = recent;
  auto ahead = planIdleMoves(c, in, rules(10, Composability::Preconfigured), 0);
  REQUIRE(ahead.ok());
  CHECK(ahead->empty());
  in.fabric = FabricClock{{0, 0}};
  auto bad = planIdleMoves(c, in, rules(10), 0);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
}

// Nothing waits. n1 4 free, n2 2 free, n3 2 free, 1 unattached; all 192 CPUs. The recent
// largest request wants k GPUs on one node: target n1 (most free), donors unattached first,
// then the nodes with the fewest free GPUs (n2, n3 tie: index order). With a recent one-GPU
// request of 80 CPUs, n2 and n3 (CPU free >= 80) keep their last free GPU.
TEST_CASE("planIdleMoves: gathering ahead of demand, singles kept near CPU, by hand",
          "[alloc][recompose]") {
  auto c = makeCluster()
               .pool("p")
               .node("n1", 4, 0, 192'000)
               .node("n2", 2, 0, 192'000)
               .node("n3", 2, 0, 192'000)
               .unattached(1)
               .build();
  // GPUs: n1 g0000-g0003, n2 g0004-g0005, n3 g0006-g0007, unattached g0008.
  RecomposeInput in;
  in.fabric = FabricClock{{0}};
  SECTION("k = 8: the unattached GPU, then n2's and n3's") {
    const std::vector<PodRequest> recent{pod(2, 10'000), pod(8, 40'000)};
    in.recent = recent;
    auto plan = planIdleMoves(c, in, rules(10), 0);
    REQUIRE(plan.ok());
    CHECK(*plan == moves(c, {{"g0008", "n1"}, {"g0004", "n1"}, {"g0005", "n1"}, {"g0006", "n1"}}));
  }
  SECTION("k = 8 with a CPU-heavy single: n2 and n3 keep one each, 7 < 8, nothing half-done") {
    const std::vector<PodRequest> recent{pod(1, 80'000), pod(8, 40'000)};
    in.recent = recent;
    auto plan = planIdleMoves(c, in, rules(10), 0);
    REQUIRE(plan.ok());
    CHECK(plan->empty());
  }
  SECTION("k = 6 with a CPU-heavy single: the unattached GPU and one of n2's") {
    const std::vector<PodRequest> recent{pod(6, 40'000), pod(1, 80'000)};
    in.recent = recent;
    auto plan = planIdleMoves(c, in, rules(10), 0);
    REQUIRE(plan.ok());
    CHECK(*plan == moves(c, {{"g0008", "n1"}, {"g0004", "n1"}}));
  }
  SECTION("k = 4 or only singles: n1 already holds enough") {
    const std::vector<PodRequest> recent{pod(4), pod(1)};
    in.recent = recent;
    auto plan = planIdleMoves(c, in, rules(10), 0);
    REQUIRE(plan.ok());
    CHECK(plan->empty());
  }
}

TEST_CASE("idle recomposition property: free GPUs only, never off the head's node, never later",
          "[alloc][recompose]") {
  const std::uint64_t seed = GENERATE(range(1, 201));
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  // 1-2 pools of 2-4 nodes (8-32 CPUs), 0-4 free and 0-3 used GPUs each, 0-2 unattached.
  auto b = makeCluster();
  const int pools = static_cast<int>(uni(1, 2));
  std::uint32_t minPoolGpus = 1000;
  for (int p = 0; p < pools; ++p) {
    b.pool(kc::alloc::test::named("p", static_cast<std::uint64_t>(p)));
    std::uint32_t poolGpus = 0;
    const int nodes = static_cast<int>(uni(2, 4));
    for (int n = 0; n < nodes; ++n) {
      const auto f = static_cast<std::uint32_t>(uni(0, 4));
      const auto u = static_cast<std::uint32_t>(uni(0, 3));
      poolGpus += f + u;
      b.node(
          kc::alloc::test::named("n", static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(n)),
          f, u, static_cast<std::uint64_t>(uni(8, 32)) * 1000, 64 * 1024);
    }
    const auto un = static_cast<std::uint32_t>(uni(0, 2));
    b.unattached(un);
    minPoolGpus = std::min(minPoolGpus, poolGpus + un);
  }
  ClusterState state = b.build();
  // One running pod per node holding its used GPUs, some CPU, ending at 10-500.
  std::vector<RunningPod> running;
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    RunningPod r;
    r.node = n;
    for (GpuIndex g : state.nodeGpus(n)) {
      if (state.gpu(g).inUse) {
        r.gpus.push_back(g);
      }
    }
    const auto cpu = static_cast<std::uint64_t>(uni(0, 8)) * 1000;
    REQUIRE(state.reserve(n, cpu, 0).ok());
    r.pod = PodRequest{cpu, 0, static_cast<std::uint32_t>(r.gpus.size())};
    r.end = uni(10, 500);
    running.push_back(std::move(r));
  }
  const PlacementRules r = rules(uni(0, 40));
  const std::int64_t now = uni(0, 5);
  FabricClock fabric{std::vector<std::int64_t>(state.poolCount(), 0)};
  PodRequest head = pod(static_cast<std::uint32_t>(uni(1, std::max<std::uint32_t>(minPoolGpus, 1))),
                        static_cast<std::uint64_t>(uni(1, 8)) * 1000);
  std::vector<PodRequest> recent;
  for (int i = 0, n = static_cast<int>(uni(0, 6)); i < n; ++i) {
    recent.push_back(
        pod(static_cast<std::uint32_t>(uni(0, 8)), static_cast<std::uint64_t>(uni(1, 16)) * 1000));
  }
  RecomposeInput in;
  in.running = running;
  in.fabric = fabric;
  in.recent = recent;
  const bool withHead = uni(0, 3) != 0;
  if (withHead) {
    in.head = &head;
  }
  auto plan = planIdleMoves(state, in, r, now);
  REQUIRE(plan.ok());
  std::set<GpuIndex> seen;
  for (const IdleMove& m : *plan) {
    CAPTURE(m.gpu, m.to);
    const GpuState& g = state.gpu(m.gpu);
    CHECK(g.free());                         // never a GPU in use (or unhealthy, draining)
    CHECK(g.node != m.to);                   // a real move
    CHECK(state.node(m.to).pool == g.pool);  // within its pool's fabric
    CHECK(seen.insert(m.gpu).second);        // each GPU once
  }
  if (!withHead || plan->empty()) {
    return;
  }
  // With a head: it does not fit now, every move goes to its reserved node and none leaves it,
  // at most the GPUs it will lack; and the first move (what the caller starts) keeps the
  // reservation no later.
  CHECK_FALSE(selectNodeFor(state, head, {}, r).ok());
  auto before = reserveHead(state, running, fabric, head, {}, r, now);
  REQUIRE(before.ok());
  CHECK(plan->size() <= before->gpusToMove);
  for (const IdleMove& m : *plan) {
    CHECK(m.to == before->node);
    CHECK(state.gpu(m.gpu).node != before->node);
  }
  ClusterState after = state;
  REQUIRE(after.detachGpu(plan->front().gpu).ok());
  REQUIRE(after.attachGpu(plan->front().gpu, plan->front().to).ok());
  FabricClock busy = fabric;
  busy.busyUntil[state.node(plan->front().to).pool] = now + r.moveTime;
  auto renewed = reserveHead(after, running, busy, head, {}, r, now);
  REQUIRE(renewed.ok());
  CHECK(renewed->start <= before->start);
}
