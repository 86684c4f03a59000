// The stock-dra baseline in the simulator, end to end: hand-computed runs against the pool
// policy, the idle timeout's exact instant, the "paid while a pod waited" count, the engine's
// checks and the --policy preset on the command line.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/sim/sim_jobs.hpp"
#include "tools/kubecomp-sim/cli.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;
using kc::sim::test::job;

namespace {

constexpr double kMoveS = 10;
constexpr double kReturnS = 4;
constexpr double kTimeoutS = 100;

// One pool of nodes of 100 CPUs and 1 GiB, GPUs attached as `layout` says.
alloc::ClusterState cluster(const std::string& layout, std::uint32_t unattached = 0) {
  LayoutSpec spec;
  spec.perNodeGpus = *parseLayout(layout);
  spec.unattachedPerPool = unattached;
  spec.nodeCpuMilli = 100'000;
  spec.nodeMemoryMib = 1024;
  auto c = buildCluster(spec);
  REQUIRE(c.ok());
  return std::move(*c);
}

// The stock-dra preset, resolved through the registry as kubecomp-sim --policy does.
SimConfig stockDra() {
  const alloc::PolicyPreset p = *alloc::findPolicyPreset("stock-dra");
  SimConfig c = defaultSimConfig();
  c.nodePolicy = *alloc::findNodeOrBaselinePolicy(p.nodePolicy);
  c.gpuPolicy = *alloc::findGpuOrBaselinePolicy(p.gpuPolicy);
  c.queue = alloc::findQueuePolicy(p.queuePolicy)->discipline;
  c.recompose = alloc::findRecomposePolicy(p.recomposePolicy)->kind;
  c.offer = alloc::findOfferPolicy(p.offerPolicy)->offer;
  c.idleReturn = alloc::findReturnPolicy(p.returnPolicy)->kind;
  c.moveTime = static_cast<SimMs>(kMoveS * kMsPerSecond);
  c.idleTimeout = static_cast<SimMs>(kTimeoutS * kMsPerSecond);
  c.returnTime = static_cast<SimMs>(kReturnS * kMsPerSecond);
  return c;
}

// The pool policy on the DRA path: Eq. 1, unattached-first, idle GPUs kept; the same queue.
SimConfig poolPolicy() {
  SimConfig c = defaultSimConfig();
  c.queue = QueueDiscipline::Backfill;
  c.moveTime = static_cast<SimMs>(kMoveS * kMsPerSecond);
  return c;
}

Trace traceOf(std::vector<Job> jobs) {
  Trace t;
  t.jobs = std::move(jobs);
  return t;
}

std::vector<double> waits(const Trace& t, const SimResult& r) {
  std::vector<double> out;
  for (std::size_t i = 0; i < t.jobs.size(); ++i) {
    out.push_back(static_cast<double>(r.jobs[i].start - t.jobs[i].arrival) / kMsPerSecond);
  }
  return out;
}

std::vector<std::string> nodes(const alloc::ClusterState& c, const SimResult& r) {
  std::vector<std::string> out;
  for (const JobOutcome& o : r.jobs) {
    out.push_back(c.node(o.node).name);
  }
  return out;
}

}  // namespace

// 2+2, moves 10 s, returns 4 s, idle timeout 100 s.
//   j0 t=0 1 GPU 1000 s, j1 t=1 1 GPU 1000 s, j2 t=2 2 GPUs 100 s.
// Pool policy (Eq. 1): j0 and j1 best-fit onto n000000, j2 finds n000001's two GPUs: no wait,
// no move.
// stock-dra: least-allocated spreads (j0: both 83, n000000 by name; j1: n000000 (99, 100, 0)
// = 66 vs n000001 (100, 100, 50) = 83, so n000001). j2 is offered 1 GPU per node and waits for
// the timeout: at t=100 the two idle GPUs (g1 on n000000, g3 on n000001; the busy g0 and g2
// stay) are detached, landing at 104 and 108; at 104 j2 goes to n000000 (66 each, name) and
// its 2 attaches queue behind the returns: start 108 + 2 x 10 = 128, wait 126.
TEST_CASE("stock-dra vs the pool policy on a trace computed by hand", "[sim][stock-dra]") {
  const Trace t = traceOf({job(0, 0, 1, 1000), job(1, 1, 1, 1000), job(2, 2, 2, 100)});
  const auto c = cluster("2+2");
  auto pool = simulate(c, t, poolPolicy());
  auto stock = simulate(c, t, stockDra());
  REQUIRE(pool.ok());
  REQUIRE(stock.ok());
  CHECK(waits(t, *pool) == std::vector<double>{0, 0, 0});
  CHECK(nodes(c, *pool) == std::vector<std::string>{"n000000", "n000000", "n000001"});
  CHECK(pool->gpusMoved == 0);
  CHECK(pool->idleReturns == 0);

  CHECK(waits(t, *stock) == std::vector<double>{0, 0, 126});
  CHECK(nodes(c, *stock) == std::vector<std::string>{"n000000", "n000001", "n000000"});
  CHECK(stock->idleReturns == 2);
  CHECK(stock->gpusMoved == 4);              // 2 returns + 2 attaches
  CHECK(stock->gpusMovedWhileWaiting == 4);  // j2 waited through all of them
  CHECK(stock->jobsWithMoves == 1);
  // Nothing is returned after the last arrival once nothing waits (j0, j1 end at 1000, 1001).
}

// 2+2, one 3-GPU job: under stock-dra no node is offered 3 GPUs until the timeout returns all
// four idle ones at t=100 (landing 104, 108, 112, 116); it then attaches 3 of them after the
// fourth return: start 116 + 30 = 146. The pool policy moves one GPU at once: start 10.
TEST_CASE("stock-dra: a pod larger than any node waits for the idle timeout", "[sim][stock-dra]") {
  const Trace t = traceOf({job(0, 0, 3, 50)});
  const auto c = cluster("2+2");
  auto pool = simulate(c, t, poolPolicy());
  auto stock = simulate(c, t, stockDra());
  REQUIRE(pool.ok());
  REQUIRE(stock.ok());
  CHECK(waits(t, *pool) == std::vector<double>{10});
  CHECK(pool->gpusMoved == 1);
  CHECK(waits(t, *stock) == std::vector<double>{146});
  CHECK(stock->idleReturns == 4);
  CHECK(stock->gpusMoved == 7);
  CHECK(stock->gpusMovedWhileWaiting == 7);
}

// One node with one GPU, moves 10 s, returns 4 s, timeout 100 s. j0 t=0 uses the GPU until
// 10, so it is idle from 10 and due back at 110; j1 (1 GPU, 10 s) arrives around then, j2 (1
// GPU) at 300.
//   j1 at 109: uses it where it is (no move); it is idle again from 119, returned at 219 (lands
//              223, nobody waiting), attached again for j2: wait 10. Moves 2, 1 paid waiting.
//   j1 at 110: the same instant as the timeout: the scheduling pass runs first and keeps it.
//   j1 at 111: it was returned at 110 (lands 114); j1 attaches it back: start 124, wait 13,
//              and the return was paid while j1 waited. Idle from 134, returned at 234 (lands
//              238, nobody waiting); j2 attaches it: wait 10. Moves 4, 3 paid waiting.
TEST_CASE("stock-dra: the idle timeout returns the GPU exactly at T", "[sim][stock-dra]") {
  auto [arrival, wait1, moves, waiting, returns] =
      GENERATE(table<double, double, std::uint64_t, std::uint64_t, std::uint64_t>({
          {109, 0, 2, 1, 1},
          {110, 0, 2, 1, 1},
          {111, 13, 4, 3, 2},
      }));
  CAPTURE(arrival);
  const Trace t = traceOf({job(0, 0, 1, 10), job(1, arrival, 1, 10), job(2, 300, 1, 10)});
  auto r = simulate(cluster("1"), t, stockDra());
  REQUIRE(r.ok());
  CHECK(waits(t, *r) == std::vector<double>{0, wait1, 10});
  CHECK(r->gpusMoved == moves);
  CHECK(r->gpusMovedWhileWaiting == waiting);
  CHECK(r->idleReturns == returns);
}

// 1+2 and two unattached GPUs (g0 on n000000, g1 g2 on n000001, g3 g4 in the pool), one
// 2-GPU job. Least-allocated scores both nodes (100, 100, 0) = 66 (neither holds 2 free GPUs of
// its own): n000000 by name. It is offered its own g0 and the unattached g3, g4, not n000001's
// idle g1, g2. First fit: g0 where it is, then g3 attached: one move. Eq. 1 takes n000001 as is.
TEST_CASE("stock-dra: the node's own GPUs first, then the first pool GPU", "[sim][stock-dra]") {
  const Trace t = traceOf({job(0, 0, 2, 10)});
  const auto c = cluster("1+2", 2);
  auto ids = [&](const std::vector<alloc::GpuIndex>& gpus) {
    std::vector<std::string> out;
    for (alloc::GpuIndex g : gpus) {
      out.push_back(c.gpu(g).id);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<std::string> moved;
  std::vector<std::string> used;
  SimConfig cfg = stockDra();
  cfg.onPlace = [&](std::size_t, alloc::NodeIndex, const std::vector<alloc::GpuIndex>& m,
                    const std::vector<alloc::GpuIndex>& mine) {
    moved = ids(m);
    used = ids(mine);
  };
  auto stock = simulate(c, t, cfg);
  REQUIRE(stock.ok());
  CHECK(nodes(c, *stock) == std::vector<std::string>{"n000000"});
  CHECK(moved == std::vector<std::string>{"g0000003"});
  CHECK(used == std::vector<std::string>{"g0000000", "g0000003"});
  CHECK(waits(t, *stock) == std::vector<double>{kMoveS});
  auto pool = simulate(c, t, poolPolicy());
  REQUIRE(pool.ok());
  CHECK(nodes(c, *pool) == std::vector<std::string>{"n000001"});
  CHECK(pool->gpusMoved == 0);
}

TEST_CASE("stock-dra: the preconfigured mode moves nothing, so nothing is returned",
          "[sim][stock-dra]") {
  SimConfig cfg = stockDra();
  cfg.mode = alloc::Composability::Preconfigured;
  const Trace t = traceOf({job(0, 0, 1, 10), job(1, 500, 2, 10)});
  auto r = simulate(cluster("2+2"), t, cfg);
  REQUIRE(r.ok());
  CHECK(waits(t, *r) == std::vector<double>{0, 0});
  CHECK(r->gpusMoved == 0);
  CHECK(r->idleReturns == 0);
}

TEST_CASE("stock-dra: the engine refuses settings it cannot honour", "[sim][stock-dra]") {
  const Trace t = traceOf({job(0, 0, 1, 10)});
  SimConfig cfg = stockDra();
  SECTION("no idle return: a GPU idle elsewhere would never be offered") {
    cfg.idleReturn = alloc::ReturnKind::Keep;
  }
  SECTION("a reservation queue") {
    cfg.queue = QueueDiscipline::EasyBackfill;
  }
  SECTION("idle recomposition") {
    cfg.recompose = alloc::RecomposeKind::IdleGather;
  }
  SECTION("a negative timeout") {
    cfg.idleTimeout = -1;
  }
  SECTION("a negative return time") {
    cfg.returnTime = -1;
  }
  auto r = simulate(cluster("2+2"), t, cfg);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "invalid");
}

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "kc-stock-dra-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const char* name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

int runSim(std::vector<std::string> args) {
  args.insert(args.begin(), "kubecomp-sim");
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  return kc::sim::runCli(static_cast<int>(argv.size()), argv.data());
}

nlohmann::json summary(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

}  // namespace

TEST_CASE("kubecomp-sim --policy stock-dra: the preset, overridden part by part",
          "[sim][stock-dra]") {
  TempDir dir;
  const std::string out = dir.file("sum.json");
  const std::vector<std::string> base{"--workload", "w4",  "--jobs",        "25",
                                      "--layout",   "4+4", "--summary-out", out};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return runSim(args);
  };
  REQUIRE(with({"--policy", "stock-dra"}) == 0);
  auto j = summary(out);
  CHECK(j["config"]["policy"] == "stock-dra");
  CHECK(j["config"]["node_policy"] == "least-allocated");
  CHECK(j["config"]["gpu_policy"] == "first-fit-local");
  CHECK(j["config"]["queue"] == "backfill");
  CHECK(j["config"]["offer"] == "local-or-unattached");
  CHECK(j["config"]["idle_return"] == "idle-timeout");
  CHECK(j["config"]["idle_timeout_s"].get<double>() == 600);
  CHECK(j["config"]["return_time_s"].get<double>() == 6.5);
  CHECK(j["idle_returns"].get<std::uint64_t>() <= j["gpus_moved"].get<std::uint64_t>());

  REQUIRE(with({"--policy", "stock-dra", "--queue", "fcfs", "--idle-timeout-s", "60",
                "--node-policy", "eq1"}) == 0);
  j = summary(out);
  CHECK(j["config"]["queue"] == "fcfs");
  CHECK(j["config"]["node_policy"] == "eq1");
  CHECK(j["config"]["idle_timeout_s"].get<double>() == 60);
  CHECK(j["config"]["offer"] == "local-or-unattached");

  // Our defaults write none of the DRA-path keys: earlier summaries stay as they were.
  REQUIRE(with({}) == 0);
  j = summary(out);
  CHECK_FALSE(j["config"].contains("offer"));
  CHECK_FALSE(j["config"].contains("policy"));
  CHECK(j["idle_returns"].get<std::uint64_t>() == 0);

  CHECK(with({"--policy", "stock-dra", "--queue", "easy-backfill"}) == 1);
  CHECK(with({"--policy", "kubecomp"}) == 1);
  CHECK(with({"--offer", "local-or-unattached"}) == 1);  // without the idle-timeout return
  CHECK(with({"--idle-timeout-s", "-1"}) == 1);
  CHECK(with({"--return-time-s", "1e7"}) == 1);
}
