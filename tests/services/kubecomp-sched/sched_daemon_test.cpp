// kubecomp-sched against the API test double: the Scheduler library with its informers, queue,
// reservations and leader election, the test playing kubelet (Node allocatable) and
// reconfig-mgr (GPUPool status). Each case is a weakness of the original
// KubeComp scheduler (docs/sched.md) or a rule of issue 12.

#include <catch2/catch.hpp>

#include "libcore/base/rfc3339.hpp"
#include "tests/services/kubecomp-sched/sched_cluster.hpp"

using namespace std::chrono_literals;
using kc::testing::NodeOpts;
using kc::testing::PodOpts;
using kc::testing::PoolGpu;
using kc::testing::SchedCluster;
using nlohmann::json;

TEST_CASE(
    "the GPU request sums every container and maxes init containers (the original read container "
    "0)",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 2});
  c.node("n2", {.gpus = 4});
  c.pool("p0", {"n1", "n2"},
         {{"c0.1", "n1"},
          {"c0.2", "n1"},
          {"c0.3", "n2"},
          {"c0.4", "n2"},
          {"c0.5", "n2"},
          {"c0.6", "n2"}});
  auto s = c.startScheduler(c.options());
  // Container 0 asks 1 GPU, a second container 2, an init container 3: the pod needs 3.
  // Reading container 0 alone, best-fit would pick n1 (1 of 2); with 3 only n2 fits without a move.
  PodOpts o{.gpus = 1};
  o.extraContainers = json::array({{{"name", "side"},
                                    {"image", "busybox"},
                                    {"resources",
                                     {{"requests", kc::testing::gpuLimits(2, "1")},
                                      {"limits", kc::testing::gpuLimits(2, "1")}}}}});
  o.initContainers = json::array({{{"name", "init"},
                                   {"image", "busybox"},
                                   {"resources",
                                    {{"requests", kc::testing::gpuLimits(3, "1")},
                                     {"limits", kc::testing::gpuLimits(3, "1")}}}}});
  c.pod("three", o);
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("three").empty(); }));
  CHECK(c.nodeOf("three") == "n2");
  CHECK(c.annotationOf("three", "kubecomp.io/dst-node") == "<none>");
  REQUIRE(kc::testing::eventually([&] { return !c.events("three", "Scheduled").empty(); }));
  CHECK(c.events("three", "Scheduled").front().first == "Successfully assigned team/three to n2");
  // Eq. 1 best-fit for a 1-GPU pod: n1 (2 free) over n2 (1 free left).
  c.pod("one", {.gpus = 1});
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("one").empty(); }));
  CHECK(c.nodeOf("one") == "n2");  // n2 now has 1 free: req/avail = 100 beats 50 on n1
  // Pods of other schedulers are left alone but counted.
  c.pod("other", {.gpus = 0, .scheduler = "default-scheduler"});
  std::this_thread::sleep_for(300ms);
  CHECK(c.nodeOf("other").empty());
}

TEST_CASE(
    "unschedulable: PodScheduled=False and FailedScheduling in kube-scheduler's words, retried "
    "after backoff",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.node("n2", {.gpus = 0});
  c.pool("p0", {"n1", "n2"}, {});
  auto s = c.startScheduler(c.options());
  c.pod("picky", {.nodeSelector = {{"disk", "ssd"}}});
  REQUIRE(kc::testing::eventually([&] { return c.condition("picky").is_object(); }));
  json cond = c.condition("picky");
  CHECK(cond["status"] == "False");
  CHECK(cond["reason"] == "Unschedulable");
  const std::string picky =
      "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. preemption: "
      "0/2 nodes are available: 2 Preemption is not helpful for scheduling.";
  CHECK(cond["message"] == picky);
  REQUIRE(kc::testing::eventually([&] { return !c.events("picky", "FailedScheduling").empty(); }));
  CHECK(c.events("picky", "FailedScheduling").front().first == picky);
  // Retries (every 100-400 ms) send the event again but never rewrite the same condition: the
  // original patched every pod on every attempt.
  const std::string rv = c.getPod("picky")["metadata"]["resourceVersion"];
  REQUIRE(kc::testing::eventually(
      [&] {
        auto e = c.events("picky", "FailedScheduling");
        return !e.empty() && e.front().second >= 7;  // about 2 s of retries: past a second boundary
      },
      10s));
  CHECK(c.getPod("picky")["metadata"]["resourceVersion"] == rv);
  // A GPU pod the pool cannot serve: the pool reason is counted beside the others.
  c.pod("greedy", {.gpus = 3});
  REQUIRE(kc::testing::eventually([&] { return c.condition("greedy").is_object(); }));
  CHECK(c.condition("greedy")["message"] ==
        "0/2 nodes are available: 2 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
  // The node gets the label: the next retry (backoff 100-400 ms) binds.
  c.labelNode("n2", "disk", "ssd");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("picky").empty(); }, 5s));
  CHECK(c.nodeOf("picky") == "n2");
  CHECK(c.nodeOf("greedy").empty());
}

TEST_CASE(
    "not enough GPUs: reserve, annotate, Reconfig event, the queue goes on, bind once allocatable "
    "shows them",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.node("n2", {.gpus = 1});
  c.pool("p0", {"n1", "n2"}, {{"c0.1", "n1"}, {"c0.2", "n2"}, {"c0.3", ""}, {"c0.4", ""}});
  auto s = c.startScheduler(c.options());
  c.pod("big", {.gpus = 2});
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("big", "kubecomp.io/dst-node") != "<none>"; }));
  // Least-demand, tie broken by name: n1, one GPU to add.
  CHECK(c.annotationOf("big", "kubecomp.io/dst-node") == "n1");
  CHECK(c.annotationOf("big", "kubecomp.io/demand") == "1");
  REQUIRE(kc::testing::eventually([&] { return !c.events("big", "Reconfig").empty(); }));
  CHECK(c.events("big", "Reconfig").front().first ==
        "Pod team/big needs reconfiguration: 1 kubecomp.io/gpu to attach to node n1");
  REQUIRE(kc::testing::eventually([&] { return c.condition("big").is_object(); }));
  CHECK(c.condition("big")["reason"] == "WaitingForReconfiguration");
  // The original slept inside Permit and froze the loop: here the next pod binds at once, and
  // not onto n1's GPU, which is held for "big".
  c.pod("small", {.gpus = 1});
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("small").empty(); }, 3s));
  CHECK(c.nodeOf("small") == "n2");
  // A third pod finds n1's GPU and the unattached ones promised: it must wait for a move too,
  // on a node where the promised GPUs are not counted twice.
  c.pod("third", {.gpus = 1});
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("third", "kubecomp.io/dst-node") != "<none>"; }));
  CHECK(c.annotationOf("third", "kubecomp.io/demand") == "1");
  // reconfig-mgr moves c0.3 to n1: the inventory says so, kubelet does not yet.
  c.setPoolGpus("p0", {{"c0.1", "n1"}, {"c0.2", "n2", "", true}, {"c0.3", "n1"}, {"c0.4", ""}});
  std::this_thread::sleep_for(300ms);
  CHECK(c.nodeOf("big").empty());  // kubelet would reject it: allocatable still shows 1
  c.setAllocatableGpus("n1", 2);
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("big").empty(); }, 3s));
  CHECK(c.nodeOf("big") == "n1");
  CHECK(c.nodeOf("third").empty());
}

TEST_CASE("a reservation that times out clears its annotations and the pod is tried again",
          "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {{"c0.1", ""}});
  auto o = c.options();
  o.cache.reservationTimeout = 700ms;
  o.cache.initialBackoff = 2s;
  o.cache.maxBackoff = 2s;
  auto s = c.startScheduler(o);
  c.pod("w", {.gpus = 1});
  REQUIRE(
      kc::testing::eventually([&] { return c.annotationOf("w", "kubecomp.io/dst-node") == "n1"; }));
  // Nobody moves anything: after the timeout the request is withdrawn.
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("w", "kubecomp.io/dst-node") == "<none>"; }, 5s));
  CHECK(c.annotationOf("w", "kubecomp.io/demand") == "<none>");
  REQUIRE(kc::testing::eventually([&] { return !c.events("w", "FailedScheduling").empty(); }));
  CHECK(c.events("w", "FailedScheduling").front().first ==
        "node n1 did not show the 1 kubecomp.io/gpu the pod needs within 0s of the reconfiguration "
        "request; "
        "trying again");
  CHECK(c.nodeOf("w").empty());
  // After the backoff it asks again.
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("w", "kubecomp.io/dst-node") == "n1"; }, 5s));
}

TEST_CASE("restart mid-wait: the reservation is rebuilt from the annotations, no second request",
          "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.node("n2", {.gpus = 0});
  c.pool("p0", {"n1", "n2"}, {{"c0.1", ""}, {"c0.2", ""}});
  auto first = c.startScheduler(c.options("replica-a"));
  c.pod("w", {.gpus = 2});
  REQUIRE(
      kc::testing::eventually([&] { return c.annotationOf("w", "kubecomp.io/dst-node") == "n1"; }));
  REQUIRE(kc::testing::eventually([&] { return !c.events("w", "Reconfig").empty(); }));
  const std::string rv = c.getPod("w")["metadata"]["resourceVersion"];
  // The request says when it was made; the new leader's timeout continues from that time.
  REQUIRE(kc::parseRfc3339(c.annotationOf("w", "kubecomp.io/reserved-at")).ok());
  REQUIRE(first->cache().reservation("team/w").has_value());
  const auto deadline = first->cache().reservation("team/w")->deadline;
  first->stop();
  first.reset();
  auto second = c.startScheduler(c.options("replica-b"));
  REQUIRE(kc::testing::eventually([&] { return second->leading(); }, 5s));
  REQUIRE(
      kc::testing::eventually([&] { return second->cache().reservation("team/w").has_value(); }));
  CHECK(second->cache().reservation("team/w")->node == "n1");
  // The same deadline to the millisecond the reserved-at annotation carries (not a fresh one).
  const auto adopted = second->cache().reservation("team/w")->deadline;
  CHECK(std::chrono::abs(adopted - deadline) <= 2ms);
  // A 1-GPU pod meanwhile must not take the two promised GPUs: it waits for a move of its own
  // elsewhere... but the pool has none left, so it is unschedulable.
  c.pod("late", {.gpus = 1});
  REQUIRE(kc::testing::eventually([&] { return c.condition("late").is_object(); }));
  CHECK(c.condition("late")["reason"] == "Unschedulable");
  std::this_thread::sleep_for(300ms);
  auto reconfig = c.events("w", "Reconfig");
  REQUIRE(reconfig.size() == 1);
  CHECK(reconfig.front().second == 1);  // not re-sent (the recorder would have counted 2)
  json w = c.getPod("w");
  CHECK(w["metadata"]["annotations"]["kubecomp.io/dst-node"] == "n1");
  CHECK(c.annotationOf("w", "kubecomp.io/demand") == "2");
  (void)rv;
  // reconfig-mgr finishes; the new leader binds.
  c.setPoolGpus("p0", {{"c0.1", "n1"}, {"c0.2", "n1"}});
  c.setAllocatableGpus("n1", 2);
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("w").empty(); }, 5s));
  CHECK(c.nodeOf("w") == "n1");
}

TEST_CASE("two replicas: one leads and binds, the other takes over when it goes", "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {});
  // Lease timings with room for a loaded 2-core machine (a renewal late by a second must not
  // hand the lease over in the middle of the test).
  auto options = [&](const std::string& id) {
    auto o = c.options(id);
    o.lease.leaseDuration = 4s;
    o.lease.renewDeadline = 3s;
    o.lease.retryPeriod = 500ms;
    return o;
  };
  auto a = c.startScheduler(options("replica-a"));
  auto b = c.startScheduler(options("replica-b"));
  REQUIRE(kc::testing::eventually([&] { return a->leading() || b->leading(); }, 10s));
  for (int i = 0; i < 20; ++i) {
    c.pod("p" + std::to_string(i));
    CHECK_FALSE((a->leading() && b->leading()));
  }
  REQUIRE(kc::testing::eventually([&] {
    CHECK_FALSE((a->leading() && b->leading()));
    for (int i = 0; i < 20; ++i) {
      if (c.nodeOf("p" + std::to_string(i)).empty()) {
        return false;
      }
    }
    return true;
  }));
  // Every pod bound once, by whoever led at the time; nobody had a binding refused (which is
  // what two replicas binding at once would cause).
  CHECK(a->counters().bound + b->counters().bound == 20);
  CHECK(a->counters().bindFailures + b->counters().bindFailures == 0);
  auto& leader = a->leading() ? a : b;
  auto& standby = a->leading() ? b : a;
  const auto before = standby->counters().bound;
  leader->stop();
  REQUIRE(kc::testing::eventually([&] { return standby->leading(); }, 15s));
  c.pod("after");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("after").empty(); }));
  // The counter follows the API's answer on the worker thread: wait for it, not for the pod.
  CHECK(kc::testing::eventually([&] { return standby->counters().bound == before + 1; }));
}

TEST_CASE(
    "bad input: a malformed request annotation or GPU model list gets a clear event and nothing is "
    "bound",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.pool("p0", {"n1"}, {{"c0.1", "n1"}});
  auto s = c.startScheduler(c.options());
  c.pod("models", {.gpus = 1, .annotations = {{"kubecomp.io/gpu-models", "A100,,H100"}}});
  REQUIRE(kc::testing::eventually([&] { return !c.events("models", "FailedScheduling").empty(); }));
  const std::string msg = c.events("models", "FailedScheduling").front().first;
  CHECK_THAT(msg, Catch::StartsWith("pod cannot be scheduled: "));
  CHECK_THAT(msg, Catch::Contains("kubecomp.io/gpu-models"));
  // Someone wrote a request by hand with a bad demand: refused, removed, then scheduled normally.
  c.pod(
      "handmade",
      {.gpus = 1, .annotations = {{"kubecomp.io/dst-node", "n1"}, {"kubecomp.io/demand", "lots"}}});
  REQUIRE(
      kc::testing::eventually([&] { return !c.events("handmade", "FailedScheduling").empty(); }));
  CHECK(c.events("handmade", "FailedScheduling").front().first ==
        "annotation kubecomp.io/demand 'lots' is not a whole number of GPUs (0-65535); the "
        "reconfiguration "
        "request is removed and the pod scheduled again");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("handmade").empty(); }, 5s));
  CHECK(c.nodeOf("handmade") == "n1");
  CHECK(c.annotationOf("handmade", "kubecomp.io/dst-node") == "<none>");
  // A request naming a node the pod cannot run on is never bound there.
  c.node(
      "tainted",
      {.gpus = 1,
       .taints = json::array({{{"key", "dedicated"}, {"value", "x"}, {"effect", "NoSchedule"}}})});
  c.pod("wrongnode",
        {.gpus = 0,
         .annotations = {{"kubecomp.io/dst-node", "tainted"}, {"kubecomp.io/demand", "0"}}});
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("wrongnode", "kubecomp.io/dst-node") == "<none>"; }, 5s));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("wrongnode").empty(); }, 5s));
  CHECK(c.nodeOf("wrongnode") == "n1");
  std::this_thread::sleep_for(200ms);
  CHECK(c.nodeOf("models").empty());
}

TEST_CASE(
    "a release retries the waiting pods at once and oldest first, not when their backoff ends",
    "[sched]") {
  SchedCluster c;
  c.node("n1", {.cpu = "4", .gpus = 0});
  c.pool("p0", {"n1"}, {});
  auto o = c.options();
  o.cache.initialBackoff = std::chrono::seconds(20);  // no timer retry within the test
  o.cache.maxBackoff = std::chrono::seconds(20);
  auto s = c.startScheduler(std::move(o));
  c.pod("holder", {.cpu = "4"});
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("holder") == "n1"; }));
  c.pod("first", {.cpu = "3"});
  REQUIRE(kc::testing::eventually([&] { return c.condition("first").is_object(); }));
  c.pod("second", {.cpu = "3"});
  REQUIRE(kc::testing::eventually([&] { return c.condition("second").is_object(); }));
  // The holder ends: its CPU is free, both waiting pods are tried at once, the older first.
  REQUIRE(c.client
              ->patch(kc::kube::gvr::pods(), "team", "holder", kc::kube::PatchType::kMerge,
                      {{"status", {{"phase", "Succeeded"}}}}, "status")
              .ok());
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("first").empty(); }, 5s));
  CHECK(c.nodeOf("first") == "n1");
  std::this_thread::sleep_for(300ms);
  CHECK(c.nodeOf("second").empty());  // 3 + 3 CPUs do not fit in 4
}

TEST_CASE("preconfigured mode: GPUs never move, a pod goes only where its GPUs are attached",
          "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.node("n2", {.gpus = 1});
  c.pool("p0", {"n1", "n2"}, {{"c0.1", "n1"}, {"c0.2", "n2"}, {"c0.3", ""}});
  auto o = c.options();
  o.cache.placement.mode = kc::alloc::Composability::Preconfigured;
  auto s = c.startScheduler(std::move(o));
  c.pod("two", {.gpus = 2});  // the pool could supply 2 by moving; preconfigured may not
  REQUIRE(kc::testing::eventually([&] { return c.condition("two").is_object(); }));
  CHECK(c.condition("two")["reason"] == "Unschedulable");
  CHECK(c.condition("two")["message"] ==
        "0/2 nodes are available: 2 Insufficient kubecomp.io/gpu. preemption: 0/2 nodes are "
        "available: 2 No preemption victims found for incoming pod.");
  CHECK(c.annotationOf("two", "kubecomp.io/dst-node") == "<none>");
  c.pod("one", {.gpus = 1});
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("one").empty(); }));
  std::this_thread::sleep_for(300ms);
  CHECK(c.nodeOf("two").empty());
}

TEST_CASE("a replica that loses the lease and wins it back schedules again", "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {});
  auto o = c.options("replica-a");
  o.lease.leaseDuration = 3s;
  o.lease.renewDeadline = 2s;
  o.lease.retryPeriod = 300ms;
  auto a = c.startScheduler(o);
  REQUIRE(kc::testing::eventually([&] { return a->leading(); }, 10s));
  // Someone else takes the Lease (as a replica on a partitioned node would), then goes silent.
  const kc::kube::GroupVersionResource leases = kc::kube::gvr::leases();
  auto lease = c.client->get(leases, "team", "kubecomp-sched");
  REQUIRE(lease.ok());
  json taken = *lease;
  taken["spec"]["holderIdentity"] = "intruder";
  taken["spec"]["leaseTransitions"] = taken["spec"].value("leaseTransitions", 0) + 1;
  REQUIRE(c.client->update(leases, "team", taken).ok());
  REQUIRE(kc::testing::eventually([&] { return !a->leading(); }, 10s));
  c.pod("meanwhile");
  // The intruder never renews: after the lease duration the replica leads again, and schedules.
  REQUIRE(kc::testing::eventually([&] { return a->leading(); }, 15s));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("meanwhile").empty(); }, 10s));
  c.pod("after");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("after").empty(); }, 10s));
}
