// The planner's claims against a burst of pods (issue 24 §6): pods with equal creationTimestamps
// (1 s resolution) in the queue order kubecomp-sched shares (libcore/alloc/pod_order.hpp), and a
// GPU delivered to (or free on) a waiting pod's node never chosen as the source of another
// pod's move until that pod binds or stops waiting. The sequence is the one the random-pod
// oracle found: a GPU moved for one pod, then taken away for another pod a second later.

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/policy_registry.hpp"
#include "services/reconfig-mgr/move_planner.hpp"
#include "services/reconfig-mgr/pool_view.hpp"

using kc::reconfig::Deliveries;
using kc::reconfig::Journal;
using kc::reconfig::Move;
using kc::reconfig::MovePhase;
using kc::reconfig::PodInfo;
using kc::reconfig::PodPlan;
using nlohmann::json;

namespace {

constexpr int kBurst = 1'800'000'000;  // the creationTimestamp every pod of the burst shares

// GPU "c0.<id>" on chassis host port "c0/<port>" (nullopt: unattached).
struct G {
  std::string id;
  std::optional<std::string> port;
};

// Pool "pool-a": host01..host03 on chassis c0, host ports 1..3.
struct Pool {
  kc::reconfig::PoolSpec spec;
  kc::reconfig::PoolView view;
  std::vector<PodInfo> pods;
  Journal journal;
  Deliveries delivered;

  Pool() {
    json nodes = json::array();
    for (int i = 1; i <= 3; ++i) {
      nodes.push_back({{"name", "host0" + std::to_string(i)}, {"hostPort", std::to_string(i)}});
    }
    const json obj = {{"metadata", {{"name", "pool-a"}, {"generation", 1}}},
                      {"spec",
                       {{"chassis", {{{"name", "c0"}, {"driver", "h3"}, {"endpoint", "http://x"}}}},
                        {"nodes", nodes}}}};
    spec = *kc::reconfig::parsePoolSpec(obj, "kubecomp");
  }

  // The inventory now, with GPUs in use by pods per node.
  void inventory(
      const std::vector<G>& gpus,
      std::map<std::string, std::map<std::string, std::vector<std::string>>> inUse = {}) {
    kc::fabric::Inventory inv;
    for (const G& g : gpus) {
      kc::fabric::GpuInfo i;
      i.id = "c0." + g.id;
      i.chassis = "c0";
      i.localId = g.id;
      i.uuid = "GPU-" + g.id;
      i.model = "V100";
      if (g.port) {
        i.hostPort = "c0/" + *g.port;
      }
      inv.gpus.push_back(i);
    }
    kc::reconfig::UsageByNode usage;
    for (auto& [node, m] : inUse) {
      usage[node].inUse = std::move(m);
    }
    view = kc::reconfig::buildView(spec, inv, usage, journal, {});
  }

  kc::reconfig::PlanResult plan() {
    kc::reconfig::noteDeliveries(journal, pods, delivered);
    kc::reconfig::PlanInputs in;
    in.spec = &spec;
    in.view = &view;
    in.pods = &pods;
    in.active = &journal.active;
    in.policy = *kc::alloc::findGpuPolicy("unattached-first");
    in.delivered = &delivered;
    return kc::reconfig::planMoves(in);
  }

  // The planned move, carried out: the journal's history gains it Succeeded.
  void land(const Move& planned) {
    Move m = planned;
    m.phase = MovePhase::kSucceeded;
    journal.history.insert(journal.history.begin(), m);
  }

  PodInfo& pod(const std::string& name) {
    for (PodInfo& p : pods) {
      if (p.name == name) {
        return p;
      }
    }
    FAIL("no pod " << name);
    return pods.front();
  }
};

PodInfo waiting(const std::string& name, const std::string& dst, std::int64_t gpus,
                int createdSec = kBurst, std::int32_t priority = 0) {
  PodInfo p;
  p.ns = "default";
  p.name = name;
  p.uid = "uid-" + name;
  p.created = std::chrono::system_clock::time_point(std::chrono::seconds(createdSec));
  p.priority = priority;
  p.dstNode = dst;
  p.gpus = gpus;
  p.phase = "Pending";
  return p;
}

const PodPlan& planOf(const kc::reconfig::PlanResult& r, const std::string& pod) {
  for (const PodPlan& p : r.pods) {
    if (p.pod == "default/" + pod) {
      return p;
    }
  }
  FAIL("no plan for " << pod);
  return r.pods.front();
}

}  // namespace

TEST_CASE("planner: a GPU delivered for one pod of a burst is not taken for another",
          "[reconfig]") {
  // host03 has one free GPU (c0.1) and one in use. The scheduler annotates "pod-b" first
  // (host01, 1 GPU): c0.1 moves to host01 for it. A moment later it annotates "pod-a" (host02,
  // 1 GPU), created in the same second, so "pod-a" comes first in the queue order by name.
  // Nothing else is free: "pod-a" must wait, not take the GPU just delivered to "pod-b".
  Pool pool;
  pool.inventory({{"1", "3"}, {"2", "3"}}, {{"host03", {{"c0.2", {"default/running"}}}}});
  pool.pods.push_back(waiting("pod-b", "host01", 1));
  auto first = pool.plan();
  REQUIRE(first.next);
  CHECK(first.next->gpu == "c0.1");
  CHECK(first.next->toNode == "host01");
  pool.land(*first.next);
  pool.inventory({{"1", "1"}, {"2", "3"}}, {{"host03", {{"c0.2", {"default/running"}}}}});
  pool.pods.push_back(waiting("pod-a", "host02", 1));

  auto second = pool.plan();
  REQUIRE(second.pods.size() == 2);
  CHECK(second.pods[0].pod == "default/pod-a");  // same second: by name
  CHECK(planOf(second, "pod-b").verdict == PodPlan::Verdict::kSatisfied);
  CHECK(planOf(second, "pod-a").verdict == PodPlan::Verdict::kInsufficient);
  CHECK_FALSE(second.next);
  CHECK(second.claimed.count("c0.1") == 1);

  SECTION("bound: the pod's node claim keeps it") {
    pool.pod("pod-b").nodeName = "host01";
    auto bound = pool.plan();
    CHECK_FALSE(bound.next);
    CHECK(bound.claimed.count("c0.1") == 1);
  }
  SECTION("the request withdrawn (the scheduler's timeout or a cancelled reservation): free") {
    pool.pod("pod-b").dstNode.clear();
    auto withdrawn = pool.plan();
    REQUIRE(withdrawn.next);
    CHECK(withdrawn.next->gpu == "c0.1");
    CHECK(withdrawn.next->podName == "pod-a");
    CHECK(pool.delivered.empty());
  }
  SECTION("the pod deleted: free") {
    pool.pods.erase(pool.pods.begin());
    auto deleted = pool.plan();
    REQUIRE(deleted.next);
    CHECK(deleted.next->gpu == "c0.1");
  }
}

TEST_CASE("planner: a pod's delivered GPU stays its own while the pool cannot supply the rest",
          "[reconfig]") {
  // "big" needs 2 GPUs on host01; one was delivered, then the other free GPU went (lost, or
  // quarantined after a lying chassis): the pool cannot supply it now. Its delivered GPU is not
  // moved away for "small" (earlier in the queue) until its request ends.
  Pool pool;
  pool.inventory({{"1", "3"}, {"2", "3"}});
  pool.pods.push_back(waiting("big", "host01", 2, kBurst + 1));
  auto first = pool.plan();
  REQUIRE(first.starts.size() == 1);  // one chassis: one move at a time
  pool.land(*first.next);
  pool.inventory({{first.next->gpu.substr(3), "1"}});  // the other GPU is gone
  pool.pods.push_back(waiting("small", "host02", 1, kBurst));

  auto after = pool.plan();
  CHECK(planOf(after, "big").verdict == PodPlan::Verdict::kInsufficient);
  CHECK(planOf(after, "small").verdict == PodPlan::Verdict::kInsufficient);
  CHECK_FALSE(after.next);

  pool.pod("big").dstNode.clear();  // the scheduler cancels big's reservation
  auto freed = pool.plan();
  REQUIRE(freed.next);
  CHECK(freed.next->gpu == first.next->gpu);
  CHECK(freed.next->podName == "small");
}

TEST_CASE("planner: waiting pods are taken by priority, then age, then name", "[reconfig]") {
  // One free GPU on host01, one on host03. Two pods want one GPU on host01: the one of higher
  // priority holds host01's GPU though it is newer; the older one gets the move.
  Pool pool;
  pool.inventory({{"1", "1"}, {"2", "3"}});
  pool.pods.push_back(waiting("old", "host01", 1, kBurst - 5, 0));
  pool.pods.push_back(waiting("urgent", "host01", 1, kBurst, 1000));
  auto plan = pool.plan();
  REQUIRE(plan.pods.size() == 2);
  CHECK(plan.pods[0].pod == "default/urgent");
  CHECK(plan.pods[0].verdict == PodPlan::Verdict::kSatisfied);
  REQUIRE(plan.next);
  CHECK(plan.next->podName == "old");
  CHECK(plan.next->gpu == "c0.2");
}

TEST_CASE("planner: an older pod may still draw on the node of a pod the pool cannot serve",
          "[reconfig]") {
  // host02 has two free GPUs, host03 one. "first" wants 3 on host01; "second" (newer) wants 4
  // on host02, which the pool cannot supply. "second" holds no claim, so "first" is served from
  // host02 and host03, as in one FCFS pass.
  Pool pool;
  pool.inventory({{"1", "2"}, {"2", "2"}, {"3", "3"}});
  pool.pods.push_back(waiting("first", "host01", 3, kBurst));
  pool.pods.push_back(waiting("second", "host02", 4, kBurst + 1));
  auto plan = pool.plan();
  CHECK(planOf(plan, "first").verdict == PodPlan::Verdict::kMoving);
  CHECK(planOf(plan, "first").sources.size() == 3);
  CHECK(planOf(plan, "second").verdict == PodPlan::Verdict::kInsufficient);
}

TEST_CASE("planner: deliveries follow the journal and end with the pod's wait", "[reconfig]") {
  Journal j;
  auto record = [](const std::string& gpu, const std::string& uid, const std::string& to,
                   MovePhase phase) {
    Move m;
    m.gpu = gpu;
    m.toNode = to;
    m.podNamespace = "default";
    m.podName = uid.substr(4);
    m.podUid = uid;
    m.phase = phase;
    return m;
  };
  j.history = {record("c0.1", "uid-p", "host02", MovePhase::kSucceeded),  // newest
               record("c0.1", "uid-q", "host01", MovePhase::kSucceeded),
               record("c0.2", "uid-p", "host02", MovePhase::kFailed)};
  std::vector<PodInfo> pods = {waiting("p", "host02", 2), waiting("q", "host01", 1)};
  Deliveries d;
  kc::reconfig::noteDeliveries(j, pods, d);
  CHECK(d == Deliveries{{"c0.1", {"uid-p", "host02"}}});
  // Kept once the record leaves the journal's window, while the pod waits for that node.
  j.history.clear();
  kc::reconfig::noteDeliveries(j, pods, d);
  CHECK(d.size() == 1);
  pods[0].dstNode = "host03";  // asked again, for another node
  kc::reconfig::noteDeliveries(j, pods, d);
  CHECK(d.empty());
}
