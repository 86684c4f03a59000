// kubecomp-sched's real-time admission against the API test double (issue 14): RT pods land
// only on nodes that advertise RT capability and have per-core room; a full node leaves the next
// RT pod Pending with kube-scheduler-style reasons; invalid annotations are reported with the
// key and the reason; the cores a node publishes for a pod (rt.kubecomp.io/assigned) are what
// the scheduler counts; a pod ending frees its cores.

#include <catch2/catch.hpp>

#include "tests/services/kubecomp-sched/sched_cluster.hpp"

using namespace std::chrono_literals;
using kc::testing::PodOpts;
using kc::testing::SchedCluster;
using nlohmann::json;

namespace {

// What rt-kubelet-shim publishes on a node with RT group scheduling.
void advertiseRt(SchedCluster& c, const std::string& node, const std::string& cores,
                 const std::string& kernel) {
  json patch = {{"metadata",
                 {{"labels", {{"rt.kubecomp.io/capable", "true"}}},
                  {"annotations",
                   {{"rt.kubecomp.io/cores", cores},
                    {"rt.kubecomp.io/bound", "950000/1000000"},
                    {"rt.kubecomp.io/kernel", kernel}}}}}};
  REQUIRE(
      c.client->patch(kc::kube::gvr::nodes(), "", node, kc::kube::PatchType::kMerge, patch).ok());
}

PodOpts rt(std::uint64_t runtimeUs, std::uint32_t cpus = 1) {
  PodOpts o;
  o.annotations = {{"rt.kubecomp.io/runtime-us", std::to_string(runtimeUs)},
                   {"rt.kubecomp.io/period-us", "1000000"},
                   {"rt.kubecomp.io/cpus", std::to_string(cpus)}};
  return o;
}

}  // namespace

TEST_CASE(
    "RT pods land only where their reservations fit per core, the next one stays Pending with the "
    "reason",
    "[sched][rt]") {
  SchedCluster c;
  c.node("rt-node");
  c.node("plain");
  c.pool("p0", {"rt-node", "plain"}, {});
  advertiseRt(c, "rt-node", "0-1", "hcbs");
  auto s = c.startScheduler(c.options());

  c.pod("a", rt(600'000));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("a").empty(); }));
  CHECK(c.nodeOf("a") == "rt-node");
  // The node says where it put a (core 1, not first-fit's 0): the scheduler counts that.
  REQUIRE(c.client
              ->patch(kc::kube::gvr::pods(), "team", "a", kc::kube::PatchType::kMerge,
                      {{"metadata", {{"annotations", {{"rt.kubecomp.io/assigned", "main=1"}}}}}})
              .ok());
  c.pod("b", rt(600'000));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("b").empty(); }));
  CHECK(c.nodeOf("b") == "rt-node");
  // Both cores hold 0.6 of 0.95: a 0.4 server fits nowhere, the paper's sum test would say
  // 1.2 + 0.4 <= 1.9.
  c.pod("c", rt(400'000));
  REQUIRE(kc::testing::eventually([&] { return c.condition("c").is_object(); }));
  CHECK(c.condition("c")["reason"] == "Unschedulable");
  CHECK(c.condition("c")["message"] ==
        "0/2 nodes are available: 1 node(s) are not real-time capable, 1 node(s) had insufficient "
        "real-time bandwidth. preemption: 0/2 nodes are available: 1 No preemption victims found "
        "for incoming pod, 1 Preemption is not helpful for scheduling.");
  REQUIRE(kc::testing::eventually([&] { return !c.events("c", "FailedScheduling").empty(); }));
  // A pod without RT annotations is not the RT filter's business.
  c.pod("web");
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("web").empty(); }));
  // More cpus than the node has RT cores.
  c.pod("wide", rt(1000, 3));
  REQUIRE(kc::testing::eventually([&] { return c.condition("wide").is_object(); }));
  CHECK_THAT(c.condition("wide")["message"].get<std::string>(),
             Catch::Contains("1 node(s) had too few real-time cores"));
  // Invalid annotations: the key and what is wrong, on every node.
  PodOpts bad = rt(2'000'000);
  c.pod("bad", bad);
  REQUIRE(kc::testing::eventually([&] { return c.condition("bad").is_object(); }));
  const std::string msg = c.condition("bad")["message"];
  CHECK_THAT(msg, Catch::Contains("2 pod's real-time annotations are invalid: "));
  CHECK_THAT(msg, Catch::Contains("runtime exceeds period"));
  CHECK(c.nodeOf("bad").empty());
  // a ends: its core is free again and c is bound on the next retry.
  REQUIRE(c.client->remove(kc::kube::gvr::pods(), "team", "a").ok());
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("c").empty(); }, 10s));
  CHECK(c.nodeOf("c") == "rt-node");
}

TEST_CASE("on an rt-group node the sum over all RT pods is limited too", "[sched][rt]") {
  SchedCluster c;
  c.node("n1");
  c.pool("p0", {"n1"}, {});
  advertiseRt(c, "n1", "0-3", "rt-group");
  auto s = c.startScheduler(c.options());
  c.pod("a", rt(500'000));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("a").empty(); }));
  // Three free cores, but mainline cgroup v1 checks 0.5 + 0.5 against the root's 0.95.
  c.pod("b", rt(500'000));
  REQUIRE(kc::testing::eventually([&] { return c.condition("b").is_object(); }));
  CHECK(c.condition("b")["message"] ==
        "0/1 nodes are available: 1 node(s) had insufficient real-time bandwidth. preemption: "
        "0/1 nodes are available: 1 No preemption victims found for incoming pod.");
  c.pod("small", rt(400'000));
  REQUIRE(kc::testing::eventually([&] { return !c.nodeOf("small").empty(); }));
}
