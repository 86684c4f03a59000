// easy-backfill in the engine (libcore/alloc/backfill.hpp): a crafted trace whose waits are
// computed by hand, and random traces on which the head's reservation never moves later.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/sim/sim_jobs.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;
using kc::sim::test::job;

namespace {

alloc::ClusterState cluster(const std::string& layout, std::uint32_t pools,
                            std::uint32_t unattached, double cpus) {
  LayoutSpec spec;
  spec.pools = pools;
  spec.perNodeGpus = *parseLayout(layout);
  spec.unattachedPerPool = unattached;
  spec.nodeCpuMilli = static_cast<std::int64_t>(cpus * 1000);
  spec.nodeMemoryMib = 1024;
  auto c = buildCluster(spec);
  REQUIRE(c.ok());
  return std::move(*c);
}

SimConfig config(const char* queue, double moveS) {
  SimConfig c = defaultSimConfig();
  c.queue = alloc::findQueuePolicy(queue)->discipline;
  c.moveTime = static_cast<SimMs>(moveS * kMsPerSecond);
  return c;
}

double meanWaitS(const Trace& t, const SimResult& r) {
  double sum = 0;
  for (std::size_t i = 0; i < t.jobs.size(); ++i) {
    sum += static_cast<double>(r.jobs[i].start - t.jobs[i].arrival) / kMsPerSecond;
  }
  return sum / static_cast<double>(t.jobs.size());
}

std::int64_t uniform(std::mt19937_64& gen, std::int64_t lo, std::int64_t hi) {
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
}

// A random small composable cluster (4+4 or 2+2+4, 1-2 pools, 0-4 unattached GPUs a pool, 32
// CPUs a node) and 10-40 jobs on it (gaps 0-60 s, one in six 8-GPU, run times 1-300 s).
struct RandomCase {
  alloc::ClusterState cluster;
  Trace trace;
};
RandomCase randomCase(std::mt19937_64& gen) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) { return uniform(gen, lo, hi); };
  const auto pools = static_cast<std::uint32_t>(uni(1, 2));
  RandomCase out{
      cluster(uni(0, 1) == 0 ? "4+4" : "2+2+4", pools, static_cast<std::uint32_t>(uni(0, 4)), 32),
      {}};
  double at = 0;
  const int n = static_cast<int>(uni(10, 40));
  for (int i = 0; i < n; ++i) {
    at += static_cast<double>(uni(0, 60));
    const std::uint32_t gpus = uni(0, 5) == 0 ? 8 : static_cast<std::uint32_t>(uni(0, 4));
    out.trace.jobs.push_back(job(static_cast<std::size_t>(i), at, gpus,
                                 static_cast<double>(uni(1, 300)), uni(1, 32) * 1000));
  }
  return out;
}

// Records every reservation the engine reports and checks, per head, that it never grows.
struct ReservationLog {
  std::map<std::size_t, SimMs> latest;
  std::map<std::size_t, SimMs> first;
  int later = 0;  // reservations renewed later than before (must stay 0)
  int calls = 0;
  void attach(SimConfig& c) {
    c.onReserve = [this](std::size_t j, SimMs start, SimMs) {
      ++calls;
      if (auto it = latest.find(j); it != latest.end() && start > it->second) {
        ++later;
      }
      latest[j] = start;
      first.emplace(j, start);
    };
  }
};

}  // namespace

// Composable 4+4, one pool, moves 10 s:
//   a t=0 4 GPUs 100 s: n000000 (Eq. 1 tie, name), start 0, ends 100.
//   b t=1 8 GPUs 10 s: head. Reserved n000000 at 100 + 4 moves x 10 = 140; ends 150.
//   c t=2 2 GPUs 50 s: fits n000001 now and ends at 52 < 100: backfilled (fcfs: starts 150).
//   d t=3 1 GPU 200 s: would hold a GPU until 203, so b could start only at 243: not backfilled
//     (greedy backfill starts it at 3 and b at 243); starts at 150 after b.
TEST_CASE("easy-backfill: crafted trace, waits by hand, the head is never delayed", "[sim]") {
  Trace t;
  t.jobs = {job(0, 0, 4, 100), job(1, 1, 8, 10), job(2, 2, 2, 50), job(3, 3, 1, 200)};
  const auto c = cluster("4+4", 1, 0, 100);
  auto [queue, waitB, waitC, waitD] = GENERATE(table<const char*, double, double, double>({
      {"fcfs", 139, 148, 147},
      {"easy-backfill", 139, 0, 147},
      {"backfill", 242, 0, 0},
  }));
  CAPTURE(queue);
  SimConfig cfg = config(queue, 10);
  ReservationLog log;
  log.attach(cfg);
  auto r = simulate(c, t, cfg);
  REQUIRE(r.ok());
  auto wait = [&](std::size_t i) {
    return static_cast<double>(r->jobs[i].start - t.jobs[i].arrival) / kMsPerSecond;
  };
  CHECK(wait(0) == 0);
  CHECK(wait(1) == waitB);
  CHECK(wait(2) == waitC);
  CHECK(wait(3) == waitD);
  if (std::string(queue) == "easy-backfill") {
    CHECK(meanWaitS(t, *r) == Approx((0 + 139 + 0 + 147) / 4.0));
    REQUIRE(log.first.count(1) == 1);
    CHECK(log.first.at(1) == 140'000);
    CHECK(log.later == 0);
    CHECK(r->jobs[1].start == 140'000);
  } else {
    CHECK(log.calls == 0);  // only easy-backfill reserves
  }
}

// Random traces on random composable clusters: under easy-backfill every head starts by every
// reservation it was given, reservations never move later and every job runs. EASY may lose
// to FCFS on one trace (a backfilled job can move GPUs a later head then misses), so the wait
// is compared only summed over the seeds.
TEST_CASE("easy-backfill: random traces keep every reservation, nobody starves", "[sim]") {
  double easyTotal = 0;
  double fcfsTotal = 0;
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 gen(seed);
    const auto [c, t] = randomCase(gen);
    SimConfig cfg = config("easy-backfill", static_cast<double>(uniform(gen, 0, 120)));
    ReservationLog log;
    log.attach(cfg);
    auto easy = simulate(c, t, cfg);
    REQUIRE(easy.ok());
    CHECK(log.later == 0);
    for (const auto& [j, start] : log.latest) {
      CAPTURE(j);
      CHECK(easy->jobs[j].start <= start);
      CHECK(easy->jobs[j].start <= log.first.at(j));
    }
    CHECK(easy->rejected == 0);
    for (const JobOutcome& o : easy->jobs) {
      CHECK(o.start >= 0);
    }
    SimConfig fc = config("fcfs", static_cast<double>(cfg.moveTime) / kMsPerSecond);
    auto fcfs = simulate(c, t, fc);
    REQUIRE(fcfs.ok());
    easyTotal += meanWaitS(t, *easy);
    fcfsTotal += meanWaitS(t, *fcfs);
  }
  CHECK(easyTotal < fcfsTotal);
}

// slack-backfill in the engine with the slack factor (1 as registered, 3 as measured on
// Workload 4, 0), alone and with idle-gather: on random traces every head starts by its first
// reservation plus factor x its run time (the bound fixed when it became the head), and every
// job runs.
TEST_CASE("slack-backfill with a slack factor: every head starts by its bound, nobody starves",
          "[sim]") {
  for (const double factor : {1.0, 3.0, 0.0}) {
    for (std::uint64_t seed = 1; seed <= 60; ++seed) {
      CAPTURE(factor, seed);
      std::mt19937_64 gen(seed);
      const auto [c, t] = randomCase(gen);
      SimConfig cfg = config("slack-backfill", static_cast<double>(uniform(gen, 0, 120)));
      cfg.slackFactor = factor;
      if (uniform(gen, 0, 1) == 1) {
        cfg.recompose = alloc::RecomposeKind::IdleGather;
      }
      ReservationLog log;
      log.attach(cfg);
      auto r = simulate(c, t, cfg);
      REQUIRE(r.ok());
      for (const auto& [j, first] : log.first) {
        CAPTURE(j);
        const auto slack =
            static_cast<SimMs>(std::llround(static_cast<double>(t.jobs[j].duration) * factor));
        CHECK(r->jobs[j].start <= first + slack);
      }
      CHECK(r->rejected == 0);
      for (const JobOutcome& o : r->jobs) {
        CHECK(o.start >= 0);
      }
    }
  }
}
