// Gang planning (libcore/alloc/gang.hpp, issue 27) against a brute-force oracle written from the
// rules alone: a gang fits iff some assignment of its members to nodes keeps every node within
// its CPU and every pool within its free GPUs (any free GPU of a pool can be moved to any node
// of the pool). The oracle enumerates every assignment; it shares no code with the planner.

#include "libcore/alloc/gang.hpp"

#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

namespace kc::alloc::test {
namespace {

// The oracle's view of a small cluster.
struct OracleNode {
  int pool = -1;             // -1: no pool
  std::int64_t cpu = 0;      // free CPU (millicores)
  std::int64_t gpuFree = 0;  // free GPUs attached
};
struct OracleCluster {
  std::vector<OracleNode> nodes;
  std::vector<std::int64_t> poolFree;     // free GPUs per pool, attached or not
  std::vector<std::int64_t> poolHealthy;  // healthy GPUs per pool (in use or not)
};
struct OracleMember {
  std::int64_t cpu = 0;
  std::int64_t gpus = 0;
};

// Some assignment of members to nodes fits.
bool oracleFits(const OracleCluster& c, const std::vector<OracleMember>& members) {
  const std::size_t n = c.nodes.size();
  std::vector<std::size_t> at(members.size(), 0);
  for (;;) {
    std::vector<std::int64_t> cpu(n, 0);
    std::vector<std::int64_t> pool(c.poolFree.size(), 0);
    bool ok = true;
    for (std::size_t m = 0; m < members.size() && ok; ++m) {
      const OracleNode& node = c.nodes[at[m]];
      cpu[at[m]] += members[m].cpu;
      if (members[m].gpus > 0) {
        if (node.pool < 0) {
          ok = false;
          break;
        }
        pool[static_cast<std::size_t>(node.pool)] += members[m].gpus;
      }
    }
    for (std::size_t i = 0; i < n && ok; ++i) {
      ok = cpu[i] <= c.nodes[i].cpu;
    }
    for (std::size_t p = 0; p < pool.size() && ok; ++p) {
      ok = pool[p] <= c.poolFree[p];
    }
    if (ok) {
      return true;
    }
    std::size_t k = 0;
    while (k < at.size() && ++at[k] == n) {
      at[k++] = 0;
    }
    if (k == at.size()) {
      return false;
    }
  }
}

SchedPod member(const std::string& name, std::int64_t gpus, std::int64_t cpuMilli = 1000) {
  SchedPod p;
  p.ns = "team";
  p.name = name;
  p.schedulerName = "kubecomp-sched";
  ContainerRequest c;
  c.name = "main";
  c.requests.milliCpu = cpuMilli;
  c.requests.memory = 1 << 20;
  if (gpus > 0) {
    c.requests.scalar[std::string(kGpuResource)] = gpus;
  }
  p.containers.push_back(std::move(c));
  return p;
}

SchedNode schedNode(const std::string& name, std::int64_t cpuMilli) {
  SchedNode n;
  n.name = name;
  n.labels["kubernetes.io/hostname"] = name;
  n.allocatable.milliCpu = cpuMilli;
  n.allocatable.memory = std::int64_t{256} << 30;
  n.allocatablePods = 110;
  return n;
}

// A random small cluster in both views: 1-2 pools (or `onePool`), 1-3 nodes each, GPUs
// attached (some in use) and unattached, sometimes one unhealthy; CPU tight or ample.
struct Case {
  ClusterState state;
  std::vector<SchedNode> nodes;
  std::vector<NodeUsage> usage;
  OracleCluster oracle;
};

Case randomCase(std::mt19937_64& gen, bool onePool, bool ampleCpu) {
  auto uni = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen);
  };
  Case c;
  auto b = makeCluster();
  const int pools = onePool ? 1 : static_cast<int>(uni(1, 2));
  for (int p = 0; p < pools; ++p) {
    b.pool(named("p", static_cast<std::uint64_t>(p)));
    c.oracle.poolFree.push_back(0);
    c.oracle.poolHealthy.push_back(0);
    const int nodes = static_cast<int>(uni(1, 3));
    for (int n = 0; n < nodes; ++n) {
      const auto freeGpus = static_cast<std::uint32_t>(uni(0, 3));
      const auto used = static_cast<std::uint32_t>(uni(0, 1));
      const std::string name =
          named("n", static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(n));
      b.node(name, freeGpus, used);
      const std::int64_t cpu = ampleCpu ? 64'000 : uni(1, 4) * 1000;
      c.nodes.push_back(schedNode(name, cpu));
      c.usage.push_back(NodeUsage{});
      c.oracle.nodes.push_back(OracleNode{p, cpu, freeGpus});
      c.oracle.poolFree.back() += freeGpus;
      c.oracle.poolHealthy.back() += freeGpus + used;
    }
    const auto u = static_cast<std::uint32_t>(uni(0, 3));
    b.unattached(u);
    c.oracle.poolFree.back() += u;
    c.oracle.poolHealthy.back() += u;
  }
  c.state = b.build();
  // One free GPU made unhealthy now and then: neither free nor healthy for the oracle.
  if (uni(0, 3) == 0) {
    for (GpuIndex g = 0; g < c.state.gpuCount(); ++g) {
      if (c.state.gpu(g).free()) {
        REQUIRE(c.state.setGpuHealthy(g, false).ok());
        const auto p = static_cast<std::size_t>(c.state.gpu(g).pool);
        --c.oracle.poolFree[p];
        --c.oracle.poolHealthy[p];
        break;
      }
    }
  }
  return c;
}

// The plan checked from the rules, not from the planner's bookkeeping: every member on a node
// with room for its CPU; every move a free GPU of the target's pool, moved once; every node
// ending with at least the GPUs its members ask.
void checkPlan(const Case& c, const std::vector<SchedPod>& pods, const GangPlan& plan) {
  REQUIRE(plan.placements.size() == pods.size());
  std::map<NodeIndex, std::int64_t> cpu;
  std::map<NodeIndex, std::int64_t> gpusWanted;
  for (std::size_t m = 0; m < pods.size(); ++m) {
    const GangMemberPlacement& at = plan.placements[m];
    CHECK(at.member == m);
    REQUIRE(at.node < c.nodes.size());
    cpu[at.node] += pods[m].containers[0].requests.milliCpu;
    gpusWanted[at.node] += gpuRequest(pods[m]);
  }
  for (const auto& [n, used] : cpu) {
    CHECK(used <= c.oracle.nodes[n].cpu);
  }
  std::set<GpuIndex> moved;
  std::map<NodeIndex, std::int64_t> arriving;
  std::map<NodeIndex, std::int64_t> leaving;
  for (const GangMove& mv : plan.moves) {
    CHECK(moved.insert(mv.gpu).second);
    const GpuState& g = c.state.gpu(mv.gpu);
    CHECK(g.free());
    CHECK(g.node == mv.from);
    CHECK(c.state.node(mv.to).pool == g.pool);
    CHECK(mv.from != mv.to);
    ++arriving[mv.to];
    if (mv.from != kNoNode) {
      ++leaving[mv.from];
    }
  }
  for (const auto& [n, want] : gpusWanted) {
    CHECK(c.oracle.nodes[n].gpuFree - leaving[n] + arriving[n] >= want);
  }
}

}  // namespace

TEST_CASE("gang plans agree with the brute-force oracle on small clusters", "[alloc][gang]") {
  std::mt19937_64 gen(27);
  GangOptions opts;
  GangPlanner planner;
  int found = 0;
  int refused = 0;
  for (int round = 0; round < 600; ++round) {
    const bool onePool = round % 2 == 0;
    const bool ampleCpu = round % 3 != 0;
    Case c = randomCase(gen, onePool, ampleCpu);
    const int members = std::uniform_int_distribution<int>(1, 4)(gen);
    std::vector<SchedPod> pods;
    std::vector<OracleMember> om;
    for (int m = 0; m < members; ++m) {
      const std::int64_t g = std::uniform_int_distribution<std::int64_t>(0, 3)(gen);
      const std::int64_t cpu = std::uniform_int_distribution<std::int64_t>(1, 3)(gen) * 1000;
      pods.push_back(member(named("m", static_cast<std::uint64_t>(m)), g, cpu));
      om.push_back(OracleMember{cpu, g});
    }
    std::vector<const SchedPod*> ptrs;
    for (const auto& p : pods) {
      ptrs.push_back(&p);
    }
    const bool fits = oracleFits(c.oracle, om);
    auto plan = planner.plan(ptrs, c.nodes, c.usage, c.state, opts);
    CAPTURE(round, onePool, ampleCpu, members, fits);
    if (plan) {
      ++found;
      CHECK(fits);  // never a plan where none exists
      checkPlan(c, pods, *plan);
    } else {
      ++refused;
      CAPTURE(plan.error().message);
      if (onePool && ampleCpu) {
        CHECK_FALSE(fits);  // one pool, CPU not binding: the greedy pass is complete
      }
      // "Never fits" only when even every healthy GPU of the cluster could not serve it.
      if (plan.error().code == kc::errc::kInsufficient) {
        std::int64_t asked = 0;
        std::int64_t largest = 0;
        std::int64_t healthy = 0;
        for (const auto& m : om) {
          asked += m.gpus;
        }
        for (auto h : c.oracle.poolHealthy) {
          largest = std::max(largest, h);
          healthy += h;
        }
        bool memberTooBig = false;
        for (const auto& m : om) {
          memberTooBig = memberTooBig || m.gpus > largest;
        }
        CHECK((asked > healthy || memberTooBig));
      }
    }
  }
  // Both outcomes were exercised.
  CHECK(found > 100);
  CHECK(refused > 100);
}

TEST_CASE("gangs competing for one pool: the earlier gets everything, the later nothing",
          "[alloc][gang]") {
  // One pool, four nodes with no GPU attached, four unattached GPUs: room for one gang of four
  // 1-GPU members, not two. Planned pod by pod in arrival order (a1 b1 a2 b2 ...), each gang
  // would hold two GPUs and wait forever for two more.
  auto b = makeCluster();
  b.pool("p0");
  std::vector<SchedNode> nodes;
  for (int n = 0; n < 4; ++n) {
    b.node(named("n", static_cast<std::uint64_t>(n)), 0);
    nodes.push_back(schedNode(named("n", static_cast<std::uint64_t>(n)), 8000));
  }
  b.unattached(4);
  const ClusterState state = b.build();
  const std::vector<NodeUsage> usage(4);
  std::vector<SchedPod> a;
  std::vector<SchedPod> bb;
  for (int m = 0; m < 4; ++m) {
    a.push_back(member(named("a", static_cast<std::uint64_t>(m)), 1));
    bb.push_back(member(named("b", static_cast<std::uint64_t>(m)), 1));
  }
  auto gang = [](const std::string& name, std::int64_t created, const std::vector<SchedPod>& ps) {
    GangRequest g;
    g.name = name;
    g.order = PodOrderKey{0, created, "team", name};
    for (const auto& p : ps) {
      g.members.push_back(&p);
    }
    return g;
  };
  const auto [aFirst, bFirst] =
      GENERATE(table<std::int64_t, std::int64_t>({{100, 101}, {101, 100}}));
  CAPTURE(aFirst, bFirst);
  const std::vector<GangRequest> gangs = {gang("a", aFirst, a), gang("b", bFirst, bb)};
  auto plans = planGangsInOrder(gangs, nodes, usage, state, GangOptions{});
  const std::size_t winner = aFirst < bFirst ? 0 : 1;
  REQUIRE(plans[winner].ok());
  CHECK(plans[winner]->placements.size() == 4);
  CHECK(plans[winner]->moves.size() == 4);
  REQUIRE_FALSE(plans[1 - winner].ok());
  CHECK(plans[1 - winner].error().code == kc::errc::kUnschedulable);

  SECTION("once the winner's GPUs are free again the other gang fits whole") {
    auto again = GangPlanner{}.plan(gangs[1 - winner].members, nodes, usage, state, GangOptions{});
    REQUIRE(again.ok());
    CHECK(again->placements.size() == 4);
  }
}

TEST_CASE("several gangs in order match the oracle's running total", "[alloc][gang]") {
  // One pool, CPU ample: gang i succeeds iff its GPUs fit in what the earlier successful gangs
  // left of the pool (the oracle), whatever the sizes.
  std::mt19937_64 gen(2701);
  for (int round = 0; round < 200; ++round) {
    Case c = randomCase(gen, true, true);
    const int count = std::uniform_int_distribution<int>(2, 3)(gen);
    std::vector<std::vector<SchedPod>> pods(static_cast<std::size_t>(count));
    std::vector<GangRequest> gangs;
    std::vector<std::int64_t> asks;
    for (int g = 0; g < count; ++g) {
      const int members = std::uniform_int_distribution<int>(1, 3)(gen);
      std::int64_t ask = 0;
      for (int m = 0; m < members; ++m) {
        const std::int64_t n = std::uniform_int_distribution<std::int64_t>(1, 2)(gen);
        ask += n;
        pods[static_cast<std::size_t>(g)].push_back(
            member(named("g", static_cast<std::uint64_t>(g), static_cast<std::uint64_t>(m)), n));
      }
      asks.push_back(ask);
    }
    for (int g = 0; g < count; ++g) {
      GangRequest r;
      r.name = named("g", static_cast<std::uint64_t>(g));
      r.order = PodOrderKey{0, 1000 + g, "team", r.name};
      for (const auto& p : pods[static_cast<std::size_t>(g)]) {
        r.members.push_back(&p);
      }
      gangs.push_back(std::move(r));
    }
    auto plans = planGangsInOrder(gangs, c.nodes, c.usage, c.state, GangOptions{});
    std::int64_t left = c.oracle.poolFree[0];
    for (int g = 0; g < count; ++g) {
      const bool expect = asks[static_cast<std::size_t>(g)] <= left;
      CAPTURE(round, g, asks[static_cast<std::size_t>(g)], left);
      CHECK(plans[static_cast<std::size_t>(g)].ok() == expect);
      if (expect) {
        left -= asks[static_cast<std::size_t>(g)];
      }
    }
  }
}

TEST_CASE("a gang too big for the cluster says so at once", "[alloc][gang]") {
  auto b = makeCluster();
  b.pool("p0").node("n0", 2, 2).node("n1", 0).unattached(2);  // 6 healthy, 4 free
  b.pool("p1").node("m0", 3);                                 // 3 healthy
  const ClusterState state = b.build();
  const std::vector<SchedNode> nodes = {schedNode("n0", 64'000), schedNode("n1", 64'000),
                                        schedNode("m0", 64'000)};
  const std::vector<NodeUsage> usage(3);
  GangPlanner planner;
  auto plan = [&](std::vector<std::int64_t> gpus) {
    std::vector<SchedPod> pods;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      pods.push_back(member(named("w", i), gpus[i]));
    }
    std::vector<const SchedPod*> ptrs;
    for (const auto& p : pods) {
      ptrs.push_back(&p);
    }
    return planner.plan(ptrs, nodes, usage, state, GangOptions{});
  };
  // 7 GPUs in one member: the largest pool holds 6.
  auto big = plan({7});
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == kc::errc::kInsufficient);
  CHECK(big.error().message ==
        "gang member team/w0 asks 7 kubecomp.io/gpu; the largest GPU pool holds 6 healthy");
  // 10 in all over 9 healthy.
  auto many = plan({3, 3, 2, 2});
  REQUIRE_FALSE(many.ok());
  CHECK(many.error().code == kc::errc::kInsufficient);
  CHECK(many.error().message ==
        "the gang's 4 pods ask 10 kubecomp.io/gpu in all; the cluster's GPU pools hold 9 healthy");
  // 8 in all: fits once n0's running pods end (9 healthy), not now (7 free): it waits.
  auto later = plan({3, 3, 2});
  REQUIRE_FALSE(later.ok());
  CHECK(later.error().code == kc::errc::kUnschedulable);
  // 7 fits now: 4 free in p0, 3 in p1.
  CHECK(plan({3, 2, 2}).ok());
}

TEST_CASE("a gang's moves are planned together and run in parallel across chassis and pools",
          "[alloc][gang]") {
  // Two pools, each with two nodes holding nothing and four unattached GPUs on two chassis
  // (ids "<chassis>.<n>"): four 2-GPU members need eight moves.
  ClusterState state;
  std::vector<SchedNode> nodes;
  for (int p = 0; p < 2; ++p) {
    const PoolIndex pool = *state.addPool(named("p", static_cast<std::uint64_t>(p)));
    for (int n = 0; n < 2; ++n) {
      const std::string name =
          named("n", static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(n));
      REQUIRE(state
                  .addNode(NodeSpec{.name = name,
                                    .pool = pool,
                                    .cpuMilliCapacity = 64'000,
                                    .memoryMiBCapacity = 1 << 18})
                  .ok());
      nodes.push_back(schedNode(name, 64'000));
    }
    for (int g = 0; g < 4; ++g) {
      std::string id = named("c", static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(g % 2));
      id += '.';
      id += std::to_string(g);
      REQUIRE(state.addGpu(GpuSpec{.id = id, .uuid = "GPU-" + id, .pool = pool}).ok());
    }
  }
  const std::vector<NodeUsage> usage(nodes.size());
  std::vector<SchedPod> pods;
  std::vector<const SchedPod*> ptrs;
  for (int m = 0; m < 4; ++m) {
    pods.push_back(member(named("w", static_cast<std::uint64_t>(m)), 2));
  }
  for (const auto& p : pods) {
    ptrs.push_back(&p);
  }
  GangOptions opts;
  opts.moveTime = 10;
  opts.concurrency = MoveConcurrency{1, 0};
  auto plan = GangPlanner{}.plan(ptrs, nodes, usage, state, opts);
  REQUIRE(plan.ok());
  CHECK(plan->moves.size() == 8);
  // Per pool four moves on two chassis, one at a time per chassis: two rounds of 10. Both
  // pools at once. One move at a time per pool would take 40.
  CHECK(plan->ready == 20);
  CHECK(plan->serialReady == 40);
  std::map<std::string, int> perPoolChassis;
  for (const auto& mv : plan->moves) {
    ++perPoolChassis[std::string(chassisOfGpu(state.gpu(mv.gpu).id))];
  }
  CHECK(perPoolChassis ==
        std::map<std::string, int>{{"c0-0", 2}, {"c0-1", 2}, {"c1-0", 2}, {"c1-1", 2}});
  // With the serial fabric (the paper's) the same moves take 40.
  opts.concurrency = kSerialMoves;
  auto serial = GangPlanner{}.plan(ptrs, nodes, usage, state, opts);
  REQUIRE(serial.ok());
  CHECK(serial->ready == 40);
}

TEST_CASE("gang members with hostname anti-affinity see each other", "[alloc][gang]") {
  // Two nodes with 2 free GPUs each; two 1-GPU members that must not share a node. Eq. 1 alone
  // would pack both on one node.
  auto b = makeCluster();
  b.pool("p0").node("n0", 2).node("n1", 2);
  const ClusterState state = b.build();
  const std::vector<SchedNode> nodes = {schedNode("n0", 64'000), schedNode("n1", 64'000)};
  const std::vector<NodeUsage> usage(2);
  auto anti = std::make_shared<PodAffinity>();
  PodAffinityTerm term;
  term.topologyKey = "kubernetes.io/hostname";
  term.labelSelector = LabelSelector{};
  term.labelSelector->matchLabels["job"] = "train";
  anti->requiredAnti.push_back(term);
  std::vector<SchedPod> pods = {member("w0", 1), member("w1", 1)};
  for (auto& p : pods) {
    p.labels["job"] = "train";
    p.podAffinity = anti;
  }
  std::vector<const SchedPod*> ptrs = {&pods[0], &pods[1]};
  PlacedPods placed;
  GangOptions opts;
  opts.placement.filter.placed = &placed;
  auto plan = GangPlanner{}.plan(ptrs, nodes, usage, state, opts);
  REQUIRE(plan.ok());
  CHECK(plan->placements[0].node != plan->placements[1].node);
  CHECK(placed.size() == 0);  // the caller's placed pods are left as they were
}

}  // namespace kc::alloc::test
