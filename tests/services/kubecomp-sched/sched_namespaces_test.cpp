// InterPodAffinity's namespaceSelector in SchedCache on its own (issue 27): Namespaces handed in
// as the informer would, time passed in by the test. A required anti-affinity term whose
// namespaceSelector is {matchLabels: {team: a}} counts the matching pods of namespaces labelled
// team=a only (kube-scheduler matches the selector against the Namespace objects' labels), and a
// Namespace relabelled sends a pod refused for it round again at once with the new verdict.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "services/kubecomp-sched/sched_cache.hpp"
#include "tests/services/kubecomp-sched/cache_objects.hpp"

using namespace std::chrono_literals;
using kc::sched::Action;
using kc::sched::SchedCache;
using nlohmann::json;
using Kind = Action::Kind;
using kc::sched::test::node;
using kc::sched::test::pool;

namespace {

json nsObject(const std::string& name, const json& labels, const std::string& rv = "1") {
  return {{"metadata", {{"name", name}, {"resourceVersion", rv}, {"labels", labels}}},
          {"status", {{"phase", "Active"}}}};
}

// A pod asking one CPU; bound to `onNode` (running) when given.
json pod(const std::string& ns, const std::string& name, const json& labels,
         const json& affinity = json(), const std::string& onNode = "") {
  json spec = {{"schedulerName", "kubecomp-sched"},
               {"containers", {{{"name", "c"}, {"resources", {{"requests", {{"cpu", "1"}}}}}}}}};
  if (!affinity.is_null()) {
    spec["affinity"] = affinity;
  }
  if (!onNode.empty()) {
    spec["nodeName"] = onNode;
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", ns},
            {"uid", "uid-" + ns + "-" + name},
            {"resourceVersion", "1"},
            {"labels", labels},
            {"creationTimestamp", "2026-01-01T00:00:01Z"}}},
          {"spec", spec},
          {"status", {{"phase", onNode.empty() ? "Pending" : "Running"}}}};
}

// Required anti-affinity to app=db pods of the namespaces labelled team=<team>, per node.
json awayFromDbOfTeam(const std::string& team) {
  return {{"podAntiAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             json::array({{{"labelSelector", {{"matchLabels", {{"app", "db"}}}}},
                           {"namespaceSelector", {{"matchLabels", {{"team", team}}}}},
                           {"topologyKey", "kubernetes.io/hostname"}}})}}}};
}

const Action* find(const std::vector<Action>& actions, const std::string& name) {
  for (const auto& a : actions) {
    if (a.name == name) {
      return &a;
    }
  }
  return nullptr;
}

// Two nodes; an app=db pod running on n1 in namespace a-1 and one on n2 in b-1.
struct Fixture {
  Fixture()
      : cache([] {
          kc::sched::CacheOptions o;
          o.initialBackoff = 1s;
          o.maxBackoff = 4s;
          return o;
        }()) {
    for (const char* n : {"n1", "n2"}) {
      json obj = node(n, 0);
      obj["metadata"]["labels"] = {{"kubernetes.io/hostname", n}};
      cache.ingestNode(obj);
    }
    cache.ingestPool(pool("p0", {"n1", "n2"}, {}));
    cache.ingestPod(pod("a-1", "db", {{"app", "db"}}, json(), "n1"), t0);
    cache.ingestPod(pod("b-1", "db", {{"app", "db"}}, json(), "n2"), t0);
    cache.resetQueue(t0);
  }
  SchedCache cache;
  const kc::sched::Clock::time_point t0 = kc::sched::Clock::time_point{} + 1h;
};

}  // namespace

TEST_CASE("namespaces: a namespaceSelector counts the pods of the namespaces it selects",
          "[sched][namespaces]") {
  Fixture f;
  f.cache.ingestNamespace(nsObject("a-1", {{"team", "a"}}));
  f.cache.ingestNamespace(nsObject("b-1", {{"team", "b"}}));
  f.cache.ingestNamespace(nsObject("team", json::object()));
  // Either node would do but for the selected namespaces' db pods: avoid-a must stay off n1
  // (its db pod is in a-1, team=a) and may use n2 (b-1's pod is not selected); avoid-b the
  // other way round.
  f.cache.ingestPod(pod("team", "avoid-a", {{"app", "web"}}, awayFromDbOfTeam("a")), f.t0);
  f.cache.ingestPod(pod("team", "avoid-b", {{"app", "web"}}, awayFromDbOfTeam("b")), f.t0);
  // A team no namespace has: no pod is selected, both nodes pass.
  f.cache.ingestPod(pod("team", "avoid-c", {{"app", "web"}}, awayFromDbOfTeam("c")), f.t0);
  const auto actions = f.cache.next(f.t0, 10);
  const Action* a = find(actions, "avoid-a");
  const Action* b = find(actions, "avoid-b");
  const Action* c = find(actions, "avoid-c");
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  REQUIRE(c != nullptr);
  CHECK(a->kind == Kind::kBind);
  CHECK(a->node == "n2");
  CHECK(b->kind == Kind::kBind);
  CHECK(b->node == "n1");
  CHECK(c->kind == Kind::kBind);
}

TEST_CASE("namespaces: a relabelled Namespace changes the verdict at once", "[sched][namespaces]") {
  Fixture f;
  // Both db pods' namespaces are team=a: the pod fits no node.
  f.cache.ingestNamespace(nsObject("a-1", {{"team", "a"}}));
  f.cache.ingestNamespace(nsObject("b-1", {{"team", "a"}}));
  f.cache.ingestPod(pod("team", "client", {{"app", "web"}}, awayFromDbOfTeam("a")), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  const Action* refused = find(actions, "client");
  REQUIRE(refused != nullptr);
  CHECK(refused->kind == Kind::kUnschedulable);
  CHECK(refused->message.find("2 node(s) didn't match pod anti-affinity rules") !=
        std::string::npos);
  // Nothing else changed: the pod backs off.
  CHECK(f.cache.next(f.t0, 10).empty());

  // An annotation-only update (same labels) is no reason to try again.
  json same = nsObject("b-1", {{"team", "a"}}, "2");
  same["metadata"]["annotations"] = {{"note", "x"}};
  f.cache.ingestNamespace(same);
  CHECK(f.cache.next(f.t0, 10).empty());

  // b-1 moves to team b: n2's db pod no longer counts, and the pod is tried again before its
  // backoff ends.
  f.cache.ingestNamespace(nsObject("b-1", {{"team", "b"}}, "3"));
  actions = f.cache.next(f.t0, 10);
  const Action* placed = find(actions, "client");
  REQUIRE(placed != nullptr);
  CHECK(placed->kind == Kind::kBind);
  CHECK(placed->node == "n2");
}

TEST_CASE("namespaces: a deleted Namespace's labels no longer select", "[sched][namespaces]") {
  Fixture f;
  f.cache.ingestNamespace(nsObject("a-1", {{"team", "a"}}));
  f.cache.ingestNamespace(nsObject("b-1", {{"team", "a"}}));
  f.cache.ingestPod(pod("team", "client", {{"app", "web"}}, awayFromDbOfTeam("a")), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  REQUIRE(find(actions, "client") != nullptr);
  CHECK(find(actions, "client")->kind == Kind::kUnschedulable);
  // a-1 goes (its pods are on their way out with it): n1 is free of selected db pods.
  f.cache.removeNamespace("a-1");
  actions = f.cache.next(f.t0, 10);
  const Action* placed = find(actions, "client");
  REQUIRE(placed != nullptr);
  CHECK(placed->kind == Kind::kBind);
  CHECK(placed->node == "n1");
}
