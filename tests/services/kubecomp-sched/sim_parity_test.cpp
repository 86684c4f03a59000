// One policy, two callers: the same pod sequence through the simulator (kc::sim::simulate, which
// calls alloc::selectNode) and through kubecomp-sched against the API test double gives the same
// nodes and the same GPU deficits. The test plays reconfig-mgr and kubelet for the daemon by
// carrying out the simulator's own moves (the GPU ids it chose) in the GPUPool status and the
// Nodes' allocatable.

#include <catch2/catch.hpp>

#include <map>

#include "tests/services/kubecomp-sched/sched_cluster.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tools/kubecomp-sim/engine.hpp"

using namespace std::chrono_literals;
using kc::testing::NodeOpts;
using kc::testing::PodOpts;
using kc::testing::PoolGpu;
using kc::testing::SchedCluster;

TEST_CASE("the daemon places a pod sequence on the nodes the simulator chooses", "[sched]") {
  const auto policyName = GENERATE(as<std::string>{}, "eq1", "least-demand");
  CAPTURE(policyName);
  // Two pools; some nodes full, some empty, free GPUs unattached in both.
  kc::alloc::test::ClusterBuilder b;
  b.pool("p0").node("n1", 2).node("n2", 1).node("n3", 0).unattached(2);
  b.pool("p1").node("n4", 3).node("n5", 0).unattached(1);
  const kc::alloc::ClusterState cluster = b.build();
  const std::vector<std::uint32_t> requests = {1, 3, 1, 2, 1, 1};

  kc::sim::Trace trace;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    trace.jobs.push_back({"job" + std::to_string(i), static_cast<kc::sim::SimMs>(i) * 1000, 1'000'000'000,
                          requests[i], 0, 1000, 1024});
  }
  kc::sim::SimConfig config = kc::sim::defaultSimConfig();
  config.nodePolicy = *kc::alloc::findNodePolicy(policyName);
  struct Placed {
    std::string node;
    std::vector<std::string> moved;  // GPU ids moved to the node
  };
  std::vector<Placed> sim(requests.size());
  config.onPlace = [&](std::size_t job, kc::alloc::NodeIndex node, const std::vector<kc::alloc::GpuIndex>& moved,
                       const std::vector<kc::alloc::GpuIndex>&) {
    sim[job].node = cluster.node(node).name;
    for (auto g : moved) {
      sim[job].moved.push_back(cluster.gpu(g).id);
    }
  };
  auto result = kc::sim::simulate(cluster, trace, config);
  REQUIRE(result.ok());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    REQUIRE(result->jobs[i].start >= 0);  // every pod runs (none waits for another to end)
  }
  REQUIRE(result->gpusMoved > 0);  // the sequence exercises the reconfiguration path

  // The same cluster in the API: Nodes with allocatable = attached GPUs, GPUPool inventories.
  SchedCluster c;
  std::map<std::string, std::string> attachedTo;  // GPU id -> node ("" unattached)
  std::map<std::string, std::string> poolOf;      // GPU id -> pool
  for (kc::alloc::GpuIndex g = 0; g < cluster.gpuCount(); ++g) {
    const auto& gpu = cluster.gpu(g);
    attachedTo[gpu.id] = gpu.attached() ? cluster.node(gpu.node).name : "";
    poolOf[gpu.id] = cluster.pool(gpu.pool).name;
  }
  auto attachedCount = [&](const std::string& node) {
    std::int64_t n = 0;
    for (const auto& [id, at] : attachedTo) {
      n += at == node ? 1 : 0;
    }
    return n;
  };
  auto writePools = [&] {
    for (const std::string pool : {"p0", "p1"}) {
      std::vector<PoolGpu> gpus;
      for (const auto& [id, at] : attachedTo) {
        if (poolOf[id] == pool) {
          gpus.push_back({id, at});
        }
      }
      c.setPoolGpus(pool, gpus);
    }
  };
  for (kc::alloc::NodeIndex n = 0; n < cluster.nodeCount(); ++n) {
    c.node(cluster.node(n).name, {.gpus = attachedCount(cluster.node(n).name)});
  }
  c.pool("p0", {"n1", "n2", "n3"}, {});
  c.pool("p1", {"n4", "n5"}, {});
  writePools();
  auto o = c.options();
  o.cache.placement.policy = config.nodePolicy;
  auto s = c.startScheduler(o);

  for (std::size_t i = 0; i < requests.size(); ++i) {
    const std::string name = "job" + std::to_string(i);
    CAPTURE(name, sim[i].node, sim[i].moved.size());
    c.pod(name, {.gpus = requests[i]});
    REQUIRE(SchedCluster::eventually([&] {
      return !c.nodeOf(name).empty() || c.annotationOf(name, "kubecomp.io/dst-node") != "<none>";
    }));
    if (sim[i].moved.empty()) {
      CHECK(c.annotationOf(name, "kubecomp.io/dst-node") == "<none>");
      CHECK(c.nodeOf(name) == sim[i].node);
      continue;
    }
    CHECK(c.annotationOf(name, "kubecomp.io/dst-node") == sim[i].node);
    CHECK(c.annotationOf(name, "kubecomp.io/demand") == std::to_string(sim[i].moved.size()));
    // reconfig-mgr moves what the simulator moved; kubelets follow.
    std::set<std::string> touched = {sim[i].node};
    for (const auto& id : sim[i].moved) {
      if (!attachedTo[id].empty()) {
        touched.insert(attachedTo[id]);
      }
      attachedTo[id] = sim[i].node;
    }
    writePools();
    for (const auto& n : touched) {
      c.setAllocatableGpus(n, attachedCount(n));
    }
    REQUIRE(SchedCluster::eventually([&] { return !c.nodeOf(name).empty(); }));
    CHECK(c.nodeOf(name) == sim[i].node);
  }
}
