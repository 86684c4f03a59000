// EASY backfill with a reservation for the head (libcore/alloc/backfill.hpp): hand-computed
// tables on tiny clusters, and a seeded property test over random workloads.
#include "libcore/alloc/backfill.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/placement_helpers.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;
using kc::alloc::test::pod;
using kc::alloc::test::rules;
using kc::alloc::test::runningOn;

// One pool, n1 with 4 GPUs in use by R1 (ends 100), n2 with 4 GPUs in use by R2 (ends 50).
// Head wants 8 GPUs: at 50 the pool has 4 free (< 8), at 100 all 8; Eq. 1 ties n1/n2 (4 free
// each) and the name breaks it: n1, 4 GPUs to move from n2, at 10 s each after the fabric is
// free: start = max(100, busy) + 4 x 10.
TEST_CASE("reserveHead: fit time, node and moves, by hand", "[alloc][backfill]") {
  auto c = makeCluster().pool("p").node("n1", 0, 4).node("n2", 0, 4).build();
  const std::vector<RunningPod> running{
      runningOn(c, "n1", {"g0000", "g0001", "g0002", "g0003"}, 100),
      runningOn(c, "n2", {"g0004", "g0005", "g0006", "g0007"}, 50)};
  auto [busy, expectStart] = GENERATE(table<std::int64_t, std::int64_t>({
      {0, 140},    // fabric idle
      {130, 170},  // fabric busy until 130: moves start then
      {90, 140},   // busy until before the fit time: no effect
  }));
  CAPTURE(busy);
  auto r = reserveHead(c, running, FabricClock{{busy}}, pod(8), {}, rules(10), 0);
  REQUIRE(r.ok());
  CHECK(r->node == *c.findNode("n1"));
  CHECK(r->fitTime == 100);
  CHECK(r->gpusToMove == 4);
  CHECK(r->start == expectStart);
}

TEST_CASE("reserveHead: a head that fits now is reserved now, one that never fits is an error",
          "[alloc][backfill]") {
  auto c = makeCluster().pool("p").node("n1", 2, 2).node("n2", 0, 0).build();
  const std::vector<RunningPod> running{runningOn(c, "n1", {"g0000", "g0001"}, 70)};
  // 2 free on n1 now: starts now, nothing to move.
  auto now = reserveHead(c, running, FabricClock{{0}}, pod(2), {}, rules(10), 5);
  REQUIRE(now.ok());
  CHECK(now->start == 5);
  CHECK(now->gpusToMove == 0);
  // 4 GPUs: at 70 n1 holds all 4 (Eq. 1 prefers it, nothing to move).
  auto later = reserveHead(c, running, FabricClock{{0}}, pod(4), {}, rules(10), 5);
  REQUIRE(later.ok());
  CHECK(later->start == 70);
  CHECK(later->node == *c.findNode("n1"));
  // 5 GPUs: the pool has 4.
  auto never = reserveHead(c, running, FabricClock{{0}}, pod(5), {}, rules(10), 5);
  REQUIRE_FALSE(never.ok());
  CHECK(never.error().code == "unschedulable");
  // A fabric clock of the wrong size is refused.
  auto bad = reserveHead(c, running, FabricClock{{0, 0}}, pod(2), {}, rules(10), 5);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
}

// Composable: n1 4 GPUs in use by R1 (ends 100), n2 4 free; head wants 8 -> reservation 140
// (fit 100, 4 moves x 10; n1 wins the Eq. 1 tie by name). Candidates start at 0.
TEST_CASE("backfillKeeps: who may jump the head, by hand (composable)", "[alloc][backfill]") {
  auto c = makeCluster().pool("p").node("n1", 0, 4).node("n2", 4, 0).build();
  const std::vector<RunningPod> running{
      runningOn(c, "n1", {"g0000", "g0001", "g0002", "g0003"}, 100)};
  const FabricClock fabric{{0}};
  auto head = reserveHead(c, running, fabric, pod(8), {}, rules(10), 0);
  REQUIRE(head.ok());
  REQUIRE(head->start == 140);
  auto [gpus, cpu, duration, keeps, code] =
      GENERATE(table<std::uint32_t, std::uint64_t, std::int64_t, bool, std::string>({
          {1, 1000, 30, true, ""},                 // ends at 30, before the head's fit time 100
          {4, 1000, 100, true, ""},                // ends exactly at the fit time 100
          {1, 1000, 101, false, "conflict"},       // still holds a GPU at 100: head waits to 141+
          {0, 1000, 5000, true, ""},               // CPU only: takes nothing the head needs
          {0, 70000, 10, false, "unschedulable"},  // more CPU than a node has: no fit now
          {5, 1000, 10, false, "unschedulable"},   // 5 GPUs: only 4 free now
      }));
  CAPTURE(gpus, cpu, duration);
  auto r = backfillKeeps(c, running, fabric, *head, pod(8), {}, pod(gpus, cpu), {}, duration,
                         rules(10), SplitMix64(1), 0);
  CHECK(r.ok() == keeps);
  if (keeps) {
    CHECK(r->start == 140);
  } else {
    CHECK(r.error().code == code);
  }
}

// Composable with moves: n1 has 2 free GPUs and 2 in use by R1 (ends 100), n2 2 free, 3
// unattached (9 GPUs, 7 free now: the 8-GPU head waits). Moves take 50. At 100 all 9 are free;
// Eq. 1 prefers n1 (4 attached: score -4 vs n2's -6) -> 4 moves, start 100 + 200 = 300.
// A 3-GPU candidate ties n1/n2 (2 free each, score -1), n1 by name, moves one unattached GPU
// (fabric busy 0-50) and starts at 50. That GPU stays on n1, so once it ends the head needs
// only 3 moves: end = 50 + d, head start = max(100, 50 + d) + 150.
TEST_CASE("backfillKeeps: a candidate's moves and fabric time count", "[alloc][backfill]") {
  auto c = makeCluster().pool("p").node("n1", 2, 2).node("n2", 2, 0).unattached(3).build();
  const std::vector<RunningPod> running{runningOn(c, "n1", {"g0000", "g0001"}, 100)};
  const FabricClock fabric{{0}};
  auto head = reserveHead(c, running, fabric, pod(8), {}, rules(50), 0);
  REQUIRE(head.ok());
  CHECK(head->start == 300);
  CHECK(head->gpusToMove == 4);
  auto [duration, keeps, newStart] = GENERATE(table<std::int64_t, bool, std::int64_t>({
      {40, true, 250},    // ends at 90: the head fits at 100 with 3 moves, earlier than before
      {100, true, 300},   // ends at 150: 150 + 150 = 300, not later
      {101, false, 301},  // ends at 151: 301 > 300, refused
  }));
  CAPTURE(duration);
  auto k = backfillKeeps(c, running, fabric, *head, pod(8), {}, pod(3), {}, duration, rules(50),
                         SplitMix64(1), 0);
  REQUIRE(k.ok() == keeps);
  if (keeps) {
    CHECK(k->start == newStart);
  } else {
    CHECK(k.error().code == "conflict");
    CHECK(k.error().message.find("300 to " + std::to_string(newStart)) != std::string::npos);
  }
}

// Preconfigured: n1 4 GPUs in use (ends 100), n2 2 in use (ends 50) + 2 free. Head wants 4:
// at 50 n2 has 4 -> start 50, no moves. A 2-GPU candidate can only take n2's free pair.
TEST_CASE("backfillKeeps: preconfigured, by hand", "[alloc][backfill]") {
  auto c = makeCluster().pool("p").node("n1", 0, 4).node("n2", 2, 2).build();
  const std::vector<RunningPod> running{
      runningOn(c, "n1", {"g0000", "g0001", "g0002", "g0003"}, 100),
      runningOn(c, "n2", {"g0004", "g0005"}, 50)};
  const auto r = rules(10, Composability::Preconfigured);
  auto head = reserveHead(c, running, FabricClock{{0}}, pod(4), {}, r, 0);
  REQUIRE(head.ok());
  CHECK(head->start == 50);
  CHECK(head->node == *c.findNode("n2"));
  auto [duration, keeps] =
      GENERATE(table<std::int64_t, bool>({{40, true}, {50, true}, {51, false}, {100, false}}));
  CAPTURE(duration);
  auto k = backfillKeeps(c, running, FabricClock{{0}}, *head, pod(4), {}, pod(2), {}, duration, r,
                         SplitMix64(1), 0);
  CHECK(k.ok() == keeps);
}

TEST_CASE("registry: queue policies by name, fcfs the default", "[alloc][registry]") {
  auto [name, discipline] = GENERATE(table<std::string, QueueDiscipline>({
      {"fcfs", QueueDiscipline::Fcfs},
      {"backfill", QueueDiscipline::Backfill},
      {"easy-backfill", QueueDiscipline::EasyBackfill},
      {"slack-backfill", QueueDiscipline::SlackBackfill},
  }));
  auto p = findQueuePolicy(name);
  REQUIRE(p.ok());
  CHECK(p->discipline == discipline);
  CHECK_FALSE(p->description.empty());
  CHECK(kDefaultQueuePolicy == "fcfs");
  auto bad = findQueuePolicy("easy");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "not_found");
  CHECK(bad.error().message.find("easy-backfill") != std::string::npos);
  CHECK(queuePolicies().size() == 4);
}

// The property: over random workloads on random small composable clusters, a driver that runs
// the queue the EASY way (FCFS while the head fits, then backfillKeeps for each later job)
// never sees the head's reservation move later, the head starts no later than any reservation
// it was given, and every job starts (no starvation).
TEST_CASE("easy backfill property: the head's reservation never moves later, nobody starves",
          "[alloc][backfill]") {
  const std::uint64_t seed = GENERATE(range(1, 61));
  CAPTURE(seed);
  std::mt19937_64 gen(seed);
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  std::uint32_t minPoolGpus = 0;
  ClusterState state = kc::alloc::test::randomQueueCluster(gen, minPoolGpus);
  const PlacementRules r = rules(uni(0, 30));
  // Jobs: arrival 0-300, 0..min pool GPUs (runnable on the empty cluster), 1-16 CPUs, 1-200 s.
  struct TestJob {
    std::int64_t arrival, duration;
    PodRequest pod;
  };
  std::vector<TestJob> jobs(static_cast<std::size_t>(uni(5, 25)));
  for (auto& j : jobs) {
    j = TestJob{
        uni(0, 300), uni(1, 200),
        PodRequest{static_cast<std::uint64_t>(uni(1, 16)) * 1000, 1024,
                   static_cast<std::uint32_t>(uni(0, std::max<std::uint32_t>(minPoolGpus, 0)))}};
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const TestJob& a, const TestJob& b) { return a.arrival < b.arrival; });

  FabricClock fabric{std::vector<std::int64_t>(state.poolCount(), 0)};
  SplitMix64 rng(seed);
  std::vector<RunningPod> running;
  std::vector<std::size_t> queue;
  std::vector<std::int64_t> started(jobs.size(), -1);
  std::map<std::size_t, std::int64_t> bestReservation;  // per job, its latest reservation
  std::size_t nextArrival = 0;
  std::int64_t now = 0;
  int backfilled = 0;
  for (int step = 0; step < 10'000; ++step) {
    // Ends, then arrivals.
    for (auto it = running.begin(); it != running.end();) {
      if (it->end <= now) {
        for (GpuIndex g : it->gpus) {
          REQUIRE(state.releaseGpu(g).ok());
        }
        REQUIRE(state.release(it->node, it->pod.cpuMilli, it->pod.memoryMiB).ok());
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    while (nextArrival < jobs.size() && jobs[nextArrival].arrival <= now) {
      queue.push_back(nextArrival++);
    }
    auto start = [&](std::size_t j) -> bool {
      auto placed = placeNow(state, fabric, jobs[j].pod, {}, r, &rng, now);
      if (!placed) {
        REQUIRE(placed.error().code == "unschedulable");
        return false;
      }
      started[j] = placed->start;
      running.push_back(
          RunningPod{placed->node, jobs[j].pod, placed->gpus, placed->start + jobs[j].duration});
      return true;
    };
    while (!queue.empty() && start(queue.front())) {
      const std::size_t h = queue.front();
      if (auto it = bestReservation.find(h); it != bestReservation.end()) {
        CAPTURE(h, now);
        CHECK(started[h] <= it->second);  // the head starts by its reservation
      }
      queue.erase(queue.begin());
    }
    if (!queue.empty()) {
      const std::size_t h = queue.front();
      auto res = reserveHead(state, running, fabric, jobs[h].pod, {}, r, now);
      REQUIRE(res.ok());
      if (auto it = bestReservation.find(h); it != bestReservation.end()) {
        CAPTURE(h, now);
        CHECK(res->start <= it->second);  // renewed later: never later
      }
      bestReservation[h] = res->start;
      for (auto it = std::next(queue.begin()); it != queue.end();) {
        const std::size_t j = *it;
        auto keeps = backfillKeeps(state, running, fabric, *res, jobs[h].pod, {}, jobs[j].pod, {},
                                   jobs[j].duration, r, rng, now);
        if (!keeps) {
          REQUIRE((keeps.error().code == "unschedulable" || keeps.error().code == "conflict"));
          ++it;
          continue;
        }
        REQUIRE(start(j));
        ++backfilled;
        // Recomputed from the real state after the start: the same, never later.
        auto after = reserveHead(state, running, fabric, jobs[h].pod, {}, r, now);
        REQUIRE(after.ok());
        CHECK(after->start == keeps->start);
        CHECK(after->start <= res->start);
        *res = *after;
        bestReservation[h] = res->start;
        it = queue.erase(it);
      }
    }
    if (queue.empty() && nextArrival == jobs.size()) {
      break;
    }
    std::int64_t next = INT64_MAX;
    for (const auto& rp : running) {
      next = std::min(next, rp.end);
    }
    if (nextArrival < jobs.size()) {
      next = std::min(next, jobs[nextArrival].arrival);
    }
    REQUIRE(next != INT64_MAX);  // something waits, so something must happen
    now = std::max(now + 1, next);
  }
  // No starvation: every job started.
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    CAPTURE(j);
    CHECK(started[j] >= jobs[j].arrival);
  }
  (void)backfilled;
}
