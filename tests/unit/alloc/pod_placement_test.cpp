// placePod: kube-scheduler's filters, then Eq. 1 over the pool model. Where the filters reject
// nothing it must choose what the simulator's call (selectNode / selectNodeForModels) chooses;
// where they do, the FitError counts both kinds of reason.

#include "libcore/alloc/pod_placement.hpp"

#include <catch2/catch.hpp>
#include <random>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"

using namespace kc::alloc;

namespace {

SchedNode schedNode(const std::string& name) {
  SchedNode n;
  n.name = name;
  n.allocatable.milliCpu = 64'000;
  n.allocatable.memory = std::int64_t{256} << 30;
  n.allocatablePods = 110;
  return n;
}

SchedPod gpuPod(std::int64_t gpus) {
  SchedPod p;
  p.ns = "team";
  p.name = "p";
  ContainerRequest c;
  c.name = "main";
  c.requests.milliCpu = 1000;
  if (gpus > 0) {
    c.requests.scalar[std::string(kGpuResource)] = gpus;
  }
  p.containers.push_back(c);
  return p;
}

std::vector<SchedNode> nodesOf(const ClusterState& state) {
  std::vector<SchedNode> out;
  for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
    out.push_back(schedNode(state.node(n).name));
  }
  return out;
}

}  // namespace

TEST_CASE("placePod chooses what selectNode chooses when every node passes the kube filters",
          "[alloc]") {
  const auto policyName = GENERATE(as<std::string>{}, "eq1", "best-fit", "least-demand", "none");
  CAPTURE(policyName);
  const NodePolicy policy = *findNodePolicy(policyName);
  std::mt19937 rng(12);
  for (int round = 0; round < 200; ++round) {
    test::ClusterBuilder b;
    const int pools = 1 + static_cast<int>(rng() % 3);
    int node = 0;
    for (int p = 0; p < pools; ++p) {
      b.pool("p" + std::to_string(p));
      const int nodes = 1 + static_cast<int>(rng() % 5);
      for (int i = 0; i < nodes; ++i) {
        b.node("n" + std::to_string(node++), rng() % 4, rng() % 3);
      }
      b.unattached(rng() % 4);
    }
    ClusterState state = b.build();
    const auto nodes = nodesOf(state);
    const std::vector<NodeUsage> usage(nodes.size());
    const std::uint32_t gpus = rng() % 6;
    CAPTURE(round, gpus);
    PlacementOptions o;
    o.policy = policy;
    auto ours = placePod(gpuPod(gpus), nodes, usage, state, o);
    auto sims = selectNode(state, PodRequest{0, 0, gpus}, policy, Composability::Composable);
    REQUIRE(ours.ok() == sims.ok());
    if (ours.ok()) {
      CHECK(ours->node == sims->node);
      CHECK(ours->deficit == sims->deficit);
      CHECK(ours->score == sims->score);
    }
  }
}

TEST_CASE("selectNodeForModelsAmong over every node is selectNodeForModels", "[alloc]") {
  std::mt19937 rng(7);
  const std::vector<std::string> models = {"A100", "H100", "V100"};
  for (int round = 0; round < 200; ++round) {
    ClusterState state;
    const PoolIndex p = *state.addPool("p0");
    const int nodes = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < nodes; ++i) {
      REQUIRE(state.addNode({"n" + std::to_string(i), p, 0, 0}).ok());
    }
    const int gpus = static_cast<int>(rng() % 12);
    for (int g = 0; g < gpus; ++g) {
      const NodeIndex at = rng() % 3 == 0 ? kNoNode : static_cast<NodeIndex>(rng() % nodes);
      REQUIRE(
          state.addGpu({"g" + std::to_string(g), "u" + std::to_string(g), models[rng() % 3], p, at})
              .ok());
    }
    auto filter = *GpuModelFilter::parse(models[rng() % 3] + "," + models[rng() % 3], ',');
    std::vector<NodeIndex> all;
    for (NodeIndex n = 0; n < state.nodeCount(); ++n) {
      all.push_back(n);
    }
    const PodRequest req{0, 0, static_cast<std::uint32_t>(1 + rng() % 4)};
    const NodePolicy eq1 = *findNodePolicy("eq1");
    auto a = selectNodeForModels(state, req, filter, eq1, Composability::Composable);
    auto b = selectNodeForModelsAmong(state, req, filter, eq1, Composability::Composable, all);
    CAPTURE(round);
    REQUIRE(a.ok() == b.ok());
    if (a.ok()) {
      CHECK(*a == *b);
    } else {
      CHECK(a.error() == b.error());
    }
  }
}

TEST_CASE("placePod: the FitError counts the kube filters' and the pool's reasons", "[alloc]") {
  ClusterState state =
      test::ClusterBuilder().pool("p0").node("a", 1).node("b", 0).node("c", 0).build();
  (void)state.addNode({"lonely", kNoPool, 0, 0});
  auto nodes = nodesOf(state);
  nodes[2].unschedulable = true;
  const std::vector<NodeUsage> usage(nodes.size());
  auto r = placePod(gpuPod(2), nodes, usage, state, {});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == "unschedulable");
  CHECK(r.error().message ==
        "0/4 nodes are available: 1 node(s) had no GPU pool, 1 node(s) were unschedulable, 2 "
        "node(s) had too "
        "few free kubecomp.io/gpu in their GPU pool.");
  // One GPU: a fits, the pool reason is gone.
  auto one = placePod(gpuPod(1), nodes, usage, state, {});
  REQUIRE(one.ok());
  CHECK(nodes[one->node].name == "a");
  CHECK(one->deficit == 0);
  // The pods on a node count (CPU), and a node lacking GPUs gets a deficit.
  std::vector<NodeUsage> full(nodes.size());
  full[0].requested.milliCpu = 64'000;
  auto moved = placePod(gpuPod(1), nodes, full, state, {});
  REQUIRE(moved.ok());  // a is full; b can get a's free GPU moved over
  CHECK(nodes[moved->node].name == "b");
  CHECK(moved->deficit == 1);
  auto none = placePod(gpuPod(2), nodes, full, state, {});
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message ==
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) had no GPU pool, 1 node(s) had too "
        "few free "
        "kubecomp.io/gpu in their GPU pool, 1 node(s) were unschedulable.");
  // Sizes must agree.
  auto bad = placePod(gpuPod(1), std::span<const SchedNode>(nodes.data(), 2), usage, state, {});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "invalid");
}

TEST_CASE("placePod's lazy filtering gives what filtering every node first gives", "[alloc]") {
  // The reference: filterNodes over all nodes, then selectNodeForModelsAmong over the
  // survivors (the definition in pod_placement.hpp), on random clusters where the kube filters
  // reject random nodes (cordons, taints, CPU) and pods may be model-constrained.
  std::mt19937 rng(99);
  const std::vector<std::string> models = {"A100", "H100"};
  const NodePolicy eq1 = *findNodePolicy("eq1");
  int admittedSome = 0;
  for (int round = 0; round < 400; ++round) {
    ClusterState state;
    const int pools = 1 + static_cast<int>(rng() % 2);
    for (int p = 0; p < pools; ++p) {
      REQUIRE(state.addPool("p" + std::to_string(p)).ok());
    }
    const int nodeCount = 1 + static_cast<int>(rng() % 8);
    std::vector<SchedNode> nodes;
    std::vector<NodeUsage> usage(nodeCount);
    for (int i = 0; i < nodeCount; ++i) {
      const PoolIndex pool = rng() % 5 == 0 ? kNoPool : static_cast<PoolIndex>(rng() % pools);
      REQUIRE(state.addNode({"n" + std::to_string(i), pool, 0, 0}).ok());
      SchedNode n = schedNode("n" + std::to_string(i));
      n.unschedulable = rng() % 6 == 0;
      if (rng() % 6 == 0) {
        n.taints.push_back({"dedicated", "x", TaintEffect::NoSchedule});
      }
      usage[i].requested.milliCpu = rng() % 5 == 0 ? 64'000 : 0;
      nodes.push_back(n);
    }
    for (int g = 0, gpus = static_cast<int>(rng() % 14); g < gpus; ++g) {
      const PoolIndex pool = static_cast<PoolIndex>(rng() % pools);
      NodeIndex at = kNoNode;
      if (rng() % 3 != 0) {
        const NodeIndex cand = static_cast<NodeIndex>(rng() % nodeCount);
        if (state.node(cand).pool == pool) {
          at = cand;
        }
      }
      const std::string model = models[rng() % 2];
      const bool inUse = at != kNoNode && rng() % 4 == 0;
      REQUIRE(
          state.addGpu({"g" + std::to_string(g), "u" + std::to_string(g), model, pool, at, inUse})
              .ok());
    }
    SchedPod pod = gpuPod(rng() % 4);
    if (rng() % 3 == 0) {
      pod.gpuModels = *GpuModelFilter::parse(models[rng() % 2], ',');
    }
    CAPTURE(round);
    auto ours = placePod(pod, nodes, usage, state, {});
    FilterOptions f;
    f.fit.ignoredResources.emplace(kGpuResource);
    auto passed = filterNodes(pod, nodes, usage, f);
    REQUIRE(passed.ok());
    std::vector<NodeIndex> survivors(passed->feasible.begin(), passed->feasible.end());
    if (survivors.empty()) {
      REQUIRE_FALSE(ours.ok());
      CHECK(ours.error().message == passed->message);
      continue;
    }
    auto ref = selectNodeForModelsAmong(
        state, PodRequest{0, 0, static_cast<std::uint32_t>(gpuRequest(pod))}, pod.gpuModels, eq1,
        Composability::Composable, survivors);
    REQUIRE(ours.ok() == ref.ok());
    if (ours.ok()) {
      ++admittedSome;
      CHECK(ours->node == ref->node);
      CHECK(ours->deficit == ref->deficit);
    }
  }
  CHECK(admittedSome > 100);  // the comparison ran on placements, not only on failures
}
