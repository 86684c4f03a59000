// Preemption (libcore/alloc/preemption.hpp) against preemption_oracle.hpp: a table of cases
// whose expected node and victims were worked out by hand from the documentation (the oracle
// must agree too), and random clusters where the choice must be one the oracle allows.

#include "libcore/alloc/preemption.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <vector>

#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/preemption_oracle.hpp"

namespace kc::alloc {
namespace {

using test::OracleBudget;
using test::OracleCluster;
using test::OracleNode;
using test::OraclePod;
using test::OraclePreemptor;

// The same cluster as libcore's models.
struct Built {
  std::vector<SchedNode> nodes;
  std::vector<NodeUsage> usage;
  ClusterState state;
  std::vector<std::vector<ResidentPod>> running;
  std::vector<StringMap> labels;
  std::vector<Resources> requests;
  std::vector<std::string> keys;
  std::vector<DisruptionBudget> budgets;
  SchedPod pod;
  PlacementOptions options;

  PreemptionInput input() const {
    PreemptionInput in;
    in.nodes = nodes;
    in.usage = usage;
    in.state = &state;
    in.running = running;
    in.budgets = budgets;
    in.options = options;
    return in;
  }
};

Built build(const OracleCluster& c, const OraclePreemptor& p, bool composable) {
  Built b;
  b.options.mode = composable ? Composability::Composable : Composability::Preconfigured;
  std::map<int, PoolIndex> pools;
  for (const auto& [id, free] : c.poolFree) {
    pools[id] = *b.state.addPool(test::named("pool", static_cast<std::uint64_t>(id)));
  }
  b.labels.reserve(c.running.size());
  b.requests.reserve(c.running.size());
  b.keys.reserve(c.running.size());
  b.running.resize(c.nodes.size());
  b.usage.resize(c.nodes.size());
  unsigned gpuId = 0;
  auto addGpu = [&](PoolIndex pool, NodeIndex node, bool inUse) {
    const std::string id = test::named("g", gpuId++);
    REQUIRE(b.state
                .addGpu(GpuSpec{
                    .id = id, .uuid = "GPU-" + id, .pool = pool, .node = node, .inUse = inUse})
                .ok());
  };
  std::map<int, int> attachedFree;
  for (std::size_t n = 0; n < c.nodes.size(); ++n) {
    const OracleNode& on = c.nodes[n];
    SchedNode node;
    node.name = on.name;
    node.allocatable.milliCpu = on.cpu;
    node.allocatablePods = on.maxPods;
    node.unschedulable = on.cordoned;
    b.nodes.push_back(node);
    const int poolId = on.pool >= 0 ? on.pool : 0;
    const PoolIndex pool = pools.at(poolId);
    auto idx = b.state.addNode(NodeSpec{.name = on.name,
                                        .pool = pool,
                                        .cpuMilliCapacity = 1'000'000,
                                        .memoryMiBCapacity = 1'000'000});
    REQUIRE(idx.ok());
    int used = 0;
    for (const OraclePod& rp : c.running) {
      if (rp.node == static_cast<int>(n)) {
        used += rp.gpus;
      }
    }
    for (int g = 0; g < used + on.freeGpus; ++g) {
      addGpu(pool, *idx, g < used);
    }
    attachedFree[poolId] += on.freeGpus;
  }
  for (const auto& [id, free] : c.poolFree) {
    for (int g = attachedFree[id]; g < free; ++g) {
      addGpu(pools.at(id), kNoNode, false);
    }
  }
  for (const OraclePod& rp : c.running) {
    b.labels.emplace_back(rp.labels.begin(), rp.labels.end());
  }
  for (std::size_t i = 0; i < c.running.size(); ++i) {
    const OraclePod& rp = c.running[i];
    ResidentPod r;
    b.keys.push_back(rp.ns + "/" + rp.name);
    r.ns = rp.ns;
    r.name = rp.name;
    r.key = b.keys.back();
    r.priority = rp.priority;
    r.started = rp.start;
    Resources request;
    request.milliCpu = rp.cpu;
    if (rp.gpus > 0) {
      request.scalar[std::string(kGpuResource)] = rp.gpus;
    }
    b.requests.push_back(std::move(request));
    r.request = &b.requests.back();
    r.labels = &b.labels[i];
    addPodUsage(b.usage[rp.node], *r.request);
    b.running[rp.node].push_back(std::move(r));
  }
  for (const OracleBudget& ob : c.budgets) {
    DisruptionBudget d;
    d.ns = ob.ns;
    d.selector =
        LabelSelector{.matchLabels = StringMap(ob.matchLabels.begin(), ob.matchLabels.end())};
    d.disruptionsAllowed = ob.allowed;
    b.budgets.push_back(std::move(d));
  }
  b.pod.ns = "default";
  b.pod.name = "preemptor";
  ContainerRequest cr;
  cr.name = "c";
  cr.requests.milliCpu = p.cpu;
  if (p.gpus > 0) {
    cr.requests.scalar[std::string(kGpuResource)] = p.gpus;
  }
  b.pod.containers.push_back(cr);
  b.pod.priority = p.priority;
  b.pod.preemptNever = p.never;
  return b;
}

// (node name, victim names sorted) or the error text.
std::string describe(const Built& b, const Result<NodeVictims>& r) {
  if (!r) {
    return "error: " + r.error().message;
  }
  std::vector<std::string> names;
  for (std::size_t i : r->victims) {
    names.emplace_back(b.running[r->node][i].name);
  }
  std::sort(names.begin(), names.end());
  std::string out = b.nodes[r->node].name + ":";
  for (const auto& n : names) {
    out += " " + n;
  }
  return out;
}

std::string describeOracle(const OracleCluster& c, const test::OracleChoice& choice) {
  std::string out = c.nodes[choice.node].name + ":";
  for (const auto& n : choice.victims) {
    out += " " + n;
  }
  return out;
}

OracleNode node(const std::string& name, std::int64_t cpu, int freeGpus = 0) {
  return OracleNode{.name = name, .cpu = cpu, .freeGpus = freeGpus, .pool = 0};
}

OraclePod running(const std::string& name, int node, int priority, std::int64_t cpu,
                  std::int64_t start = 0, int gpus = 0) {
  OraclePod p;
  p.name = name;
  p.node = node;
  p.priority = priority;
  p.cpu = cpu;
  p.start = start;
  p.gpus = gpus;
  return p;
}

struct Case {
  const char* what;
  OracleCluster cluster;
  OraclePreemptor pod;
  std::string expected;  // describe()'s text
};

std::vector<Case> cases() {
  std::vector<Case> out;
  {
    Case c{"the node whose victim has the lowest priority", {}, {100, 2000}, "n1: b"};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000)};
    c.cluster.running = {running("a", 0, 10, 3000), running("b", 1, 5, 3000)};
    out.push_back(c);
  }
  {
    Case c{"a PDB-protected pod is spared when another node works", {}, {100, 2000}, "n1: b"};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000)};
    c.cluster.running = {running("a", 0, 5, 3000), running("b", 1, 8, 3000)};
    c.cluster.running[0].labels = {{"app", "db"}};
    c.cluster.budgets = {OracleBudget{.matchLabels = {{"app", "db"}}, .allowed = 0}};
    out.push_back(c);
  }
  {
    Case c{"a budget with room is no violation", {}, {100, 2000}, "n0: a"};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000)};
    c.cluster.running = {running("a", 0, 5, 3000), running("b", 1, 8, 3000)};
    c.cluster.running[0].labels = {{"app", "db"}};
    c.cluster.budgets = {OracleBudget{.matchLabels = {{"app", "db"}}, .allowed = 1}};
    out.push_back(c);
  }
  {
    // All three removed it fits; z (most important) is reprieved first and stays, then y and x
    // cannot come back: the victims are the two lowest, not the single z.
    Case c{"reprieve the most important first", {}, {100, 2000}, "n0: x y"};
    c.cluster.nodes = {node("n0", 4000)};
    c.cluster.running = {running("x", 0, 1, 1000), running("y", 0, 2, 1000),
                         running("z", 0, 3, 2000)};
    out.push_back(c);
  }
  {
    Case c{"higher priority pods are never victims",
           {},
           {100, 2000},
           "error: preemption: 0/1 nodes are available: 1 No preemption victims found for "
           "incoming pod."};
    c.cluster.nodes = {node("n0", 4000)};
    c.cluster.running = {running("a", 0, 200, 3000), running("b", 0, 100, 500)};
    out.push_back(c);
  }
  {
    Case c{"preemptionPolicy Never preempts nobody",
           {},
           {100, 2000, 0, true},
           "error: preemption: not eligible due to preemptionPolicy=Never."};
    c.cluster.nodes = {node("n0", 4000)};
    c.cluster.running = {running("a", 0, 1, 3000)};
    out.push_back(c);
  }
  {
    Case c{"lowest highest-victim priority beats fewer victims", {}, {100, 2000}, "n0: a b"};
    c.cluster.nodes = {node("n0", 2000), node("n1", 2000)};
    c.cluster.running = {running("a", 0, 5, 1000), running("b", 0, 5, 1000),
                         running("c", 1, 10, 2000)};
    out.push_back(c);
  }
  {
    Case c{"smallest sum of victim priorities", {}, {100, 2000}, "n1: c"};
    c.cluster.nodes = {node("n0", 2000), node("n1", 2000)};
    c.cluster.running = {running("a", 0, 5, 1000), running("b", 0, 5, 1000),
                         running("c", 1, 5, 2000)};
    out.push_back(c);
  }
  {
    Case c{"latest start of the highest-priority victims", {}, {100, 2000}, "n1: d"};
    c.cluster.nodes = {node("n0", 2000), node("n1", 2000)};
    c.cluster.running = {running("c", 0, 5, 2000, 100), running("d", 1, 5, 2000, 200)};
    out.push_back(c);
  }
  {
    Case c{"GPUs: only the node where a victim frees GPUs", {}, {100, 100, 2}, "n0: g"};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000)};
    c.cluster.running = {running("g", 0, 1, 100, 0, 2), running("h", 1, 1, 100)};
    c.cluster.poolFree = {{0, 0}};
    out.push_back(c);
  }
  {
    Case c{"a cordoned node is not helped by preemption",
           {},
           {100, 2000},
           "error: preemption: 0/2 nodes are available: 1 No preemption victims found for "
           "incoming pod, 1 Preemption is not helpful for scheduling."};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000)};
    c.cluster.nodes[0].cordoned = true;
    c.cluster.running = {running("a", 0, 1, 3000), running("b", 1, 200, 3000)};
    out.push_back(c);
  }
  {
    // kube-scheduler's SelectVictimsOnNode: without every lower-priority pod the node still
    // fails a filter; that filter's status is the node's, not "No preemption victims".
    Case c{"evicting every lower-priority pod does not free enough",
           {},
           {100, 2000},
           "error: preemption: 0/1 nodes are available: 1 Insufficient cpu."};
    c.cluster.nodes = {node("n0", 4000)};
    c.cluster.running = {running("a", 0, 200, 3000), running("b", 0, 0, 500)};
    out.push_back(c);
  }
  {
    Case c{"the victims free too few GPUs",
           {},
           {100, 100, 2},
           "error: preemption: 0/1 nodes are available: 1 Insufficient kubecomp.io/gpu."};
    c.cluster.nodes = {node("n0", 4000)};
    c.cluster.running = {running("g", 0, 0, 100, 0, 1)};
    out.push_back(c);
  }
  {
    Case c{"each node's status: not helpful, no victims, a filter",
           {},
           {100, 2000},
           "error: preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption "
           "victims found for incoming pod, 1 Preemption is not helpful for scheduling."};
    c.cluster.nodes = {node("n0", 4000), node("n1", 4000), node("n2", 4000)};
    c.cluster.nodes[0].cordoned = true;
    c.cluster.running = {running("a", 0, 0, 3000), running("b", 1, 200, 3000),
                         running("c", 2, 200, 3000), running("d", 2, 0, 500)};
    out.push_back(c);
  }
  for (Case& c : out) {
    if (c.cluster.poolFree.empty()) {
      c.cluster.poolFree = {{0, 0}};
    }
  }
  return out;
}

TEST_CASE("preemption: victims and node as kube-scheduler documents them", "[preemption]") {
  for (const Case& c : cases()) {
    CAPTURE(c.what);
    Built b = build(c.cluster, c.pod, true);
    auto r = selectPreemption(b.pod, b.input());
    CHECK(describe(b, r) == c.expected);
    // The oracle agrees with the hand-worked answer.
    auto allowed = test::oracleAllowed(c.cluster, c.pod);
    if (c.expected.starts_with("error")) {
      CHECK(allowed.empty());
    } else {
      REQUIRE(allowed.size() == 1);
      CHECK(describeOracle(c.cluster, allowed.front()) == c.expected);
    }
  }
}

TEST_CASE("preemption: nominated pods count for pods of no higher priority", "[preemption]") {
  // kube-scheduler's addGENominatedPods: a nominee of priority >= the pod's counts.
  CHECK(nominatedCounts(100, 100));
  CHECK(nominatedCounts(100, 50));
  CHECK_FALSE(nominatedCounts(100, 200));
  CHECK(nominatedCounts(-5, -10));
  CHECK_FALSE(nominatedCounts(-10, -5));
  Resources request;
  request.milliCpu = 1500;
  request.scalar[std::string(kGpuResource)] = 4;
  // Its victims still hold two GPUs there: it holds the other two, and all of its CPU.
  Resources hold = nominatedHold(request, 2);
  CHECK(hold.milliCpu == 1500);
  CHECK(hold.scalarOr0(kGpuResource) == 2);
  CHECK(nominatedHold(request, 0) == request);
  CHECK(nominatedHold(request, -1) == request);
  hold = nominatedHold(request, 6);
  CHECK(hold.scalarOr0(kGpuResource) == 0);
  CHECK(hold.milliCpu == 1500);
}

TEST_CASE("preemption: the PDB violation count follows the budget order", "[preemption]") {
  // Two pods under one budget allowing one disruption: the more important one takes the
  // budget, the less important one is the violation; both must go.
  OracleCluster c;
  c.nodes = {node("n0", 2000)};
  c.running = {running("a", 0, 5, 1000, 1), running("b", 0, 5, 1000, 2)};
  c.running[0].labels = c.running[1].labels = {{"app", "web"}};
  c.budgets = {OracleBudget{.matchLabels = {{"app", "web"}}, .allowed = 1}};
  c.poolFree = {{0, 0}};
  Built b = build(c, {100, 2000}, true);
  auto r = selectPreemption(b.pod, b.input());
  REQUIRE(r.ok());
  CHECK(r->pdbViolations == 1);
  CHECK(describe(b, r) == "n0: a b");
  CHECK(test::oracleAllowed(c, {100, 2000}).front().violations == 1);
}

TEST_CASE("preemption: the search stops after kube-scheduler's number of candidates",
          "[preemption]") {
  // 300 nodes, each a candidate without PDB violations: 10% is 30, below the absolute 100, so
  // the search stops after 100 candidates from where it started. The best node (n250: the
  // only victim of priority 1) is found only when the search passes it.
  OracleCluster c;
  for (int n = 0; n < 300; ++n) {
    c.nodes.push_back(node(test::named("n", static_cast<std::uint64_t>(n)), 4000));
    c.running.push_back(
        running(test::named("v", static_cast<std::uint64_t>(n)), n, n == 250 ? 1 : 5, 3000));
  }
  c.poolFree = {{0, 0}};
  Built b = build(c, {100, 2000}, true);
  PreemptionInput in = b.input();
  CHECK(describe(b, selectPreemption(b.pod, in)) == "n0: v0");
  in.startNode = 200;
  CHECK(describe(b, selectPreemption(b.pod, in)) == "n250: v250");
  in.startNode = 0;
  in.minCandidateNodesAbsolute = 300;
  CHECK(describe(b, selectPreemption(b.pod, in)) == "n250: v250");
  // The oracle, which tries every node, agrees with the last.
  CHECK(describeOracle(c, test::oracleAllowed(c, {100, 2000}).front()) == "n250: v250");
}

TEST_CASE("preemption: mismatched inputs are refused", "[preemption]") {
  OracleCluster c;
  c.nodes = {node("n0", 2000)};
  c.poolFree = {{0, 0}};
  Built b = build(c, {100, 2000}, true);
  PreemptionInput in = b.input();
  in.usage = {};
  auto r = selectPreemption(b.pod, in);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == kc::errc::kInvalid);
}

// The case, for a failure's message.
std::string dump(const OracleCluster& c, const OraclePreemptor& p, bool composable) {
  std::string out = composable ? "composable" : "preconfigured";
  out += " preemptor prio " + std::to_string(p.priority) + " cpu " + std::to_string(p.cpu) +
         " gpus " + std::to_string(p.gpus) + (p.never ? " never" : "");
  for (const auto& n : c.nodes) {
    out += "\n node " + n.name + " cpu " + std::to_string(n.cpu) + " maxPods " +
           std::to_string(n.maxPods) + " free " + std::to_string(n.freeGpus) + " pool " +
           std::to_string(n.pool) + (n.cordoned ? " cordoned" : "");
  }
  for (const auto& [pool, free] : c.poolFree) {
    out += "\n pool " + std::to_string(pool) + " free " + std::to_string(free);
  }
  for (const auto& rp : c.running) {
    out += "\n pod " + rp.name + " on " + std::to_string(rp.node) + " prio " +
           std::to_string(rp.priority) + " cpu " + std::to_string(rp.cpu) + " gpus " +
           std::to_string(rp.gpus) + " start " + std::to_string(rp.start) +
           (rp.labels.empty() ? "" : " app=" + rp.labels.begin()->second);
  }
  for (const auto& b : c.budgets) {
    out += "\n pdb app=" + b.matchLabels.begin()->second + " allowed " + std::to_string(b.allowed);
  }
  return out;
}

OracleCluster randomCluster(SplitMix64& rng, bool composable) {
  OracleCluster c;
  const int pools = 1 + static_cast<int>(rng.below(2));
  const int nodes = 1 + static_cast<int>(rng.below(6));
  for (int n = 0; n < nodes; ++n) {
    OracleNode on;
    on.name = test::named("n", static_cast<std::uint64_t>(n));
    on.cpu = 1000 * (2 + static_cast<std::int64_t>(rng.below(4)));
    on.maxPods = 2 + static_cast<int>(rng.below(4));
    on.freeGpus = static_cast<int>(rng.below(2));
    on.pool = static_cast<int>(rng.below(static_cast<std::uint64_t>(pools)));
    on.cordoned = rng.below(10) == 0;
    c.nodes.push_back(on);
  }
  std::map<int, int> attached;
  for (const auto& on : c.nodes) {
    attached[on.pool] += on.freeGpus;
  }
  for (int p = 0; p < pools; ++p) {
    c.poolFree[p] = attached[p] + static_cast<int>(rng.below(2));
  }
  int next = 0;
  for (int n = 0; n < nodes; ++n) {
    std::int64_t cpu = 0;
    const int count =
        static_cast<int>(rng.below(static_cast<std::uint64_t>(c.nodes[n].maxPods) + 1));
    for (int k = 0; k < count; ++k) {
      const std::int64_t want = 500 * (1 + static_cast<std::int64_t>(rng.below(4)));
      if (cpu + want > c.nodes[n].cpu) {
        break;
      }
      cpu += want;
      OraclePod p =
          running(test::named("p", static_cast<std::uint64_t>(next++)), n,
                  10 * static_cast<int>(rng.below(5)), want,
                  static_cast<std::int64_t>(rng.below(4)), static_cast<int>(rng.below(3)));
      if (rng.below(2) == 0) {
        p.labels["app"] = rng.below(2) == 0 ? "a" : "b";
      }
      c.running.push_back(p);
    }
  }
  const int budgets = static_cast<int>(rng.below(3));
  for (int k = 0; k < budgets; ++k) {
    c.budgets.push_back(OracleBudget{.matchLabels = {{"app", k == 0 ? "a" : "b"}},
                                     .allowed = static_cast<int>(rng.below(2))});
  }
  if (!composable) {
    for (auto& on : c.nodes) {
      on.pool = -1;
    }
  }
  return c;
}

TEST_CASE("preemption: random clusters, the choice is one the oracle allows", "[preemption]") {
  SplitMix64 rng(27);
  int preempted = 0;
  for (int round = 0; round < 600; ++round) {
    CAPTURE(round);
    const bool composable = rng.below(2) == 0;
    OracleCluster c = randomCluster(rng, composable);
    OraclePreemptor p{.priority = 5 + 10 * static_cast<int>(rng.below(4)),
                      .cpu = 500 * (1 + static_cast<std::int64_t>(rng.below(6))),
                      .gpus = static_cast<int>(rng.below(4)),
                      .never = rng.below(10) == 0};
    // The built model keeps every node in a pool; preconfigured mode ignores it, as the
    // oracle's pool -1 does.
    OracleCluster forBuild = c;
    if (!composable) {
      for (auto& on : forBuild.nodes) {
        on.pool = 0;
      }
      forBuild.poolFree.clear();
      forBuild.poolFree[0] = 0;
      for (const auto& on : forBuild.nodes) {
        forBuild.poolFree[0] += on.freeGpus;
      }
    }
    Built b = build(forBuild, p, composable);
    auto r = selectPreemption(b.pod, b.input());
    auto allowed = test::oracleAllowed(c, p);
    CAPTURE(describe(b, r));
    CAPTURE(dump(c, p, composable));
    REQUIRE(r.ok() == !allowed.empty());
    if (!r) {
      CHECK(r.error().message.starts_with("preemption: "));
      continue;
    }
    ++preempted;
    const std::string got = describe(b, r);
    bool found = false;
    for (const auto& choice : allowed) {
      found = found || (describeOracle(c, choice) == got && choice.violations == r->pdbViolations);
    }
    CHECK(found);
    // Victims are of lower priority, and none of them could have stayed.
    std::set<std::string> victims;
    for (std::size_t i : r->victims) {
      victims.emplace(b.running[r->node][i].name);
    }
    const int chosen = static_cast<int>(r->node);
    std::vector<int> present;
    for (std::size_t i = 0; i < c.running.size(); ++i) {
      if (c.running[i].node != chosen) {
        continue;
      }
      if (victims.contains(c.running[i].name)) {
        CHECK(c.running[i].priority < p.priority);
      } else {
        present.push_back(static_cast<int>(i));
      }
    }
    CHECK(test::oracleFits(c, p, chosen, present));
    for (std::size_t i = 0; i < c.running.size(); ++i) {
      if (c.running[i].node == chosen && victims.contains(c.running[i].name)) {
        std::vector<int> back = present;
        back.push_back(static_cast<int>(i));
        CHECK_FALSE(test::oracleFits(c, p, chosen, back));
      }
    }
  }
  CHECK(preempted > 100);  // the random cases do exercise preemption
}

}  // namespace
}  // namespace kc::alloc
