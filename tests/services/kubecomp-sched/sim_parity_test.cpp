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
    trace.jobs.push_back({"job" + std::to_string(i), static_cast<kc::sim::SimMs>(i) * 1000,
                          1'000'000'000, requests[i], 0, 1000, 1024});
  }
  kc::sim::SimConfig config = kc::sim::defaultSimConfig();
  config.nodePolicy = *kc::alloc::findNodePolicy(policyName);
  struct Placed {
    std::string node;
    std::vector<std::string> moved;  // GPU ids moved to the node
  };
  std::vector<Placed> sim(requests.size());
  config.onPlace = [&](std::size_t job, kc::alloc::NodeIndex node,
                       const std::vector<kc::alloc::GpuIndex>& moved,
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
    REQUIRE(kc::testing::eventually([&] {
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
    REQUIRE(kc::testing::eventually([&] { return !c.nodeOf(name).empty(); }));
    CHECK(c.nodeOf(name) == sim[i].node);
  }
}

// easy-backfill, one pass per arrival in both: the simulator (alloc::QueuePass hosted by the
// engine) and the daemon (the same pass hosted by its cache, run times from the annotation
// kubecomp.io/expected-runtime-seconds, the running pod's start from its bind, moves of
// --move-seconds) start the same pods, on the same nodes, and hold the same ones; the held pod,
// retried, keeps one Event.
TEST_CASE("easy-backfill: the daemon starts and holds the pods the simulator does", "[sched]") {
  kc::alloc::test::ClusterBuilder b;
  b.pool("p0").node("n1", 4).node("n2", 4);
  const kc::alloc::ClusterState cluster = b.build();
  struct Step {
    std::uint32_t gpus;
    std::int64_t runtimeS;
    const char* held;  // the daemon's PodScheduled reason when the pod does not start at once
  };
  const std::vector<Step> steps = {
      {4, 100, ""},                // runs on n1 until 100
      {8, 50, "Unschedulable"},    // the head: reserved at 100 + 4 moves x 10 s = 140
      {1, 30, ""},                 // ends before 100: backfilled
      {1, 500, "WaitingInQueue"},  // would delay the head
      {2, 40, ""},                 // ends before 100: backfilled
      {3, 10, "Unschedulable"},    // only one GPU free now
  };
  kc::sim::Trace trace;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    trace.jobs.push_back({"job" + std::to_string(i), static_cast<kc::sim::SimMs>(i) * 1000,
                          steps[i].runtimeS * 1000, steps[i].gpus, 0, 1000, 1024});
  }
  kc::sim::SimConfig config = kc::sim::defaultSimConfig();
  config.queue = kc::alloc::QueueDiscipline::EasyBackfill;
  config.moveTime = 10'000;
  std::vector<std::string> simNode(steps.size());
  config.onPlace =
      [&](std::size_t job, kc::alloc::NodeIndex node, const std::vector<kc::alloc::GpuIndex>&,
          const std::vector<kc::alloc::GpuIndex>&) { simNode[job] = cluster.node(node).name; };
  auto result = kc::sim::simulate(cluster, trace, config);
  REQUIRE(result.ok());

  SchedCluster c;
  c.node("n1", {.gpus = 4});
  c.node("n2", {.gpus = 4});
  c.pool("p0", {"n1", "n2"},
         {{"g1", "n1"},
          {"g2", "n1"},
          {"g3", "n1"},
          {"g4", "n1"},
          {"g5", "n2"},
          {"g6", "n2"},
          {"g7", "n2"},
          {"g8", "n2"}});
  auto o = c.options();
  o.cache.queue = *kc::alloc::findQueuePolicy("easy-backfill");
  o.cache.moveTime = 10s;
  auto s = c.startScheduler(o);
  auto reason = [&](const std::string& pod) {
    const auto cond = c.condition(pod);
    return cond.is_object() ? cond.value("reason", std::string()) : std::string();
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string name = "job" + std::to_string(i);
    const bool simStartsNow = result->jobs[i].start == trace.jobs[i].arrival;
    CAPTURE(name, simStartsNow, simNode[i]);
    CHECK(simStartsNow == (steps[i].held[0] == '\0'));  // the simulator does what the table says
    c.pod(name, {.gpus = steps[i].gpus,
                 .annotations = {
                     {"kubecomp.io/expected-runtime-seconds", std::to_string(steps[i].runtimeS)}}});
    REQUIRE(kc::testing::eventually([&] {
      return !c.nodeOf(name).empty() || reason(name) == "Unschedulable" ||
             reason(name) == "WaitingInQueue";
    }));
    if (simStartsNow) {
      CHECK(c.nodeOf(name) == simNode[i]);
    } else {
      CHECK(c.nodeOf(name).empty());
      CHECK(reason(name) == steps[i].held);
    }
  }
  // The held pod is retried (backoff 100-400 ms) and held again, with one Event, not one a retry.
  const auto heldBefore = s->cache().queueStats().held;
  REQUIRE(kc::testing::eventually([&] { return s->cache().queueStats().held >= heldBefore + 3; }));
  CHECK(c.nodeOf("job3").empty());
  const auto held = c.events("job3", "WaitingInQueue");
  REQUIRE(held.size() == 1);
  CHECK(held.front().second == 1);
  CHECK(held.front().first.find(
            "waiting behind the queue head team/job1, reserved on node n1 from ") == 0);
  CHECK(s->cache().queueStats().head == "team/job1");
  CHECK(s->cache().queueStats().backfilled == 2);
}
