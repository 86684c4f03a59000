// GPU moves in parallel across chassis (issue 29): the simulator charges the schedule
// reconfig-mgr follows (libcore/alloc/move_schedule.hpp). Hand-computed waits on the testbed's
// shape (one pool, two chassis x 4 GPUs dealt round-robin over a 4+4 layout), the chassis ids,
// the GPU choice that spreads sources over chassis, the backfill reservation charged by the
// same schedule, and the flags refused on bad values.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "tools/kubecomp-sim/cli.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;
namespace fs = std::filesystem;

namespace {

constexpr SimMs kMove = 10'000;  // 10 s per move in these tables
constexpr alloc::MoveConcurrency kParallel{1, 0};

// One pool of the layout, GPUs in chassis of `perChassis` (0: ids g<index>, no chassis).
alloc::ClusterState testbed(const std::string& layout, std::uint32_t perChassis,
                            std::uint32_t pools = 1) {
  LayoutSpec spec;
  spec.pools = pools;
  spec.perNodeGpus = *parseLayout(layout);
  spec.nodeCpuMilli = 192'000;
  spec.nodeMemoryMib = 1024;
  spec.gpusPerChassis = perChassis;
  auto c = buildCluster(spec);
  REQUIRE(c.ok());
  return std::move(*c);
}

Trace traceOf(std::vector<std::pair<double, std::uint32_t>> jobs, double durationS = 100) {
  Trace t;
  for (auto [arrivalS, gpus] : jobs) {
    Job j;
    j.id = "j";
    j.id += std::to_string(t.jobs.size());
    j.arrival = static_cast<SimMs>(arrivalS * kMsPerSecond);
    j.duration = static_cast<SimMs>(durationS * kMsPerSecond);
    j.gpus = gpus;
    j.cpuMilli = 1000;
    t.jobs.push_back(j);
  }
  return t;
}

SimConfig movesConfig(alloc::MoveConcurrency moves, const char* gpuPolicy = "unattached-first") {
  SimConfig c = defaultSimConfig();
  c.moveTime = kMove;
  c.moves = moves;
  c.gpuPolicy = *alloc::findGpuPolicy(gpuPolicy);
  return c;
}

std::vector<double> waitsS(const Trace& t, const SimResult& r) {
  std::vector<double> out;
  for (std::size_t i = 0; i < t.jobs.size(); ++i) {
    out.push_back(static_cast<double>(r.jobs[i].start - t.jobs[i].arrival) / kMsPerSecond);
  }
  return out;
}

}  // namespace

TEST_CASE("chassis ids: each pool's GPUs dealt round-robin over its chassis", "[sim][moves]") {
  const auto c = testbed("4+4", 4, 2);
  std::vector<std::string> ids;
  for (alloc::GpuIndex g = 0; g < c.gpuCount(); ++g) {
    ids.push_back(c.gpu(g).id);
  }
  // Pool 0 (falcon-0, falcon-1): each node holds 2 GPUs of each chassis, as the demo wires it.
  CHECK(ids ==
        std::vector<std::string>{
            "falcon-0.g0000000", "falcon-1.g0000001", "falcon-0.g0000002", "falcon-1.g0000003",
            "falcon-0.g0000004", "falcon-1.g0000005", "falcon-0.g0000006", "falcon-1.g0000007",
            "falcon-2.g0000008", "falcon-3.g0000009", "falcon-2.g0000010", "falcon-3.g0000011",
            "falcon-2.g0000012", "falcon-3.g0000013", "falcon-2.g0000014", "falcon-3.g0000015"});
  // A pool of 6 GPUs in chassis of 4 needs two chassis; 0 keeps the old ids.
  CHECK(testbed("3+3", 4).gpu(1).id == "falcon-1.g0000001");
  CHECK(testbed("4+4", 0).gpu(5).id == "g0000005");
  // The Alibaba node list: the same rule per pool of consecutive nodes.
  std::vector<NodeSpec> nodes(3);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    nodes[i].name = "node" + std::to_string(i);
    nodes[i].cpuMilli = 1000;
    nodes[i].gpus = 2;
  }
  auto a = buildClusterFromNodes(nodes, 2, 2);
  REQUIRE(a.ok());
  std::vector<std::string> alibaba;
  for (alloc::GpuIndex g = 0; g < a->gpuCount(); ++g) {
    alibaba.push_back(a->gpu(g).id);
  }
  CHECK(alibaba == std::vector<std::string>{"falcon-0.g0000000", "falcon-1.g0000001",
                                            "falcon-0.g0000002", "falcon-1.g0000003",
                                            "falcon-2.g0000004", "falcon-2.g0000005"});
}

TEST_CASE("an 8-GPU job gathering 4 GPUs over 2 chassis: 2 moves in parallel, 4 serially",
          "[sim][moves]") {
  // 4+4, two chassis: the 4 GPUs moved off the other node are 2 on each chassis.
  const auto c = testbed("4+4", 4);
  const Trace t = traceOf({{0, 8}});
  struct Row {
    alloc::MoveConcurrency moves;
    double wait;
  };
  const auto row = GENERATE(values<Row>({
      {alloc::kSerialMoves, 40},  // the paper: 4 x 10 s
      {kParallel, 20},            // one per chassis: 2 rounds of 2
      {{2, 0}, 10},               // two per chassis: all 4 at once
      {{1, 1}, 40},               // a pool limit of 1 is serial whatever the chassis
      {{2, 3}, 20},               // 3 at once, then the fourth
  }));
  CAPTURE(row.moves.perChassis, row.moves.perPool);
  auto r = simulate(c, t, movesConfig(row.moves));
  REQUIRE(r.ok());
  CHECK(waitsS(t, *r) == std::vector<double>{row.wait});
  CHECK(r->gpusMoved == 4);
  // Without a chassis part every GPU is a chassis of its own: only the pool limit binds.
  auto own = simulate(testbed("4+4", 0), t, movesConfig(row.moves));
  REQUIRE(own.ok());
  const std::uint32_t rounds =
      row.moves.perPool == 0 ? 1 : (4 + row.moves.perPool - 1) / row.moves.perPool;
  const double ownWait = 10.0 * rounds;
  CHECK(waitsS(t, *own) == std::vector<double>{ownWait});
}

TEST_CASE("moves on different chassis overlap, moves on one chassis queue", "[sim][moves]") {
  // 2+2+4 in chassis of 4 (two chassis, dealt round-robin): n0 = g0 (falcon-0), g1 (falcon-1);
  // n1 = g2, g3; n2 = g4..g7. j0 (6 GPUs): eq1 takes n2 (deficit 2); unattached-first takes
  // the fragments of n0 (2 free, before n1 by name): g0 and g1, one per chassis.
  const Trace t = traceOf({{0, 6}});
  auto serial = simulate(testbed("2+2+4", 4), t, movesConfig(alloc::kSerialMoves));
  auto parallel = simulate(testbed("2+2+4", 4), t, movesConfig(kParallel));
  REQUIRE(serial.ok());
  REQUIRE(parallel.ok());
  CHECK(waitsS(t, *serial) == std::vector<double>{20});
  CHECK(waitsS(t, *parallel) == std::vector<double>{10});
  // Two jobs at one instant, one move each (1+1+2+2 in chassis of 3: two chassis): n0 = g0
  // (falcon-0), n1 = g1 (falcon-1), n2 = g2, g3, n3 = g4, g5. j0 (3 GPUs): n2 (deficit 1, by
  // name before n3) gets the fragment g0 (falcon-0); j1 (3 GPUs): n3 gets g1 (falcon-1).
  const Trace two = traceOf({{0, 3}, {0, 3}});
  auto s2 = simulate(testbed("1+1+2+2", 3), two, movesConfig(alloc::kSerialMoves));
  auto p2 = simulate(testbed("1+1+2+2", 3), two, movesConfig(kParallel));
  REQUIRE(s2.ok());
  REQUIRE(p2.ok());
  CHECK(waitsS(two, *s2) == std::vector<double>{10, 20});  // j1's move queues behind j0's
  CHECK(waitsS(two, *p2) == std::vector<double>{10, 10});  // other chassis: at once
  // The same two moves from one chassis (chassis of 6: one chassis) queue in parallel too.
  auto one = simulate(testbed("1+1+2+2", 6), two, movesConfig(kParallel));
  REQUIRE(one.ok());
  CHECK(waitsS(two, *one) == std::vector<double>{10, 20});
}

TEST_CASE("chassis-spread takes equally ranked sources from different chassis", "[sim][moves]") {
  // n0 holds 4 free GPUs, 2 per chassis (4+0 in chassis of 2): g0 falcon-0, g1 falcon-1, g2
  // falcon-0, g3 falcon-1. For 2 GPUs to n1, unattached-first takes the lowest ids (both
  // falcon-0); chassis-spread one of each chassis.
  const auto d = testbed("4+0", 2);
  const alloc::NodeIndex n1 = *d.findNode("n000001");
  auto ids = [&](const std::vector<alloc::GpuIndex>& gs) {
    std::vector<std::string> out;
    for (auto g : gs) {
      out.push_back(d.gpu(g).id);
    }
    return out;
  };
  auto plain = alloc::chooseGpus(d, n1, 2, *alloc::findGpuPolicy("unattached-first"));
  auto spread = alloc::chooseGpus(d, n1, 2, *alloc::findGpuPolicy("chassis-spread"));
  REQUIRE(plain.ok());
  REQUIRE(spread.ok());
  CHECK(ids(*plain) == std::vector<std::string>{"falcon-0.g0000000", "falcon-0.g0000002"});
  CHECK(ids(*spread) == std::vector<std::string>{"falcon-0.g0000000", "falcon-1.g0000001"});
  // In the simulator (5+0 in chassis of 3: g0 g2 g4 on falcon-0, g1 g3 on falcon-1): j0 (1 GPU,
  // 150 of n0's 192 CPUs) runs on n0's g0; j1 (2 GPUs, 150 CPUs) fits only n1's CPU and needs 2
  // GPUs from n0: unattached-first g2, g4 (falcon-0 twice), chassis-spread g2, g1.
  Trace t = traceOf({{0, 1}, {1, 2}}, 1000);
  t.jobs[0].cpuMilli = 150'000;
  t.jobs[1].cpuMilli = 150'000;
  struct Row {
    const char* policy;
    alloc::MoveConcurrency moves;
    double wait;
  };
  const auto row = GENERATE(values<Row>({
      {"unattached-first", alloc::kSerialMoves, 20},
      {"chassis-spread", alloc::kSerialMoves, 20},
      {"unattached-first", kParallel, 20},  // both moves on falcon-0: one after the other
      {"chassis-spread", kParallel, 10},    // one per chassis: at once
  }));
  CAPTURE(row.policy, row.moves.perPool);
  auto r = simulate(testbed("5+0", 3), t, movesConfig(row.moves, row.policy));
  REQUIRE(r.ok());
  CHECK(waitsS(t, *r) == std::vector<double>{0, row.wait});
  CHECK(r->gpusMoved == 2);
}

TEST_CASE("backfill reservations charge the same schedule", "[sim][moves]") {
  const auto c = testbed("4+4", 4);
  alloc::PlacementRules rules{alloc::Composability::Composable, *alloc::findNodePolicy("eq1"),
                              *alloc::findGpuPolicy("unattached-first"), kMove,
                              alloc::kSerialMoves};
  alloc::FabricClock fabric;
  fabric.busyUntil.assign(c.poolCount(), 0);
  const alloc::PodRequest eight{1000, 0, 8};
  auto serial = alloc::reserveHead(c, {}, fabric, eight, {}, rules, 0);
  REQUIRE(serial.ok());
  CHECK(serial->start == 4 * kMove);
  rules.moves = kParallel;
  auto parallel = alloc::reserveHead(c, {}, fabric, eight, {}, rules, 0);
  REQUIRE(parallel.ok());
  CHECK(parallel->start == 2 * kMove);
  // A move booked on falcon-0 until 15 s: the falcon-0 moves follow it, falcon-1's do not wait.
  fabric.booked.assign(c.poolCount(), {});
  fabric.booked[0].push_back(alloc::MoveInFlight{"falcon-0", 15'000});
  fabric.busyUntil[0] = 15'000;
  auto busy = alloc::reserveHead(c, {}, fabric, eight, {}, rules, 0);
  REQUIRE(busy.ok());
  CHECK(busy->start == 15'000 + 2 * kMove);
  // Serial rules see only busy-until: 15 s + 4 moves.
  rules.moves = alloc::kSerialMoves;
  auto serialBusy = alloc::reserveHead(c, {}, fabric, eight, {}, rules, 0);
  REQUIRE(serialBusy.ok());
  CHECK(serialBusy->start == 15'000 + 4 * kMove);
  // A booked list that is not one per pool is refused.
  fabric.booked.resize(2);
  CHECK(alloc::reserveHead(c, {}, fabric, eight, {}, rules, 0).error().code == kc::errc::kInvalid);
}

TEST_CASE("easy-backfill with parallel moves: the head starts by its reservation", "[sim][moves]") {
  // j0 (t=0, 4 GPUs, 100 s) on n0; j1 (t=1, 8 GPUs) waits for j0 and then gathers 4 GPUs over
  // two chassis: parallel 2 moves (20 s) after 100 -> 120; serial 140. j2 (t=2, 1 GPU, 100 s)
  // behind it would delay it (it would hold a GPU of n1 past 120), so it is not backfilled.
  const auto c = testbed("4+4", 4);
  const Trace t = traceOf({{0, 4}, {1, 8}, {2, 1}});
  for (auto [moves, start] :
       {std::pair{alloc::kSerialMoves, SimMs{140'000}}, std::pair{kParallel, SimMs{120'000}}}) {
    SimConfig cfg = movesConfig(moves);
    cfg.queue = QueueDiscipline::EasyBackfill;
    SimMs reserved = -1;
    cfg.onReserve = [&](std::size_t job, SimMs at, SimMs) {
      if (job == 1) {
        reserved = at;
      }
    };
    auto r = simulate(c, t, cfg);
    REQUIRE(r.ok());
    CHECK(r->jobs[1].start == start);
    CHECK(reserved == start);
  }
}

TEST_CASE("simulate refuses zero moves per chassis", "[sim][moves]") {
  auto r = simulate(testbed("4+4", 4), traceOf({{0, 1}}), movesConfig({0, 0}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kc::errc::kInvalid);
}

namespace {

int runSim(std::vector<std::string> args) {
  args.insert(args.begin(), "kubecomp-sim");
  std::vector<char*> argv;
  for (auto& a : args) {
    argv.push_back(a.data());
  }
  return runCli(static_cast<int>(argv.size()), argv.data());
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("kubecomp-sim CLI: --moves-per-chassis, --moves-per-pool, --gpus-per-chassis",
          "[sim][moves]") {
  std::string tmpl = (fs::temp_directory_path() / "kc-sim-moves-XXXXXX").string();
  REQUIRE(mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  {
    std::ofstream f(dir / "jobs.csv");
    f << "id,arrival_s,duration_s,gpus,cpu\na,0,100,8,1\n";
  }
  const fs::path out = dir / "sum.json";
  auto sim = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"--trace-csv",   (dir / "jobs.csv").string(),
                                  "--layout",      "4+4",
                                  "--move-time-s", "10",
                                  "--quiet",       "--summary-out",
                                  out.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return runSim(args);
  };
  auto wait = [&] { return nlohmann::json::parse(slurp(out))["wait_s"]["mean"].get<double>(); };
  REQUIRE(sim({}) == 0);
  CHECK(wait() == 40);
  const auto config = nlohmann::json::parse(slurp(out))["config"];
  CHECK_FALSE(config.contains("moves_per_pool"));  // defaults leave the summary as it was
  CHECK_FALSE(config.contains("gpus_per_chassis"));
  REQUIRE(sim({"--gpus-per-chassis", "4", "--moves-per-chassis", "1", "--moves-per-pool", "0"}) ==
          0);
  CHECK(wait() == 20);
  const auto parallel = nlohmann::json::parse(slurp(out))["config"];
  CHECK(parallel["moves_per_pool"] == 0);
  CHECK(parallel["moves_per_chassis"] == 1);
  CHECK(parallel["gpus_per_chassis"] == 4);
  REQUIRE(sim({"--gpus-per-chassis", "4"}) == 0);  // chassis alone: still the serial fabric
  CHECK(wait() == 40);
  REQUIRE(sim({"--gpus-per-chassis", "4", "--moves-per-chassis", "2", "--moves-per-pool", "0"}) ==
          0);
  CHECK(wait() == 10);
  for (const std::vector<std::string>& bad : {
           std::vector<std::string>{"--moves-per-chassis", "0"},
           std::vector<std::string>{"--moves-per-chassis", "1025"},
           std::vector<std::string>{"--moves-per-chassis", "-1"},
           std::vector<std::string>{"--moves-per-pool", "-1"},
           std::vector<std::string>{"--moves-per-pool", "1000001"},
           std::vector<std::string>{"--gpus-per-chassis", "-1"},
           std::vector<std::string>{"--gpus-per-chassis", "1025"},
       }) {
    CAPTURE(bad);
    fs::remove(out);
    CHECK(sim(bad) == 1);
    CHECK_FALSE(fs::exists(out));
  }
  fs::remove(out);
  CHECK(sim({"--moves-per-pool", "two"}) == 2);  // not a number: a usage error
  CHECK_FALSE(fs::exists(out));
  fs::remove_all(dir);
}
