// BackfillPlanner (libcore/alloc/backfill.hpp) against the reference free functions reserveHead
// and backfillKeeps, which copy the pool model for every question: over random clusters (GPU
// models, unattached GPUs, a pool-less node, both modes, every GPU policy), running pods and
// queues, every answer (value, or error code and message) must be the same, also after real
// starts (the planner reset on the grown running list) and after many questions on one planner
// (its journal undoes each).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

using namespace kc::alloc;

namespace {

void requireSame(const kc::Result<Reservation>& want, const kc::Result<Reservation>& got) {
  REQUIRE(want.ok() == got.ok());
  if (want.ok()) {
    CHECK(*want == *got);
  } else {
    CHECK(want.error().code == got.error().code);
    CHECK(want.error().message == got.error().message);
  }
}

}  // namespace

TEST_CASE("backfill planner: the same answers as reserveHead and backfillKeeps",
          "[alloc][backfill]") {
  const std::uint64_t seed = GENERATE(range(1, 301));
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  const char* kModels[] = {"A100", "V100"};
  std::vector<GpuModelFilter> filters{GpuModelFilter{}};
  for (const char* text : {"A100", "V100", "A100|V100"}) {
    filters.push_back(*GpuModelFilter::parse(text, '|'));
  }
  auto anyFilter = [&]() -> const GpuModelFilter& {
    return uni(0, 2) == 0 ? filters[static_cast<std::size_t>(uni(1, 3))] : filters[0];
  };

  ClusterState state;
  const auto pools = static_cast<std::uint64_t>(uni(1, 3));
  std::uint64_t gpuId = 0;
  for (std::uint64_t p = 0; p < pools; ++p) {
    const PoolIndex pool = *state.addPool(test::named("p", p));
    const auto nodes = static_cast<std::uint64_t>(uni(2, 5));
    for (std::uint64_t n = 0; n < nodes; ++n) {
      const NodeIndex node =
          *state.addNode(NodeSpec{test::named("n", p, n), pool, 16'000, 64 * 1024});
      for (auto g = uni(0, 4); g > 0; --g, ++gpuId) {
        REQUIRE(state
                    .addGpu(GpuSpec{test::named("g", gpuId), test::named("u", gpuId),
                                    kModels[uni(0, 1)], pool, node, false, uni(0, 15) != 0, false})
                    .ok());
      }
    }
    for (auto u = uni(0, 3); u > 0; --u, ++gpuId) {
      REQUIRE(state
                  .addGpu(GpuSpec{test::named("g", gpuId), test::named("u", gpuId),
                                  kModels[uni(0, 1)], pool, kNoNode, false, true, false})
                  .ok());
    }
  }
  if (uni(0, 1) == 1) {
    REQUIRE(state.addNode(NodeSpec{"cpu-only", kNoPool, 8'000, 64 * 1024}).ok());
  }
  // Running pods: groups of a node's free GPUs (or none), with CPU; some already ended.
  std::vector<RunningPod> running;
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    for (int k = 0; k < 3; ++k) {
      RunningPod r{
          n, PodRequest{static_cast<std::uint64_t>(uni(1, 5)) * 1000, 1024, 0}, {}, uni(-5, 300)};
      const auto want = static_cast<std::size_t>(uni(0, 3));
      for (GpuIndex g : state.nodeGpus(n)) {
        if (r.gpus.size() < want && state.gpu(g).free()) {
          r.gpus.push_back(g);
        }
      }
      for (GpuIndex g : r.gpus) {
        REQUIRE(state.allocateGpu(g).ok());
      }
      r.pod.gpus = static_cast<std::uint32_t>(r.gpus.size());
      if (!state.reserve(n, r.pod.cpuMilli, r.pod.memoryMiB)) {
        continue;  // (no GPUs were taken for it either: the node has no room)
      }
      running.push_back(std::move(r));
    }
  }
  // Pods whose GPUs were allocated but that did not fit: give the GPUs back.
  // (reserve fails only for CPU; GPUs allocated above must belong to a running pod.)
  for (GpuIndex g = 0; g < state.gpuCount(); ++g) {
    bool held = false;
    for (const auto& r : running) {
      held = held || std::find(r.gpus.begin(), r.gpus.end(), g) != r.gpus.end();
    }
    if (state.gpu(g).inUse && !held) {
      REQUIRE(state.releaseGpu(g).ok());
    }
  }
  FabricClock fabric;
  for (std::uint64_t p = 0; p < pools; ++p) {
    fabric.busyUntil.push_back(uni(0, 100));
  }
  const char* kGpuPolicies[] = {"alg1", "unattached-first", "random", "first-fit"};
  const PlacementRules rules{
      uni(0, 3) == 0 ? Composability::Preconfigured : Composability::Composable,
      *findNodePolicy("eq1"), *findGpuPolicy(kGpuPolicies[uni(0, 3)]), uni(0, 30)};
  SplitMix64 rng(seed);
  const std::int64_t now = 0;
  auto randomPod = [&] {
    return PodRequest{static_cast<std::uint64_t>(uni(1, 12)) * 1000, 1024,
                      static_cast<std::uint32_t>(uni(0, 8))};
  };

  BackfillPlanner planner;
  int kept = 0;
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    REQUIRE(planner.reset(state, running, fabric).ok());
    const PodRequest head = randomPod();
    const GpuModelFilter& headModels = anyFilter();
    const auto want = reserveHead(state, running, fabric, head, headModels, rules, now);
    requireSame(want, planner.reserveHead(head, headModels, rules, now));
    if (!want) {
      continue;
    }
    std::vector<std::pair<PodRequest, const GpuModelFilter*>> later;
    for (int c = 0; c < 12; ++c) {
      const PodRequest cand = randomPod();
      const GpuModelFilter& cm = anyFilter();
      const std::int64_t duration = uni(1, 400);
      const auto k = backfillKeeps(state, running, fabric, *want, head, headModels, cand, cm,
                                   duration, rules, rng, now);
      requireSame(
          k, planner.backfillKeeps(*want, head, headModels, cand, cm, duration, rules, rng, now));
      if (k) {
        ++kept;
        later.emplace_back(cand, &cm);
      }
    }
    // The head again, after all those questions: the planner's copy is back where it was.
    requireSame(want, planner.reserveHead(head, headModels, rules, now));
    // Start what was kept for real, as a pass does, then go round again on the grown list.
    for (const auto& [pod, models] : later) {
      auto placed = placeNow(state, fabric, pod, *models, rules, &rng, now);
      if (placed) {
        running.push_back(RunningPod{placed->node, pod, placed->gpus, placed->start + uni(1, 400)});
      }
    }
  }
  (void)kept;
}

TEST_CASE("backfill planner: a view that does not match its cluster is refused",
          "[alloc][backfill]") {
  ClusterState state;
  const PoolIndex p = *state.addPool("p");
  REQUIRE(state.addNode(NodeSpec{"n", p, 1000, 1024}).ok());
  BackfillPlanner planner;
  CHECK(planner.reset(state, {}, FabricClock{{0, 0}}).error().code == "invalid");
  const std::vector<RunningPod> bad{RunningPod{7, PodRequest{}, {}, 10}};
  CHECK(planner.reset(state, bad, FabricClock{{0}}).error().code == "invalid");
  CHECK(planner.reset(state, {}, FabricClock{{0}}).ok());
}
