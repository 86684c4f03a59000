// Priority and preemption with kubecomp-sched against the API test double (issue 27): pod
// priorities come from PriorityClasses through the double's Priority admission; a
// high-priority pod that fits nowhere evicts, through the Eviction API, the one low-priority
// pod kube-scheduler's rules pick (a PodDisruptionBudget-protected pod of even lower priority
// is spared because another choice exists), is nominated to the node and binds there once its
// victim is gone; a pod with preemptionPolicy Never preempts nobody.

#include <catch2/catch.hpp>

#include "tests/services/kubecomp-sched/sched_cluster.hpp"

using namespace std::chrono_literals;
using kc::testing::NodeOpts;
using kc::testing::SchedCluster;
using nlohmann::json;

namespace {

kc::kube::GroupVersionResource priorityClasses() {
  return {"scheduling.k8s.io", "v1", "priorityclasses", false};
}
kc::kube::GroupVersionResource budgets() {
  return {"policy", "v1", "poddisruptionbudgets", true};
}

void priorityClass(SchedCluster& c, const std::string& name, int value,
                   const std::string& policy = "PreemptLowerPriority") {
  json pc = {{"apiVersion", "scheduling.k8s.io/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", name}}},
             {"value", value},
             {"preemptionPolicy", policy}};
  auto r = c.client->create(priorityClasses(), "", pc);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

json containers(const std::string& cpu) {
  json r = {{"cpu", cpu}, {"memory", "1Gi"}};
  return json::array(
      {{{"name", "main"}, {"image", "busybox"}, {"resources", {{"requests", r}, {"limits", r}}}}});
}

// A pod some other scheduler placed and kubelet runs (Ready), `finalizer` holding its deletion
// (as a grace period would) so the test sees it terminate.
void runningPod(SchedCluster& c, const std::string& name, const std::string& node,
                const std::string& cls, const std::map<std::string, std::string>& labels) {
  json meta = {{"name", name},
               {"namespace", "team"},
               {"finalizers", json::array({"test.kubecomp.io/hold"})}};
  if (!labels.empty()) {
    meta["labels"] = labels;
  }
  json pod = {
      {"metadata", meta},
      {"spec", {{"nodeName", node}, {"priorityClassName", cls}, {"containers", containers("3")}}}};
  REQUIRE(c.client->create(kc::kube::gvr::pods(), "team", pod).ok());
  json status = {{"status",
                  {{"phase", "Running"},
                   {"startTime", "2026-11-28T10:00:00Z"},
                   {"conditions", json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  REQUIRE(c.client
              ->patch(kc::kube::gvr::pods(), "team", name, kc::kube::PatchType::kMerge, status,
                      "status")
              .ok());
}

void pendingPod(SchedCluster& c, const std::string& name, const std::string& cls) {
  json pod = {{"metadata", {{"name", name}, {"namespace", "team"}}},
              {"spec",
               {{"schedulerName", "kubecomp-sched"},
                {"priorityClassName", cls},
                {"containers", containers("2")}}}};
  REQUIRE(c.client->create(kc::kube::gvr::pods(), "team", pod).ok());
}

bool terminating(SchedCluster& c, const std::string& name) {
  auto r = c.client->get(kc::kube::gvr::pods(), "team", name);
  return r.ok() && (*r)["metadata"].contains("deletionTimestamp");
}

json conditionOf(const json& pod, const std::string& type) {
  for (const auto& cond : pod.value("status", json::object()).value("conditions", json::array())) {
    if (cond.value("type", "") == type) {
      return cond;
    }
  }
  return json();
}

void release(SchedCluster& c, const std::string& name) {
  REQUIRE(c.client
              ->patch(kc::kube::gvr::pods(), "team", name, kc::kube::PatchType::kMerge,
                      {{"metadata", {{"finalizers", nullptr}}}})
              .ok());
}

}  // namespace

TEST_CASE("a high-priority pod preempts the right low-priority pod and nothing else",
          "[sched][preempt]") {
  SchedCluster c;
  for (const char* n : {"n1", "n2", "n3"}) {
    c.node(n, {.cpu = "4"});
  }
  c.pool("p0", {"n1", "n2", "n3"}, {});
  priorityClass(c, "low", 10);
  priorityClass(c, "mid", 50);
  priorityClass(c, "high", 1000);
  priorityClass(c, "high-never", 1000, "Never");
  // The double's Priority admission fills spec.priority from the class.
  runningPod(c, "guarded", "n1", "low", {{"app", "db"}});
  runningPod(c, "batch", "n2", "mid", {});
  runningPod(c, "important", "n3", "high", {});
  CHECK(c.getPod("batch")["spec"]["priority"] == 50);
  json pdb = {{"apiVersion", "policy/v1"},
              {"kind", "PodDisruptionBudget"},
              {"metadata", {{"name", "db"}, {"namespace", "team"}}},
              {"spec", {{"minAvailable", 1}, {"selector", {{"matchLabels", {{"app", "db"}}}}}}}};
  REQUIRE(c.client->create(budgets(), "team", pdb).ok());
  REQUIRE(kc::testing::eventually([&] {
    auto r = c.client->get(budgets(), "team", "db");
    return r.ok() && (*r).value("status", json::object()).value("currentHealthy", 0) == 1;
  }));
  auto s = c.startScheduler(c.options());

  SECTION("preemptionPolicy Never preempts nobody") {
    pendingPod(c, "polite", "high-never");
    REQUIRE(
        kc::testing::eventually([&] { return !c.events("polite", "FailedScheduling").empty(); }));
    const std::string message = c.events("polite", "FailedScheduling").front().first;
    CHECK(message ==
          "0/3 nodes are available: 3 Insufficient cpu. preemption: not eligible due to "
          "preemptionPolicy=Never.");
    CHECK(c.condition("polite").value("message", "") == message);
    for (const char* victim : {"guarded", "batch", "important"}) {
      CHECK_FALSE(terminating(c, victim));
    }
    CHECK(c.getPod("polite").value("status", json::object()).value("nominatedNodeName", "") == "");
  }

  SECTION("the PDB-protected pod is spared, the mid-priority one evicted") {
    pendingPod(c, "urgent", "high");
    REQUIRE(kc::testing::eventually([&] { return terminating(c, "batch"); }));
    const json urgent = c.getPod("urgent");
    CHECK(urgent["status"].value("nominatedNodeName", "") == "n2");
    CHECK_FALSE(terminating(c, "guarded"));
    CHECK_FALSE(terminating(c, "important"));
    const json victim = c.getPod("batch");
    const json target = conditionOf(victim, "DisruptionTarget");
    CHECK(target.value("status", "") == "True");
    CHECK(target.value("reason", "") == "PreemptionByScheduler");
    CHECK(target.value("message", "") ==
          "kubecomp-sched: preempting to accommodate a higher priority pod");
    REQUIRE(kc::testing::eventually([&] { return !c.events("batch", "Preempted").empty(); }));
    CHECK(c.events("batch", "Preempted").front().first ==
          "Preempted by pod " + urgent["metadata"]["uid"].get<std::string>() + " on node n2");
    // The preemptor waits while its victim terminates: not bound, nobody else evicted.
    CHECK(c.nodeOf("urgent").empty());
    // The victim's grace ends: it goes, and the preemptor binds to the nominated node.
    release(c, "batch");
    REQUIRE(kc::testing::eventually([&] { return c.nodeOf("urgent") == "n2"; }, 10s));
    CHECK_FALSE(terminating(c, "guarded"));
    CHECK_FALSE(terminating(c, "important"));
  }
  s->stop();
  for (const char* p : {"guarded", "important"}) {
    release(c, p);
  }
}
