// Pod Scheduling Readiness with kubecomp-sched against the API test double (issue 27): a pod
// held by a scheduling gate (here Kueue's, kueue.x-k8s.io/admission) gets nothing from the
// scheduler, no node, no GPU request to reconfig-mgr, no condition, no Event, while pods
// behind it are scheduled; once the gate is removed it is scheduled like any other pod, GPU
// moves included.

#include <catch2/catch.hpp>

#include "tests/services/kubecomp-sched/sched_cluster.hpp"

using namespace std::chrono_literals;
using kc::testing::PodOpts;
using kc::testing::SchedCluster;
using nlohmann::json;

TEST_CASE("a gated pod reserves nothing until its gate is removed, then gets its GPUs moved",
          "[sched]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {{"g1", ""}, {"g2", ""}});
  auto s = c.startScheduler(c.options());

  json gated = {{"metadata", {{"name", "gated"}, {"namespace", "team"}}},
                {"spec",
                 {{"schedulerName", "kubecomp-sched"},
                  {"schedulingGates", json::array({{{"name", "kueue.x-k8s.io/admission"}}})},
                  {"containers",
                   json::array({{{"name", "main"},
                                 {"image", "busybox"},
                                 {"resources", {{"limits", kc::testing::gpuLimits(2, "1")}}}}})}}}};
  REQUIRE(c.client->create(kc::kube::gvr::pods(), "team", gated).ok());
  // A pod created after it is scheduled: the scheduler has been through its queue.
  c.pod("probe");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("probe").empty(); }));
  CHECK(c.nodeOf("gated").empty());
  CHECK(c.annotationOf("gated", "kubecomp.io/dst-node") == "<none>");
  CHECK(c.condition("gated").is_null());  // the API server's own SchedulingGated stays as is
  CHECK(c.events("gated", "FailedScheduling").empty());
  CHECK(c.events("gated", "Reconfig").empty());

  // Kueue admits the workload: it removes the gate.
  REQUIRE(c.client
              ->patch(kc::kube::gvr::pods(), "team", "gated", kc::kube::PatchType::kMerge,
                      {{"spec", {{"schedulingGates", nullptr}}}})
              .ok());
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("gated", "kubecomp.io/dst-node") == "n1"; }));
  CHECK(c.annotationOf("gated", "kubecomp.io/demand") == "2");
  REQUIRE(kc::testing::eventually([&] { return !c.events("gated", "Reconfig").empty(); }));
  // reconfig-mgr moves the two GPUs, kubelet advertises them: the pod is bound.
  c.setPoolGpus("p0", {{"g1", "n1"}, {"g2", "n1"}});
  c.setAllocatableGpus("n1", 2);
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("gated") == "n1"; }, 10s));
}
