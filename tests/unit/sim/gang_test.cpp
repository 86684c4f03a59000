// Gangs and priorities in the simulator (issue 27): a gang is placed all together or not at
// all, its members start at one instant, the queue follows alloc::podBefore (priority, then
// arrival), traces without the new columns give the results they gave before, and bad column
// values are refused.
#include "libcore/alloc/gang.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tools/kubecomp-sim/cluster.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/report.hpp"
#include "tools/kubecomp-sim/trace_reader.hpp"
#include "tools/kubecomp-sim/workload.hpp"

using namespace kc::sim;
namespace alloc = kc::alloc;

namespace {

Job makeJob(const std::string& id, double arrivalS, std::uint32_t gpus, double durationS,
            std::uint32_t members = 1, std::int32_t priority = 0, double cpus = 1) {
  Job j;
  j.id = id;
  j.arrival = static_cast<SimMs>(arrivalS * kMsPerSecond);
  j.duration = static_cast<SimMs>(durationS * kMsPerSecond);
  j.gpus = gpus;
  j.cpuMilli = static_cast<std::int64_t>(cpus * 1000);
  j.members = members;
  j.priority = priority;
  return j;
}

alloc::ClusterState cluster(const std::string& layout, double cpus = 100, std::uint32_t pools = 1) {
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

}  // namespace

TEST_CASE("a gang starts when its last member's GPUs have landed, all members at once") {
  // 8+0 composable: one member fits on node 0's own GPUs at once, the other (150 of 100+100
  // CPUs forces two nodes) needs 4 GPUs moved to node 1, 4 x 10 s on the serial fabric.
  Trace t;
  t.jobs.push_back(makeJob("g", 0, 4, 100, 2, 0, 60));
  auto c = cluster("8+0");
  SimConfig cfg = config(alloc::Composability::Composable, 10);
  std::vector<alloc::NodeIndex> nodes;
  cfg.onPlace = [&](std::size_t job, alloc::NodeIndex node, const std::vector<alloc::GpuIndex>&,
                    const std::vector<alloc::GpuIndex>& gpus) {
    CHECK(job == 0);
    CHECK(gpus.size() == 4);
    nodes.push_back(node);
  };
  auto r = simulate(c, t, cfg);
  REQUIRE(r.ok());
  REQUIRE(nodes.size() == 2);
  CHECK(nodes[0] != nodes[1]);
  CHECK(r->jobs[0].start == 40'000);  // not 0: the member on node 0 waits for its partner
  CHECK(r->jobs[0].end == 140'000);
  CHECK(r->jobs[0].gpusMoved == 4);
  // No GPU ran a job before 40 s: the usage record has 0 GPUs busy for those 40 s, then 8.
  REQUIRE(r->usage.histogramMs.size() > 8);
  CHECK(r->usage.histogramMs[0] == 40'000);
  CHECK(r->usage.histogramMs[8] == 100'000);
  CHECK(r->usage.histogramMs[4] == 0);
}

TEST_CASE(
    "a gang that does not fit whole takes nothing and waits, later pods are not blocked "
    "by half a gang") {
  // 4+4 preconfigured. A 1-GPU job holds node 0 for 50 s; a gang of 2 x 4 GPUs cannot start
  // until it ends (node 1 alone would hold half the gang). Under greedy backfill a 1-GPU job
  // arriving behind the gang starts at once on node 0's free GPUs, so the gang took none.
  Trace t;
  t.jobs.push_back(makeJob("blocker", 0, 1, 50));
  t.jobs.push_back(makeJob("gang", 1, 4, 10, 2));
  t.jobs.push_back(makeJob("small", 2, 3, 10));
  auto c = cluster("4+4");
  std::vector<std::size_t> placed;
  SimConfig cfg = config(alloc::Composability::Preconfigured, 10, QueueDiscipline::Backfill);
  cfg.onPlace = [&](std::size_t job, alloc::NodeIndex, const std::vector<alloc::GpuIndex>&,
                    const std::vector<alloc::GpuIndex>&) { placed.push_back(job); };
  auto r = simulate(c, t, cfg);
  REQUIRE(r.ok());
  CHECK(r->jobs[0].start == 0);
  CHECK(r->jobs[2].start == 2'000);  // backfilled while the gang waited whole
  CHECK(r->jobs[1].start == 50'000);
  // Placements in order: blocker, small, then both gang members together.
  CHECK(placed == std::vector<std::size_t>{0, 2, 1, 1});
  // Stranded: from 1 s to 2 s 7 GPUs free, from 2 s to 12 s 4, from 12 s to 50 s 7.
  CHECK(r->strandedGpuMs == Approx(7'000.0 + 40'000.0 + 266'000.0));
}

TEST_CASE("a gang larger than the cluster can ever hold is rejected at arrival") {
  Trace t;
  t.jobs.push_back(makeJob("too-big", 0, 4, 10, 3));           // 12 GPUs on 8
  t.jobs.push_back(makeJob("cpu-split", 0, 2, 10, 2, 0, 80));  // fits: one member per node
  t.jobs.push_back(makeJob("cpu-bound", 0, 1, 10, 3, 0, 80));  // 3 x 80 CPUs on 2 x 100
  auto c = cluster("4+4");
  auto r = simulate(c, t, config(alloc::Composability::Preconfigured, 10));
  REQUIRE(r.ok());
  CHECK(r->rejected == 2);
  CHECK(r->jobs[0].rejected());
  CHECK_FALSE(r->jobs[1].rejected());
  CHECK(r->jobs[2].rejected());
  const auto summary = summaryJson(t, *r);
  CHECK(summary["gangs"]["gangs"] == 3);
  CHECK(summary["gangs"]["members"] == 8);
  CHECK(summary["gangs"]["rejected"] == 2);
}

TEST_CASE("random gang workloads: every gang all or nothing, no GPU used twice at once") {
  const alloc::Composability modes[] = {alloc::Composability::Composable,
                                        alloc::Composability::Preconfigured};
  const QueueDiscipline queues[] = {QueueDiscipline::Fcfs, QueueDiscipline::Backfill};
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    WorkloadSpec spec;
    spec.mix = *mixByName("custom:2,2,1,1,0");
    spec.jobs = 60;
    spec.seed = seed;
    spec.gangShare = 0.5;
    spec.gangMembers = seed % 2 ? 2 : 3;
    spec.priorityLevels = 3;
    auto t = generateWorkload(spec);
    REQUIRE(t.ok());
    for (auto mode : modes) {
      for (auto queue : queues) {
        auto c = cluster("4+4", 192, 2);
        std::map<std::size_t, std::vector<std::vector<alloc::GpuIndex>>> members;
        std::size_t last = SIZE_MAX;
        std::size_t interleaved = 0;
        SimConfig cfg = config(mode, 19.5, queue);
        if (seed % 3 == 0 && mode == alloc::Composability::Composable) {
          cfg.recompose = alloc::RecomposeKind::IdleGather;
        }
        cfg.onPlace = [&](std::size_t job, alloc::NodeIndex, const std::vector<alloc::GpuIndex>&,
                          const std::vector<alloc::GpuIndex>& gpus) {
          if (job != last && members.count(job)) {
            ++interleaved;  // a job's members placed in two separate passes
          }
          last = job;
          members[job].push_back(gpus);
        };
        auto r = simulate(c, *t, cfg);
        REQUIRE(r.ok());
        CHECK(interleaved == 0);
        for (std::size_t i = 0; i < t->jobs.size(); ++i) {
          const Job& job = t->jobs[i];
          INFO("seed " << seed << " job " << job.id);
          if (r->jobs[i].rejected()) {
            CHECK(members.count(i) == 0);  // a rejected gang never took a GPU
            continue;
          }
          REQUIRE(members.count(i) == 1);
          CHECK(members[i].size() == job.members);
          for (const auto& g : members[i]) {
            CHECK(g.size() == job.gpus);
          }
        }
        // No GPU serves two jobs whose run intervals overlap.
        std::map<alloc::GpuIndex, std::vector<std::pair<SimMs, SimMs>>> use;
        for (const auto& [job, lists] : members) {
          std::set<alloc::GpuIndex> own;
          for (const auto& g : lists) {
            for (alloc::GpuIndex x : g) {
              CHECK(own.insert(x).second);  // distinct within the gang
              use[x].emplace_back(r->jobs[job].start, r->jobs[job].end);
            }
          }
        }
        for (auto& [gpu, spans] : use) {
          std::sort(spans.begin(), spans.end());
          for (std::size_t k = 1; k < spans.size(); ++k) {
            CHECK(spans[k].first >= spans[k - 1].second);
          }
        }
      }
    }
  }
}

TEST_CASE("the queue follows podBefore: higher priority first, then arrival") {
  // One GPU. "run" holds it until 100 s; then the waiting jobs start one after another, by
  // priority, equal priorities by arrival.
  Trace t;
  t.jobs.push_back(makeJob("run", 0, 1, 100));
  t.jobs.push_back(makeJob("low-early", 1, 1, 10, 1, 0));
  t.jobs.push_back(makeJob("high", 2, 1, 10, 1, 5));
  t.jobs.push_back(makeJob("mid-a", 3, 1, 10, 1, 3));
  t.jobs.push_back(makeJob("mid-b", 4, 1, 10, 1, 3));
  t.jobs.push_back(makeJob("negative", 5, 1, 10, 1, -7));
  t.jobs.push_back(makeJob("low-late", 6, 1, 10, 1, 0));
  auto c = cluster("1");
  for (auto q : {QueueDiscipline::Fcfs, QueueDiscipline::Backfill, QueueDiscipline::EasyBackfill}) {
    auto r = simulate(c, t, config(alloc::Composability::Preconfigured, 10, q));
    REQUIRE(r.ok());
    CHECK(r->jobs[2].start == 100'000);  // high
    CHECK(r->jobs[3].start == 110'000);  // mid-a
    CHECK(r->jobs[4].start == 120'000);  // mid-b
    CHECK(r->jobs[1].start == 130'000);  // low-early
    CHECK(r->jobs[6].start == 140'000);  // low-late
    CHECK(r->jobs[5].start == 150'000);  // negative
    const auto summary = summaryJson(t, *r);
    CHECK(summary["priorities"]["5"]["jobs"] == 1);
    CHECK(summary["priorities"]["5"]["mean_wait_s"] == Approx(98.0));
    CHECK_FALSE(summary.contains("gangs"));
  }
}

TEST_CASE("a high-priority gang goes before earlier pods") {
  Trace t;
  t.jobs.push_back(makeJob("run", 0, 8, 100));
  t.jobs.push_back(makeJob("pod", 1, 1, 10));
  t.jobs.push_back(makeJob("gang", 2, 4, 10, 2, 1));
  auto c = cluster("8+0");
  auto r = simulate(c, t, config(alloc::Composability::Preconfigured, 10));
  REQUIRE(r.ok());
  CHECK(r->jobs[2].start == 100'000);
  CHECK(r->jobs[1].start == 110'000);
}

TEST_CASE("traces without members and priority give the results they gave before") {
  const std::string plain =
      "id,arrival_s,duration_s,gpus,cpu\n"
      "a,0,300,4,40\nb,10,200,2,80\nc,20,100,8,40\nd,25,50,1,80\ne,30,300,3,40\n";
  const std::string withDefaults =
      "id,arrival_s,duration_s,gpus,cpu,members,priority\n"
      "a,0,300,4,40,1,0\nb,10,200,2,80,,\nc,20,100,8,40,1,\nd,25,50,1,80,,0\ne,30,300,3,40,1,0\n";
  std::istringstream in1(plain);
  std::istringstream in2(withDefaults);
  auto t1 = readJobCsv(in1, "plain");
  auto t2 = readJobCsv(in2, "defaults");
  REQUIRE(t1.ok());
  REQUIRE(t2.ok());
  auto c = cluster("4+4", 192);
  for (auto mode : {alloc::Composability::Composable, alloc::Composability::Preconfigured}) {
    auto r1 = simulate(c, t1->trace, config(mode, 19.5));
    auto r2 = simulate(c, t2->trace, config(mode, 19.5));
    REQUIRE(r1.ok());
    REQUIRE(r2.ok());
    std::ostringstream o1;
    std::ostringstream o2;
    writeJobOutcomes(o1, t1->trace, *r1, c);
    writeJobOutcomes(o2, t2->trace, *r2, c);
    CHECK(o1.str() == o2.str());
    CHECK(summaryJson(t1->trace, *r1).dump() == summaryJson(t2->trace, *r2).dump());
    CHECK_FALSE(summaryJson(t1->trace, *r1).contains("gangs"));
    CHECK(r1->strandedGpuMs == 0);
  }
  // The written trace keeps its old header when nothing is a gang or has a priority.
  std::ostringstream w;
  writeJobCsv(w, t2->trace);
  CHECK(w.str().rfind("id,arrival_s,duration_s,gpus,cpu,memory_mib\n", 0) == 0);
  // A generated workload without gangs or priorities is the one generated before them.
  WorkloadSpec spec;
  spec.mix = *mixByName("w3");
  spec.jobs = 40;
  auto a = generateWorkload(spec);
  spec.gangShare = 0.25;
  auto b = generateWorkload(spec);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::size_t gangs = 0;
  for (std::size_t i = 0; i < a->jobs.size(); ++i) {
    CHECK(a->jobs[i].members == 1);
    CHECK(a->jobs[i].arrival == b->jobs[i].arrival);
    CHECK(a->jobs[i].gpus == b->jobs[i].gpus);
    gangs += b->jobs[i].members == 4 ? 1 : 0;
  }
  CHECK(gangs == 10);
}

TEST_CASE("members and priority round-trip through the job CSV") {
  std::istringstream in(
      "id,arrival_s,duration_s,gpus,members,priority\n"
      "g,0,10,2,4,-3\np,1,10,1,1,2000000000\n");
  auto t = readJobCsv(in, "gangs");
  REQUIRE(t.ok());
  REQUIRE(t->trace.jobs.size() == 2);
  CHECK(t->trace.jobs[0].members == 4);
  CHECK(t->trace.jobs[0].priority == -3);
  CHECK(t->trace.jobs[0].totalGpus() == 8);
  CHECK(t->trace.jobs[1].priority == 2'000'000'000);
  std::ostringstream w;
  writeJobCsv(w, t->trace);
  std::istringstream back(w.str());
  auto t2 = readJobCsv(back, "written");
  REQUIRE(t2.ok());
  CHECK(t2->trace.jobs[0].members == 4);
  CHECK(t2->trace.jobs[0].priority == -3);
  CHECK(t2->trace.jobs[1].priority == 2'000'000'000);
}

TEST_CASE("bad members and priority values are refused with the line and the value") {
  struct Case {
    std::string row;
    std::string message;
  };
  const Case cases[] = {
      {"0,10,1,0,0", "members is not an integer in 1..1024: '0'"},
      {"0,10,1,1025,0", "members is not an integer in 1..1024: '1025'"},
      {"0,10,1,-2,0", "members is not an integer in 1..1024: '-2'"},
      {"0,10,1,two,0", "members is not an integer in 1..1024: 'two'"},
      {"0,10,1,1.5,0", "members is not an integer in 1..1024: '1.5'"},
      {"0,10,1,1,2147483648",
       "priority is not an integer in -2147483648..2147483647: '2147483648'"},
      {"0,10,1,1,-2147483649",
       "priority is not an integer in -2147483648..2147483647: '-2147483649'"},
      {"0,10,1,1,high", "priority is not an integer in -2147483648..2147483647: 'high'"},
      {"0,10,1,1,\x1b[31m", "priority is not an integer in -2147483648..2147483647: '\\x1b[31m'"},
  };
  for (const Case& c : cases) {
    std::istringstream in("arrival_s,duration_s,gpus,members,priority\n" + c.row + "\n");
    auto t = readJobCsv(in, "bad.csv");
    INFO(c.row);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message.find("bad.csv:2") != std::string::npos);
    CHECK(t.error().message.find(c.message) != std::string::npos);
  }
  // The engine refuses what a reader would: members out of range, gangs on a reservation queue.
  auto cl = cluster("4+4");
  Trace zero;
  zero.jobs.push_back(makeJob("z", 0, 1, 10, 0));
  auto r = simulate(cl, zero, config(alloc::Composability::Composable, 10));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("has 0 members (1..1024)") != std::string::npos);
  Trace gang;
  gang.jobs.push_back(makeJob("g", 0, 1, 10, 2));
  auto e = simulate(cl, gang,
                    config(alloc::Composability::Composable, 10, QueueDiscipline::EasyBackfill));
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().message.find("fcfs or backfill queue only") != std::string::npos);
  // The generator's options.
  WorkloadSpec spec;
  spec.mix = *mixByName("w1");
  spec.gangShare = 1.5;
  CHECK_FALSE(generateWorkload(spec).ok());
  spec.gangShare = 0.5;
  spec.gangMembers = 1;
  CHECK_FALSE(generateWorkload(spec).ok());
  spec.gangMembers = 2;
  spec.priorityLevels = 0;
  CHECK_FALSE(generateWorkload(spec).ok());
}

TEST_CASE("multi-GPU jobs become gangs of one-GPU members") {
  Trace t;
  t.jobs.push_back(makeJob("one", 0, 1, 10, 1, 0, 3));
  t.jobs.push_back(makeJob("eight", 0, 8, 10, 1, 0, 9));
  t.jobs.push_back(makeJob("gang", 0, 2, 10, 3, 0, 1));
  t.jobs[1].memoryMib = 1001;
  CHECK(gangsFromMultiGpu(t) == 1);
  CHECK(t.jobs[0].members == 1);
  CHECK(t.jobs[1].members == 8);
  CHECK(t.jobs[1].gpus == 1);
  CHECK(t.jobs[1].cpuMilli == 1125);
  CHECK(t.jobs[1].memoryMib == 126);
  CHECK(t.jobs[2].members == 3);  // already a gang: unchanged
  CHECK(t.jobs[2].gpus == 2);
  // On 4+4 preconfigured the 8-GPU job runs only as a gang (4 + 4 members).
  auto c = cluster("4+4");
  auto r = simulate(c, t, config(alloc::Composability::Preconfigured, 10));
  REQUIRE(r.ok());
  CHECK_FALSE(r->jobs[1].rejected());
}

TEST_CASE("the simulator places a gang where kubecomp-sched's gang planner does") {
  // One rule, two callers: a gang arriving on a cluster is placed by the simulator on the nodes,
  // with the GPU moves, that alloc::GangPlanner (kubecomp-sched's call, members placed by
  // placePod) plans on the same cluster; a gang the planner cannot place is rejected by the
  // simulator (nothing else runs, so it could never start).
  struct Shape {
    std::uint32_t members;
    std::uint32_t gpus;
    std::uint64_t cpuMilli;  // per member, of 64 cores per node
  };
  const Shape shape =
      GENERATE(Shape{2, 1, 1000}, Shape{2, 3, 1000}, Shape{3, 2, 40'000}, Shape{4, 1, 40'000},
               Shape{3, 3, 1000}, Shape{5, 2, 30'000}, Shape{4, 3, 1000}, Shape{3, 4, 1000});
  const std::string gpuPolicy = GENERATE(as<std::string>{}, "unattached-first", "chassis-spread");
  const std::string nodePolicy = GENERATE(as<std::string>{}, "eq1", "least-demand");
  CAPTURE(shape.members, shape.gpus, shape.cpuMilli, gpuPolicy, nodePolicy);
  alloc::test::ClusterBuilder b;
  b.pool("p0").node("n1", 2).node("n2", 0).node("n3", 1).unattached(3);
  b.pool("p1").node("n4", 3).node("n5", 0).unattached(1);
  const alloc::ClusterState cluster = b.build();

  SimConfig cfg = config(alloc::Composability::Composable, 10);
  cfg.nodePolicy = *alloc::findNodePolicy(nodePolicy);
  cfg.gpuPolicy = *alloc::findGpuPolicy(gpuPolicy);
  Trace t;
  Job job = makeJob("g", 0, shape.gpus, 100, shape.members, 0,
                    static_cast<double>(shape.cpuMilli) / 1000);
  job.memoryMib = 1;
  t.jobs.push_back(job);
  struct Placed {
    alloc::NodeIndex node;
    std::vector<alloc::GpuIndex> moved;
  };
  std::vector<Placed> sim;
  cfg.onPlace = [&](std::size_t, alloc::NodeIndex node, const std::vector<alloc::GpuIndex>& moved,
                    const std::vector<alloc::GpuIndex>&) {
    sim.push_back({node, moved});
  };
  auto r = simulate(cluster, t, cfg);
  REQUIRE(r.ok());

  // The same cluster as kubecomp-sched sees it: Nodes with the CPU and memory, no pods yet.
  std::vector<alloc::SchedNode> nodes;
  for (alloc::NodeIndex n = 0; n < cluster.nodeCount(); ++n) {
    alloc::SchedNode node;
    node.name = cluster.node(n).name;
    node.labels["kubernetes.io/hostname"] = node.name;
    node.allocatable.milliCpu = 64'000;
    node.allocatable.memory = std::int64_t{256} << 30;
    node.allocatablePods = 110;
    nodes.push_back(node);
  }
  const std::vector<alloc::NodeUsage> usage(nodes.size());
  std::vector<alloc::SchedPod> pods(shape.members);
  std::vector<const alloc::SchedPod*> members;
  for (std::uint32_t k = 0; k < shape.members; ++k) {
    pods[k].ns = "team";
    pods[k].name = "g-" + std::to_string(k);
    pods[k].schedulerName = "kubecomp-sched";
    alloc::ContainerRequest c;
    c.name = "main";
    c.requests.milliCpu = static_cast<std::int64_t>(shape.cpuMilli);
    c.requests.memory = 1 << 20;
    c.requests.scalar[std::string(alloc::kGpuResource)] = shape.gpus;
    pods[k].containers.push_back(std::move(c));
    members.push_back(&pods[k]);
  }
  alloc::GangOptions opts;
  opts.placement.policy = cfg.nodePolicy;
  opts.placement.mode = cfg.mode;
  opts.gpuPolicy = cfg.gpuPolicy;
  auto plan = alloc::GangPlanner{}.plan(members, nodes, usage, cluster, opts);
  if (!plan) {
    CAPTURE(plan.error().message);
    CHECK(r->jobs[0].rejected());
    CHECK(sim.empty());
    return;
  }
  CHECK_FALSE(r->jobs[0].rejected());
  REQUIRE(sim.size() == shape.members);
  for (std::uint32_t k = 0; k < shape.members; ++k) {
    CAPTURE(k);
    CHECK(sim[k].node == plan->placements[k].node);
    std::vector<alloc::GpuIndex> moved;
    for (const alloc::GangMove& m : plan->moves) {
      if (m.member == k) {
        moved.push_back(m.gpu);
      }
    }
    CHECK(sim[k].moved == moved);
  }
}
