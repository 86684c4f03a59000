// Idle-time recomposition and slack-backfill in the engine: a crafted trace whose waits, moves
// and the one interrupted background move are computed by hand, and random traces on which
// every head still starts by its reservation (easy-backfill) or its bound (slack-backfill),
// with the move counters consistent.
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/sim/sim_jobs.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/report.hpp"
#include "tools/kubecomp-sim/workload.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;
using kc::sim::test::job;

namespace {

SimConfig config(const char* queue, const char* recompose, double moveS) {
  SimConfig c = defaultSimConfig();
  c.queue = alloc::findQueuePolicy(queue)->discipline;
  c.recompose = alloc::findRecomposePolicy(recompose)->kind;
  c.moveTime = static_cast<SimMs>(moveS * kMsPerSecond);
  return c;
}

}  // namespace

// One pool, moves 10 s. n1: 192 CPUs, 4 GPUs; n2: 30 CPUs, 4 GPUs (too few CPUs for b or c).
//   a t=0  4 GPUs 100 CPUs 100 s: n1, starts 0, ends 100.
//   b t=10 8 GPUs  40 CPUs 100 s: head; only n1 can host it, once a ends (fit 100).
//   c t=15 1 GPU   60 CPUs  10 s: only n1 (CPU).
// none + easy-backfill: c moves one GPU 15-25 (wait 10, ends 35, keeps b's reservation 140 ->
//   130); b at 100 moves the other 3: 100 + 30, wait 120. 4 moves, all while a pod waits.
// idle-gather + easy-backfill: at 10 n2's GPUs start moving to n1, one at a time (lands 20,
//   30, 40, 50). c at 15 gets the GPU in flight to n1 and starts when it lands (20, wait 5: the
//   one move it waits for; the rest of the plan is re-made at 20). b starts at 100 with every
//   GPU in place (wait 90). 4 background moves, all while b waited.
// idle-gather + fcfs: the same moves; c waits behind b until b ends (200, wait 185).
TEST_CASE("idle-gather: crafted trace, waits and moves by hand", "[sim]") {
  auto c = alloc::test::makeCluster()
               .pool("p")
               .node("n1", 4, 0, 192'000, 1024)
               .node("n2", 4, 0, 30'000, 1024)
               .build();
  Trace t;
  t.jobs = {job(0, 0, 4, 100, 100'000), job(1, 10, 8, 100, 40'000), job(2, 15, 1, 10, 60'000)};
  auto [queue, recompose, waitB, waitC, idle, interrupted] =
      GENERATE(table<const char*, const char*, double, double, std::uint64_t, std::uint64_t>({
          {"easy-backfill", "none", 120, 10, 0, 0},
          {"easy-backfill", "idle-gather", 90, 5, 4, 1},
          {"fcfs", "idle-gather", 90, 185, 4, 0},
          {"fcfs", "none", 130, 225, 0, 0},
      }));
  CAPTURE(queue, recompose);
  auto r = simulate(c, t, config(queue, recompose, 10));
  REQUIRE(r.ok());
  auto wait = [&](std::size_t i) {
    return static_cast<double>(r->jobs[i].start - t.jobs[i].arrival) / kMsPerSecond;
  };
  CHECK(wait(0) == 0);
  CHECK(wait(1) == waitB);
  CHECK(wait(2) == waitC);
  CHECK(r->jobs[1].node == *c.findNode("n1"));
  CHECK(r->gpusMoved == 4);
  CHECK(r->gpusMovedWhileWaiting == 4);
  CHECK(r->idleMoves == idle);
  CHECK(r->idleMovesInterrupted == interrupted);
  const Summary s = summarise(t, *r);
  CHECK(s.gpusMovedWhileWaiting == 4);
  CHECK(s.idleMoves == idle);
}

// Workload 2 (50% Job A, 50% Job C) on the testbed shape, 20 seeds: between bursts GPUs sit
// free and idle-gather gathers pairs for Job C ahead of demand, so fewer moves are paid while
// a pod waits; the background moves made while nothing waited are the difference.
TEST_CASE("idle-gather: moves ahead of demand are counted as made while nothing waited", "[sim]") {
  std::uint64_t waitingNone = 0;
  std::uint64_t waitingIdle = 0;
  std::uint64_t idleMoves = 0;
  std::uint64_t idleNothingWaiting = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    WorkloadSpec w;
    w.mix = *mixByName("w2");
    w.jobs = 25;
    w.lambda = 60;
    w.seed = seed;
    LayoutSpec spec;
    spec.perNodeGpus = {4, 4};
    spec.nodeCpuMilli = 192'000;
    spec.nodeMemoryMib = 1 << 20;
    auto t = generateWorkload(w);
    auto c = buildCluster(spec);
    REQUIRE(t.ok());
    REQUIRE(c.ok());
    auto none = simulate(*c, *t, config("fcfs", "none", 19.5));
    auto idle = simulate(*c, *t, config("fcfs", "idle-gather", 19.5));
    REQUIRE(none.ok());
    REQUIRE(idle.ok());
    CHECK(none->idleMoves == 0);
    CHECK(none->gpusMovedWhileWaiting == none->gpusMoved);
    waitingNone += none->gpusMovedWhileWaiting;
    waitingIdle += idle->gpusMovedWhileWaiting;
    idleMoves += idle->idleMoves;
    idleNothingWaiting += idle->gpusMoved - idle->gpusMovedWhileWaiting;
  }
  CAPTURE(waitingNone, waitingIdle, idleMoves, idleNothingWaiting);
  CHECK(idleNothingWaiting > 0);
  CHECK(idleNothingWaiting <= idleMoves);
  CHECK(waitingIdle < waitingNone);
}

// Random traces: with idle-gather under easy-backfill every head starts by the first
// reservation it was given; under slack-backfill (with or without idle-gather) by its first
// reservation plus its own run time; every job runs; the counters add up.
TEST_CASE("idle-gather and slack-backfill: random traces keep the head's guarantee", "[sim]") {
  for (std::uint64_t seed = 1; seed <= 600; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 gen(seed);
    auto uni = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
    };
    LayoutSpec spec;
    spec.pools = static_cast<std::uint32_t>(uni(1, 2));
    spec.perNodeGpus =
        uni(0, 1) == 0 ? std::vector<std::uint32_t>{4, 4} : std::vector<std::uint32_t>{2, 2, 4};
    spec.unattachedPerPool = static_cast<std::uint32_t>(uni(0, 4));
    spec.nodeCpuMilli = 32'000;
    spec.nodeMemoryMib = 1024;
    auto c = buildCluster(spec);
    REQUIRE(c.ok());
    Trace t;
    double at = 0;
    const int n = static_cast<int>(uni(10, 40));
    for (int i = 0; i < n; ++i) {
      at += static_cast<double>(uni(0, 60));
      const std::uint32_t gpus = uni(0, 5) == 0 ? 8 : static_cast<std::uint32_t>(uni(0, 4));
      t.jobs.push_back(job(static_cast<std::size_t>(i), at, gpus, static_cast<double>(uni(1, 300)),
                           uni(1, 32) * 1000));
    }
    const double moveS = static_cast<double>(uni(0, 120));
    for (auto [queue, recompose] :
         std::vector<std::pair<const char*, const char*>>{{"easy-backfill", "idle-gather"},
                                                          {"slack-backfill", "none"},
                                                          {"slack-backfill", "idle-gather"},
                                                          {"fcfs", "idle-gather"}}) {
      CAPTURE(queue, recompose);
      SimConfig cfg = config(queue, recompose, moveS);
      std::map<std::size_t, SimMs> first;
      cfg.onReserve = [&](std::size_t j, SimMs start, SimMs) { first.emplace(j, start); };
      auto r = simulate(*c, t, cfg);
      REQUIRE(r.ok());
      const bool slack = std::string(queue) == "slack-backfill";
      for (const auto& [j, start] : first) {
        CAPTURE(j);
        CHECK(r->jobs[j].start <= start + (slack ? t.jobs[j].duration : 0));
      }
      CHECK(r->rejected == 0);
      std::uint64_t placementMoves = 0;
      for (const JobOutcome& o : r->jobs) {
        CHECK(o.start >= 0);
        placementMoves += o.gpusMoved;
      }
      CHECK(r->gpusMoved == placementMoves + r->idleMoves);
      CHECK(r->gpusMovedWhileWaiting >= placementMoves);
      CHECK(r->gpusMovedWhileWaiting <= r->gpusMoved);
      if (std::string(recompose) == "none") {
        CHECK(r->idleMoves == 0);
      }
    }
  }
}
