#include "tools/kubecomp-sim/engine.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/report.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;

namespace {

// Builder for a small trace: times in seconds, 1 CPU, no memory.
class TraceBuilder {
 public:
  TraceBuilder& job(double arrivalS, std::uint32_t gpus, double durationS) {
    Job j;
    j.id = "j";
    j.id += std::to_string(trace_.jobs.size());
    j.arrival = static_cast<SimMs>(arrivalS * kMsPerSecond);
    j.duration = static_cast<SimMs>(durationS * kMsPerSecond);
    j.gpus = gpus;
    j.cpuMilli = 1000;
    trace_.jobs.push_back(j);
    return *this;
  }
  Trace build() const { return trace_; }

 private:
  Trace trace_;
};

alloc::ClusterState cluster(const std::string& layout, std::uint32_t pools = 1, double cpus = 100) {
  LayoutSpec spec;
  spec.pools = pools;
  spec.perNodeGpus = *parseLayout(layout);
  spec.nodeCpuMilli = static_cast<std::int64_t>(cpus * 1000);
  spec.nodeMemoryMib = 1024;
  auto c = buildCluster(spec);
  REQUIRE(c.ok());
  return std::move(*c);
}

SimConfig config(alloc::Composability mode, double moveS,
                 QueueDiscipline q = QueueDiscipline::Fcfs) {
  SimConfig c = defaultSimConfig();
  c.mode = mode;
  c.moveTime = static_cast<SimMs>(moveS * kMsPerSecond);
  c.queue = q;
  return c;
}

// "<prefix><i>" (written so, GCC 12 warns falsely on "literal" + std::string in a loop).
std::string numbered(const char* prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

double waitS(const Trace& t, const SimResult& r, std::size_t i) {
  return static_cast<double>(r.jobs[i].start - t.jobs[i].arrival) / kMsPerSecond;
}

}  // namespace

// 2 nodes x 2 GPUs, one pool, 10 s per GPU move.
//   j0 t=0 3 GPUs 100 s: no node has 3 -> least demand, tie -> n000000, move 1 -> start 10.
//   j1 t=5 1 GPU 50 s: best fit -> n000001 (1 free), start 5.
//   j2 t=6 1 GPU 20 s: nothing free until j1 ends at 55 -> start 55 on n000001.
//   j3 t=7 4 GPUs 10 s: behind j2; at 110 j0 ends: n0 has 3, move 1 from n1 (pool idle since
//   10) -> start 120.
TEST_CASE("composable FCFS: hand-computed waits, moves serialised and charged") {
  const Trace t = TraceBuilder().job(0, 3, 100).job(5, 1, 50).job(6, 1, 20).job(7, 4, 10).build();
  const auto c = cluster("2+2");
  auto r = simulate(c, t, config(alloc::Composability::Composable, 10));
  REQUIRE(r.ok());
  CHECK(waitS(t, *r, 0) == 10);
  CHECK(waitS(t, *r, 1) == 0);
  CHECK(waitS(t, *r, 2) == 49);
  CHECK(waitS(t, *r, 3) == 113);
  CHECK(c.node(r->jobs[0].node).name == "n000000");
  CHECK(c.node(r->jobs[1].node).name == "n000001");
  CHECK(c.node(r->jobs[2].node).name == "n000001");
  CHECK(c.node(r->jobs[3].node).name == "n000000");
  CHECK(r->jobs[0].gpusMoved == 1);
  CHECK(r->jobs[3].gpusMoved == 1);
  CHECK(r->gpusMoved == 2);
  CHECK(r->rejected == 0);
  const Summary s = summarise(t, *r);
  CHECK(s.waitS.mean == Approx((10 + 0 + 49 + 113) / 4.0));
  CHECK(s.makespanS == 130);
  // Used GPU-seconds: 3*100 + 1*50 + 1*20 + 4*10 = 410 over 130 s on 4 GPUs.
  CHECK(s.gpuUtilisation == Approx(410.0 / (4 * 130)));
}

TEST_CASE("composable with zero move time: the same decisions, no reconfiguration delay") {
  const Trace t = TraceBuilder().job(0, 3, 100).job(5, 1, 50).job(6, 1, 20).job(7, 4, 10).build();
  auto r = simulate(cluster("2+2"), t, config(alloc::Composability::Composable, 0));
  REQUIRE(r.ok());
  CHECK(waitS(t, *r, 0) == 0);
  CHECK(waitS(t, *r, 2) == 49);
  CHECK(waitS(t, *r, 3) == 93);  // starts when j0 ends at 100
  CHECK(r->gpusMoved == 2);
}

TEST_CASE("moves of one pool are serialised, pools move in parallel") {
  // Two pools of 1+1 nodes... each job needs 2 GPUs on one node: one move each.
  const Trace t = TraceBuilder().job(0, 2, 100).job(0, 2, 100).build();
  SECTION("one pool of 4 nodes: the second move waits for the first") {
    auto r = simulate(cluster("1+1+1+1"), t, config(alloc::Composability::Composable, 10));
    REQUIRE(r.ok());
    CHECK(waitS(t, *r, 0) == 10);
    CHECK(waitS(t, *r, 1) == 20);
  }
  SECTION("two pools of 2 nodes: both moves at once") {
    auto r = simulate(cluster("1+1", 2), t, config(alloc::Composability::Composable, 10));
    REQUIRE(r.ok());
    CHECK(waitS(t, *r, 0) == 10);
    CHECK(waitS(t, *r, 1) == 10);
  }
}

// Preconfigured 1+3:
//   a t=0 2 GPUs 100 s -> n000001 (only node with 2), start 0.
//   b t=1 3 GPUs 10 s -> waits for a: start 100 on n000001.
//   c t=2 1 GPU 5 s: FCFS -> behind b, start 100 on n000000; backfill -> start 2.
//   d t=3 4 GPUs: no node ever holds 4 -> rejected, blocks nobody.
TEST_CASE("preconfigured: FCFS head-of-line blocking, backfill, rejection") {
  const Trace t = TraceBuilder().job(0, 2, 100).job(1, 3, 10).job(2, 1, 5).job(3, 4, 1).build();
  const auto c = cluster("1+3");
  SECTION("fcfs") {
    auto r = simulate(c, t, config(alloc::Composability::Preconfigured, 10));
    REQUIRE(r.ok());
    CHECK(waitS(t, *r, 0) == 0);
    CHECK(waitS(t, *r, 1) == 99);
    CHECK(waitS(t, *r, 2) == 98);
    CHECK(r->jobs[3].rejected());
    CHECK(r->rejected == 1);
    CHECK(r->gpusMoved == 0);
    CHECK(c.node(r->jobs[2].node).name == "n000000");
  }
  SECTION("backfill (beyond the paper)") {
    auto r =
        simulate(c, t, config(alloc::Composability::Preconfigured, 10, QueueDiscipline::Backfill));
    REQUIRE(r.ok());
    CHECK(waitS(t, *r, 1) == 99);
    CHECK(waitS(t, *r, 2) == 0);
    CHECK(r->rejected == 1);
  }
  SECTION("the same trace composable: d fits the 4-GPU pool once everything is free") {
    auto r = simulate(c, t, config(alloc::Composability::Composable, 10));
    REQUIRE(r.ok());
    // b needs 3 but a holds 2 of the pool's 4: it waits for a (ends 100), then n000001 has 3.
    CHECK(waitS(t, *r, 1) == 99);
    CHECK(c.node(r->jobs[1].node).name == "n000001");
    CHECK(r->jobs[1].gpusMoved == 0);
    // c: behind b, then n000000's GPU -> start 100.
    CHECK(waitS(t, *r, 2) == 98);
    // d: b ends at 110 (c at 105): n1 has 3 free, n0 1 -> least demand n000001, move 1 -> 120.
    CHECK(waitS(t, *r, 3) == 117);
    CHECK(c.node(r->jobs[3].node).name == "n000001");
    CHECK(r->gpusMoved == 1);
    CHECK(r->rejected == 0);
  }
}

TEST_CASE("CPU-bound jobs wait for CPU even when GPUs are free") {
  // 1 node x 4 GPUs x 100 CPUs; Job A style (80 CPUs, 1 GPU): only one at a time.
  Trace t = TraceBuilder().job(0, 1, 300).job(0, 1, 300).job(0, 1, 300).build();
  for (auto& j : t.jobs) {
    j.cpuMilli = 80'000;
  }
  auto r = simulate(cluster("4"), t, config(alloc::Composability::Composable, 10));
  REQUIRE(r.ok());
  CHECK(waitS(t, *r, 0) == 0);
  CHECK(waitS(t, *r, 1) == 300);
  CHECK(waitS(t, *r, 2) == 600);
}

TEST_CASE("the CDF of used GPUs is time-weighted and ends at 1") {
  // 2 GPUs; one 1-GPU job for 100 s, then a 2-GPU job for 100 s.
  const Trace t = TraceBuilder().job(0, 1, 100).job(100, 2, 100).build();
  auto r = simulate(cluster("2"), t, config(alloc::Composability::Composable, 0));
  REQUIRE(r.ok());
  const auto j = summaryJson(t, *r);
  const auto cdf = j["used_gpus_cdf"].get<std::vector<double>>();
  REQUIRE(cdf.size() == 3);
  CHECK(cdf[0] == Approx(0));
  CHECK(cdf[1] == Approx(0.5));
  CHECK(cdf[2] == Approx(1));
  CHECK(j["makespan_s"].get<double>() == 200);
  CHECK(j["gpu_utilisation"].get<double>() == Approx(300.0 / 400));
}

TEST_CASE("an unsorted trace or a negative duration is rejected") {
  Trace t = TraceBuilder().job(10, 1, 1).job(5, 1, 1).build();
  auto r = simulate(cluster("2"), t, defaultSimConfig());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
  Trace n = TraceBuilder().job(0, 1, 1).build();
  n.jobs[0].duration = -1;
  CHECK_FALSE(simulate(cluster("2"), n, defaultSimConfig()).ok());
}

// Node and GPU choices worked out by hand (paper Eq. 1 and Algorithm 1 as docs/alloc.md states
// them), not by calling libcore/alloc. One pool, composable, no move cost, jobs never end in
// the window, CPU ample. Layout 1+2+0+3 with 2 unattached GPUs:
//   n0: g0   n1: g1 g2   n2: -   n3: g3 g4 g5   unattached: g6 g7
// Algorithm 1 scores a candidate by minus the free candidates on its node; unattached GPUs
// form one group (alg1) or come first (unattached-first); ties by GPU id. first-fit: GPU id.
struct HandRow {
  const char* nodePolicy;
  const char* gpuPolicy;
  std::vector<std::uint32_t> jobs;  // GPUs per job, arriving at 0 s, 1 s, ...
  // Per job: node, GPUs moved to it (in choice order), GPUs it runs on (sorted).
  std::vector<std::tuple<const char*, std::vector<int>, std::vector<int>>> expected;
};

// The fixture of the table above.
kc::Result<alloc::ClusterState> handCluster() {
  LayoutSpec spec;
  spec.perNodeGpus = {1, 2, 0, 3};
  spec.unattachedPerPool = 2;
  spec.nodeCpuMilli = 64'000;
  spec.nodeMemoryMib = 1'024;
  auto c = buildCluster(spec);
  REQUIRE(c.ok());
  return c;
}

std::string nodeName(const char* shortName) {  // "n3" -> "n000003" (buildCluster's names)
  return std::string("n00000") + (shortName + 1);
}
std::vector<std::string> gpuNames(const std::vector<int>& gpus) {  // 6 -> "g0000006"
  std::vector<std::string> out;
  for (int g : gpus) {
    out.push_back(numbered("g000000", g));
  }
  return out;
}

TEST_CASE("node and GPU choices match a hand-computed table") {
  // clang-format off
  const auto row = GENERATE(values<HandRow>({
    // A 2-GPU job. eq1 / best-fit: n1 and n3 have enough, best fit is the smaller avail (n1).
    // least-demand: every node with enough ties (deficit 0), name order -> n1.
    {"eq1",          "alg1", {2}, {{"n1", {}, {1, 2}}}},
    {"best-fit",     "alg1", {2}, {{"n1", {}, {1, 2}}}},
    {"least-demand", "alg1", {2}, {{"n1", {}, {1, 2}}}},
    // none: the first feasible node by name, n0 (pool has 8 free), deficit 1. Candidates:
    // g1 g2 (n1, score -2), g3 g4 g5 (n3, -3), g6 g7 (unattached group, -2).
    {"none", "alg1",             {2}, {{"n0", {1}, {0, 1}}}},  // best -2, lowest id: g1
    {"none", "unattached-first", {2}, {{"n0", {6}, {0, 6}}}},
    {"none", "first-fit",        {2}, {{"n0", {1}, {0, 1}}}},
    // A 4-GPU job: no node has 4. eq1 and least-demand: the most free GPUs, n3 (deficit 1);
    // candidates g0 (n0, -1), g1 g2 (-2), g6 g7 (-2): alg1 takes the fragment g0.
    {"eq1",          "alg1",             {4}, {{"n3", {0}, {0, 3, 4, 5}}}},
    {"eq1",          "unattached-first", {4}, {{"n3", {6}, {3, 4, 5, 6}}}},
    {"eq1",          "first-fit",        {4}, {{"n3", {0}, {0, 3, 4, 5}}}},
    {"least-demand", "alg1",             {4}, {{"n3", {0}, {0, 3, 4, 5}}}},
    // best-fit has no preference among nodes lacking GPUs: name order, n0 (deficit 3).
    // Candidates g1 g2 (-2), g3 g4 g5 (-3), g6 g7 (-2).
    {"best-fit", "alg1",             {4}, {{"n0", {1, 2, 6}, {0, 1, 2, 6}}}},
    {"best-fit", "unattached-first", {4}, {{"n0", {6, 7, 1}, {0, 1, 6, 7}}}},
    {"best-fit", "first-fit",        {4}, {{"n0", {1, 2, 3}, {0, 1, 2, 3}}}},
    // A sequence under eq1: 1 GPU best-fits n0 (avail 1); 3 GPUs fit only n3; 2 GPUs n1;
    // then 2 GPUs with nothing attached free: every node has avail 0 (tie), n0 by name,
    // both unattached GPUs move.
    {"eq1", "alg1", {1, 3, 2, 2}, {{"n0", {}, {0}}, {"n3", {}, {3, 4, 5}}, {"n1", {}, {1, 2}},
                                   {"n0", {6, 7}, {6, 7}}}},
  }));
  // clang-format on
  CAPTURE(row.nodePolicy, row.gpuPolicy, row.jobs);
  const auto c = handCluster();
  TraceBuilder b;
  for (std::size_t i = 0; i < row.jobs.size(); ++i) {
    b.job(static_cast<double>(i), row.jobs[i], 1e6);
  }
  const Trace t = b.build();
  SimConfig cfg = config(alloc::Composability::Composable, 0);
  cfg.nodePolicy = *alloc::findNodePolicy(row.nodePolicy);
  cfg.gpuPolicy = *alloc::findGpuPolicy(row.gpuPolicy);
  std::map<std::size_t, std::pair<std::vector<std::string>, std::vector<std::string>>> placed;
  cfg.onPlace = [&](std::size_t j, alloc::NodeIndex, const std::vector<alloc::GpuIndex>& moved,
                    const std::vector<alloc::GpuIndex>& runsOn) {
    auto names = [&](const std::vector<alloc::GpuIndex>& gs, bool sorted) {
      std::vector<std::string> out;
      for (auto g : gs) {
        out.push_back(c->gpu(g).id);
      }
      if (sorted) {
        std::sort(out.begin(), out.end());
      }
      return out;
    };
    placed[j] = {names(moved, false), names(runsOn, true)};
  };
  auto r = simulate(*c, t, cfg);
  REQUIRE(r.ok());
  REQUIRE(r->rejected == 0);
  for (std::size_t i = 0; i < row.expected.size(); ++i) {
    CAPTURE(i);
    const auto& [node, moved, runsOn] = row.expected[i];
    CHECK(r->jobs[i].start == static_cast<SimMs>(i) * kMsPerSecond);
    CHECK(c->node(r->jobs[i].node).name == nodeName(node));
    CHECK(placed[i].first == gpuNames(moved));
    CHECK(placed[i].second == gpuNames(runsOn));
    CHECK(r->jobs[i].gpusMoved == moved.size());
  }
}

TEST_CASE("random GPU choice moves only candidates of the target, reproducibly by seed") {
  const auto c = handCluster();
  const Trace t = TraceBuilder().job(0, 4, 10).build();  // eq1: n3, deficit 1 (see above)
  std::vector<std::string> first;
  for (int run = 0; run < 2; ++run) {
    SimConfig cfg = config(alloc::Composability::Composable, 0);
    cfg.gpuPolicy = *alloc::findGpuPolicy("random");
    cfg.seed = 5;
    std::vector<std::string> moved;
    cfg.onPlace = [&](std::size_t, alloc::NodeIndex, const std::vector<alloc::GpuIndex>& m,
                      const std::vector<alloc::GpuIndex>&) {
      for (auto g : m) {
        moved.push_back(c->gpu(g).id);
      }
    };
    REQUIRE(simulate(*c, t, cfg).ok());
    REQUIRE(moved.size() == 1);
    // The candidates of n3: g0, g1, g2, g6, g7 (never n3's own GPUs).
    CHECK_THAT(gpuNames({0, 1, 2, 6, 7}), Catch::VectorContains(moved[0]));
    if (run == 0) {
      first = moved;
    } else {
      CHECK(moved == first);
    }
  }
}

// A differential check, not an oracle (the table above is the oracle): with several pools the
// engine skips pools lacking free GPUs before calling alloc::selectNodeAmong; its choices must
// equal a plain alloc::selectNode + chooseGpus on the same state. Jobs never end here, so the
// mirror below only has to apply each decision.
TEST_CASE("the engine's pool-skipping shortcut decides as plain selectNode and chooseGpus") {
  const auto nodePolicy = GENERATE(as<std::string>{}, "eq1", "best-fit", "least-demand", "none");
  const auto gpuPolicy =
      GENERATE(as<std::string>{}, "alg1", "unattached-first", "random", "first-fit");
  const auto mode = GENERATE(alloc::Composability::Composable, alloc::Composability::Preconfigured);
  CAPTURE(nodePolicy, gpuPolicy, static_cast<int>(mode));
  LayoutSpec spec;
  spec.pools = 3;
  spec.perNodeGpus = {1, 4, 0, 3, 2};
  spec.unattachedPerPool = 2;
  spec.nodeCpuMilli = 64'000;
  spec.nodeMemoryMib = 1024;
  const auto c = buildCluster(spec);
  REQUIRE(c.ok());
  alloc::SplitMix64 sizes(42);
  TraceBuilder b;
  for (int i = 0; i < 60; ++i) {
    b.job(i, static_cast<std::uint32_t>(sizes.below(5)), 1e9);
  }
  Trace t = b.build();
  for (auto& j : t.jobs) {
    j.cpuMilli = static_cast<std::int64_t>(1000 * (1 + sizes.below(12)));
  }
  SimConfig cfg = defaultSimConfig();
  cfg.nodePolicy = *alloc::findNodePolicy(nodePolicy);
  cfg.gpuPolicy = *alloc::findGpuPolicy(gpuPolicy);
  cfg.mode = mode;
  cfg.seed = 9;
  cfg.moveTime = 0;
  std::map<std::size_t, std::pair<std::vector<alloc::GpuIndex>, std::vector<alloc::GpuIndex>>>
      placed;
  cfg.onPlace = [&](std::size_t j, alloc::NodeIndex, const std::vector<alloc::GpuIndex>& moved,
                    const std::vector<alloc::GpuIndex>& runsOn) {
    placed[j] = {moved, runsOn};
  };
  auto r = simulate(*c, t, cfg);
  REQUIRE(r.ok());

  alloc::ClusterState mirror = *c;
  alloc::SplitMix64 rng(9);
  std::size_t compared = 0;
  for (std::size_t i = 0; i < t.jobs.size(); ++i) {
    const alloc::PodRequest pod{static_cast<std::uint64_t>(t.jobs[i].cpuMilli), 0, t.jobs[i].gpus};
    if (r->jobs[i].rejected()) {
      continue;
    }
    auto choice = alloc::selectNode(mirror, pod, cfg.nodePolicy, cfg.mode);
    if (!choice) {
      break;  // FCFS: this job and every later one wait forever (nothing ends)
    }
    REQUIRE(r->jobs[i].start >= 0);
    REQUIRE(r->jobs[i].node == choice->node);
    REQUIRE(r->jobs[i].gpusMoved == choice->deficit);
    REQUIRE(placed.count(i) == 1);
    std::vector<alloc::GpuIndex> moves;
    if (choice->deficit > 0) {  // the simulator asks the policy only when GPUs must move
      auto chosen = alloc::chooseGpus(mirror, choice->node, choice->deficit, cfg.gpuPolicy, &rng);
      REQUIRE(chosen.ok());
      moves = *chosen;
    }
    REQUIRE(placed[i].first == moves);
    for (auto g : moves) {
      REQUIRE(mirror.detachGpu(g).ok());
      REQUIRE(mirror.attachGpu(g, choice->node).ok());
    }
    std::vector<alloc::GpuIndex> mine;
    for (auto g : mirror.nodeGpus(choice->node)) {
      if (mine.size() < pod.gpus && mirror.gpu(g).free()) {
        mine.push_back(g);
      }
    }
    REQUIRE(placed[i].second == mine);
    for (auto g : mine) {
      REQUIRE(mirror.allocateGpu(g).ok());
    }
    REQUIRE(mirror.reserve(choice->node, pod.cpuMilli, 0).ok());
    ++compared;
  }
  CHECK(compared >= 10);
}

TEST_CASE("the utilisation series keeps its bucket bound across a long idle tail") {
  // One GPU job for 10 s, then a CPU-only job running for ~11.6 days: nothing runs on GPUs
  // in the tail, which must still be folded into at most kMaxBuckets buckets.
  Trace t = TraceBuilder().job(0, 1, 10).job(5, 0, 1e6).build();
  auto r = simulate(cluster("2"), t, defaultSimConfig());
  REQUIRE(r.ok());
  CHECK(r->usage.bucketGpuMs.size() <= UsageRecord::kMaxBuckets);
  CHECK(r->usage.bucketMs * static_cast<SimMs>(r->usage.bucketGpuMs.size()) >= 1'000'005'000);
  SimMs total = 0;
  for (SimMs b : r->usage.bucketGpuMs) {
    total += b;
  }
  CHECK(total == 10'000);  // 1 GPU x 10 s
}

TEST_CASE("jobs at the time limit finish, queueing past 2^62 ms is an error, not a wrap") {
  // Two jobs at the input limit (10^12 s arrival and duration) on one GPU: the second queues
  // behind the first and ends at 3 x 10^15 ms. This used to loop or overflow.
  Trace t;
  for (int i = 0; i < 2; ++i) {
    t.jobs.push_back(
        Job{.id = numbered("big", i), .arrival = kMaxTraceMs, .duration = kMaxTraceMs, .gpus = 1});
  }
  auto r = simulate(cluster("1"), t, config(alloc::Composability::Composable, 0));
  REQUIRE(r.ok());
  CHECK(r->jobs[0].end == 2 * kMaxTraceMs);
  CHECK(r->jobs[1].start == 2 * kMaxTraceMs);
  CHECK(r->jobs[1].end == 3 * kMaxTraceMs);
  CHECK(r->usage.bucketGpuMs.size() <= UsageRecord::kMaxBuckets);
  SimMs gpuMs = 0;
  for (SimMs b : r->usage.bucketGpuMs) {
    gpuMs += b;
  }
  CHECK(gpuMs == 2 * kMaxTraceMs);

  // 4,612 such jobs queued on one GPU would end at 4,613 x 10^15 ms > 2^62 ms (4.61 x 10^18):
  // the engine stops with an error naming the limit instead of overflowing int64.
  Trace q;
  for (int i = 0; i < 4'612; ++i) {
    q.jobs.push_back(Job{.id = numbered("q", i), .arrival = 0, .duration = kMaxTraceMs, .gpus = 1});
  }
  auto over = simulate(cluster("1"), q, config(alloc::Composability::Composable, 0));
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == "invalid");
  CHECK_THAT(over.error().message, Catch::Contains("'q4611' would end past the simulated-time "
                                                   "limit of 2^62 ms"));
  // 4,611 jobs end at 4.611 x 10^18 ms, just below the limit: accepted.
  q.jobs.pop_back();
  CHECK(simulate(cluster("1"), q, config(alloc::Composability::Composable, 0)).ok());

  // Inputs beyond the limit are refused before anything runs.
  Trace far;
  far.jobs.push_back(Job{.id = "far", .arrival = kMaxTraceMs + 1, .duration = 1, .gpus = 1});
  auto farR = simulate(cluster("1"), far, defaultSimConfig());
  REQUIRE_FALSE(farR.ok());
  CHECK_THAT(farR.error().message, Catch::Contains("above the limit of 1000000000000 s"));
}

TEST_CASE("a move time that pushes a start past 2^62 ms is an error") {
  // 2 GPUs on n0, a 4-GPU job must move 2 GPUs from n1; with the largest move time and a
  // start near the limit the start would overflow past 2^62 ms.
  Trace t;
  t.jobs.push_back(Job{.id = "m", .arrival = kMaxTraceMs, .duration = 1, .gpus = 4});
  SimConfig c = config(alloc::Composability::Composable, 0);
  c.moveTime = kMaxTraceMs;
  auto ok = simulate(cluster("2+2"), t, c);  // 10^15 + 2 x 10^15 ms: fine
  REQUIRE(ok.ok());
  CHECK(ok->jobs[0].start == 3 * kMaxTraceMs);
  c.moveTime = kMaxTraceMs + 1;
  CHECK_FALSE(simulate(cluster("2+2"), t, c).ok());  // refused by validate(), limit named
}

TEST_CASE("gpu_spec: a job runs only on GPUs of an accepted model, unservable ones are counted") {
  // One pool: n0 holds 2 P100, n1 holds 2 V100M16 (the node list's models). No move cost.
  const std::vector<NodeSpec> nodes{{"n0", 64'000, 1'024, 2, 0, "P100"},
                                    {"n1", 64'000, 1'024, 2, 0, "V100M16"}};
  auto c = buildClusterFromNodes(nodes, 0);
  REQUIRE(c.ok());
  Trace t = TraceBuilder()
                .job(0, 2, 10)  // j0 V100M16: n1 (its 2 V100), ends at 10
                .job(0, 1, 10)  // j1 V100M16|V100M32: none free until 10, then n1
                .job(1, 1, 10)  // j2 any model
                .job(2, 1, 10)  // j3 A100: no such GPU -> rejected (model)
                .job(3, 3, 10)  // j4 P100 x3: the pool has 2 P100 -> rejected (model)
                .job(4, 5, 10)  // j5 any x5: the pool has 4 GPUs -> rejected (size)
                .build();
  t.jobs[0].gpuSpec = t.specIndex("V100M16");
  t.jobs[1].gpuSpec = t.specIndex("V100M16|V100M32");
  t.jobs[3].gpuSpec = t.specIndex("A100");
  t.jobs[4].gpuSpec = t.specIndex("P100");

  // FCFS: j2 queues behind j1; at 10 j1 takes a V100 of n1, then j2 (any model) best-fits the
  // node with the fewest free GPUs, n1 (1 left) rather than n0 (2).
  auto r = simulate(*c, t, config(alloc::Composability::Composable, 0));
  REQUIRE(r.ok());
  CHECK(r->rejected == 3);
  CHECK(r->rejectedGpuModel == 2);
  const std::vector<std::tuple<SimMs, std::string>> fcfs{{0, "n1"}, {10'000, "n1"}, {10'000, "n1"},
                                                         {-1, ""},  {-1, ""},       {-1, ""}};
  for (std::size_t i = 0; i < fcfs.size(); ++i) {
    CAPTURE(i);
    CHECK(r->jobs[i].start == std::get<0>(fcfs[i]));
    if (!r->jobs[i].rejected()) {
      CHECK(c->node(r->jobs[i].node).name == std::get<1>(fcfs[i]));
    }
  }
  const auto summary = summaryJson(t, *r);
  CHECK(summary["rejected_gpu_model"].get<int>() == 2);

  // Backfill: j1's failure (V100 only) says nothing about j2 (any model), which starts at 1
  // on n0, the only node with free GPUs then.
  auto b = simulate(*c, t, config(alloc::Composability::Composable, 0, QueueDiscipline::Backfill));
  REQUIRE(b.ok());
  CHECK(b->jobs[2].start == 1'000);
  CHECK(c->node(b->jobs[2].node).name == "n0");
  CHECK(b->jobs[1].start == 10'000);

  // A move brings only accepted GPUs: a 3-GPU V100 job on a pool with 2 P100 and 2 V100 is
  // unservable, a 2-GPU P100 job goes to n0 without moving anything.
  Trace m = TraceBuilder().job(0, 2, 10).build();
  m.jobs[0].gpuSpec = m.specIndex("P100");
  auto mr = simulate(*c, m, config(alloc::Composability::Composable, 5));
  REQUIRE(mr.ok());
  CHECK(c->node(mr->jobs[0].node).name == "n0");
  CHECK(mr->gpusMoved == 0);

  Trace bad = TraceBuilder().job(0, 1, 1).build();
  bad.jobs[0].gpuSpec = bad.specIndex("V100|");
  auto e = simulate(*c, bad, defaultSimConfig());
  REQUIRE_FALSE(e.ok());
  CHECK_THAT(e.error().message, Catch::Contains("gpu_spec: GPU model list 'V100|'"));
  Trace dangling = TraceBuilder().job(0, 1, 1).build();
  dangling.jobs[0].gpuSpec = 7;  // no such entry (the table holds only 0, "any GPU")
  auto e7 = simulate(*c, dangling, defaultSimConfig());
  REQUIRE_FALSE(e7.ok());
  CHECK_THAT(e7.error().message, Catch::Contains("refers to gpu_spec 7 of 1"));
}

TEST_CASE("gpu_spec with moves: only GPUs of an accepted model are moved to the node") {
  // Two pools of the layout shape, models given per node: n0 2 x T4 + n1 2 x A10, one pool;
  // a 3-GPU job accepting A10|T4 needs 1 move, a 3-GPU A10 job cannot run.
  const std::vector<NodeSpec> nodes{{"n0", 64'000, 1'024, 2, 0, "T4"},
                                    {"n1", 64'000, 1'024, 2, 0, "A10"},
                                    {"n2", 64'000, 1'024, 1, 0, "A10"}};
  auto c = buildClusterFromNodes(nodes, 0);
  REQUIRE(c.ok());
  // j0 A10 x3: n1 has 2 A10 (deficit 1), n2 has 1 (deficit 2), n0 none: least-demand -> n1,
  // moving n2's A10 (g4), never a T4. 7 s per move.
  Trace t = TraceBuilder().job(0, 3, 10).build();
  t.jobs[0].gpuSpec = t.specIndex("A10");
  std::vector<std::uint32_t> movedGpus;
  SimConfig cfg = config(alloc::Composability::Composable, 7);
  cfg.onPlace = [&](std::uint32_t, alloc::NodeIndex, const std::vector<alloc::GpuIndex>& moved,
                    const std::vector<alloc::GpuIndex>&) {
    movedGpus.assign(moved.begin(), moved.end());
  };
  auto r = simulate(*c, t, cfg);
  REQUIRE(r.ok());
  CHECK(c->node(r->jobs[0].node).name == "n1");
  CHECK(r->jobs[0].start == 7'000);
  REQUIRE(movedGpus.size() == 1);
  CHECK(c->gpu(movedGpus[0]).model == "A10");
  CHECK(c->gpu(movedGpus[0]).node == c->findNode("n2").value());
}
