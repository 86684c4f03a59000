// kube-scheduler semantics in SchedCache on its own (issue 27): objects handed in as the
// informers would, time passed in by the test. A pod held by scheduling gates is not considered
// and reserves nothing until the gates are removed; host ports taken by any pod on a node
// (whichever scheduler bound it, and the pods this scheduler has just bound) keep a pod asking
// for the same port off that node, with kube-scheduler's reason.

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

struct PodSpec {
  int gpus = 0;
  json labels = json::object();
  json affinity = json();
  json gates = json::array();
  int hostPort = 0;
  std::string scheduler = "kubecomp-sched";
  std::string nodeName{};
};

json pod(const std::string& name, const std::string& created, const PodSpec& s) {
  json res = {{"cpu", "1"}};
  if (s.gpus > 0) {
    res["kubecomp.io/gpu"] = std::to_string(s.gpus);
  }
  json container = {{"name", "c"}, {"resources", {{"requests", res}}}};
  if (s.hostPort > 0) {
    container["ports"] = json::array({{{"containerPort", 80}, {"hostPort", s.hostPort}}});
  }
  json spec = {{"schedulerName", s.scheduler}, {"containers", json::array({container})}};
  if (!s.gates.empty()) {
    spec["schedulingGates"] = s.gates;
  }
  if (!s.affinity.is_null()) {
    spec["affinity"] = s.affinity;
  }
  if (!s.nodeName.empty()) {
    spec["nodeName"] = s.nodeName;
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"labels", s.labels},
            {"creationTimestamp", created}}},
          {"spec", spec},
          {"status", {{"phase", s.nodeName.empty() ? "Pending" : "Running"}}}};
}

kc::sched::CacheOptions options() {
  kc::sched::CacheOptions o;
  o.reservationTimeout = 30s;
  o.initialBackoff = 1s;
  o.maxBackoff = 4s;
  return o;
}

const Action* find(const std::vector<Action>& actions, const std::string& name) {
  for (const auto& a : actions) {
    if (a.name == name) {
      return &a;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("sched semantics: a gated pod reserves nothing, once ungated it is scheduled",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 0));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", ""}, {"g2", ""}}));
  cache.resetQueue(t0);
  PodSpec gated{.gpus = 2, .gates = json::array({{{"name", "kueue.x-k8s.io/admission"}}})};
  cache.ingestPod(pod("gated", "2026-01-01T00:00:01Z", gated), t0);
  // Not considered at all: no decision, no reservation, no condition, no event.
  CHECK(cache.next(t0, 10).empty());
  CHECK(cache.next(t0 + 30s, 10).empty());
  CHECK(cache.stats().reservations == 0);
  CHECK_FALSE(cache.reservation("team/gated"));

  // The two GPUs are still there for the next pod, though the gated one is older.
  cache.ingestPod(pod("other", "2026-01-01T00:00:02Z", {.gpus = 2}), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].name == "other");
  CHECK(actions[0].kind == Kind::kReserve);
  CHECK(actions[0].deficit == 2);

  // Kueue admits it: the gate goes, the pod is decided like any other (here: nothing left).
  gated.gates = json::array();
  cache.ingestPod(pod("gated", "2026-01-01T00:00:01Z", gated), t0 + 1s);
  actions = cache.next(t0 + 1s, 10);
  const Action* a = find(actions, "gated");
  REQUIRE(a != nullptr);
  CHECK(a->kind == Kind::kUnschedulable);
  CHECK(a->message ==
        "0/1 nodes are available: 1 node(s) had too few free kubecomp.io/gpu in their GPU pool. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.");
}

TEST_CASE("sched semantics: a gated pod that becomes ungated with free GPUs binds", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 1));
  cache.ingestPool(pool("p0", {"n1"}, {{"g1", "n1"}}));
  cache.resetQueue(t0);
  PodSpec s{.gpus = 1, .gates = json::array({{{"name", "example.com/a"}}, {{"name", "b"}}})};
  cache.ingestPod(pod("g", "2026-01-01T00:00:01Z", s), t0);
  CHECK(cache.next(t0, 10).empty());
  s.gates = json::array({{{"name", "b"}}});  // one gate of two removed: still gated
  cache.ingestPod(pod("g", "2026-01-01T00:00:01Z", s), t0);
  CHECK(cache.next(t0, 10).empty());
  s.gates = json::array();
  cache.ingestPod(pod("g", "2026-01-01T00:00:01Z", s), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n1");
}

TEST_CASE("sched semantics: host ports taken on a node keep a pod off it", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  cache.ingestNode(node("n1", 2));
  cache.ingestNode(node("n2", 2));
  cache.ingestPool(
      pool("p0", {"n1", "n2"}, {{"a1", "n1"}, {"a2", "n1"}, {"b1", "n2"}, {"b2", "n2"}}));
  cache.resetQueue(t0);
  // The default scheduler's pod on n1 holds host port 8080.
  cache.ingestPod(pod("web", "2026-01-01T00:00:00Z",
                      {.hostPort = 8080, .scheduler = "default-scheduler", .nodeName = "n1"}),
                  t0);
  cache.ingestPod(pod("a", "2026-01-01T00:00:01Z", {.gpus = 1, .hostPort = 8080}), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n2");
  // a is assumed on n2 and holds 8080 there too: b fits nowhere, in kube-scheduler's words.
  cache.ingestPod(pod("b", "2026-01-01T00:00:02Z", {.gpus = 1, .hostPort = 8080}), t0);
  actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kUnschedulable);
  CHECK(actions[0].message ==
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
  cache.backoff("team/b", t0);
  // Another port goes where the GPUs are.
  cache.ingestPod(pod("c", "2026-01-01T00:00:03Z", {.gpus = 1, .hostPort = 9090}), t0);
  actions = cache.next(t0, 10);
  REQUIRE(find(actions, "c") != nullptr);
  CHECK(find(actions, "c")->kind == Kind::kBind);
  // web goes: n1's port is free, b is retried at once and lands there.
  cache.removePod("team/web");
  actions = cache.next(t0 + 10ms, 10);
  const Action* b = find(actions, "b");
  REQUIRE(b != nullptr);
  CHECK(b->kind == Kind::kBind);
  CHECK(b->node == "n1");
}

TEST_CASE("sched semantics: pod anti-affinity spreads replicas, affinity follows a pod",
          "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  for (const char* n : {"n1", "n2"}) {
    json obj = node(n, 2);
    obj["metadata"]["labels"] = {{"kubernetes.io/hostname", n}};
    cache.ingestNode(obj);
  }
  cache.ingestPool(
      pool("p0", {"n1", "n2"}, {{"a1", "n1"}, {"a2", "n1"}, {"b1", "n2"}, {"b2", "n2"}}));
  cache.resetQueue(t0);
  const json oneWebPerNode = {
      {"podAntiAffinity",
       {{"requiredDuringSchedulingIgnoredDuringExecution",
         json::array({{{"labelSelector", {{"matchLabels", {{"app", "web"}}}}},
                       {"topologyKey", "kubernetes.io/hostname"}}})}}}};
  const PodSpec web{.gpus = 1, .labels = {{"app", "web"}}, .affinity = oneWebPerNode};
  cache.ingestPod(pod("web-1", "2026-01-01T00:00:01Z", web), t0);
  cache.ingestPod(pod("web-2", "2026-01-01T00:00:02Z", web), t0);
  cache.ingestPod(pod("web-3", "2026-01-01T00:00:03Z", web), t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 3);
  // Eq. 1 alone would put web-1 and web-2 together on n1 (ties by name).
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[1].kind == Kind::kBind);
  CHECK(actions[0].node != actions[1].node);
  CHECK(actions[2].kind == Kind::kUnschedulable);
  CHECK(actions[2].message ==
        "0/2 nodes are available: 2 node(s) didn't satisfy existing pods anti-affinity rules. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.");
  // A pod that must sit next to web-2.
  const json nextToWeb2 = {{"podAffinity",
                            {{"requiredDuringSchedulingIgnoredDuringExecution",
                              json::array({{{"labelSelector", {{"matchLabels", {{"app", "web"}}}}},
                                            {"namespaces", {"team"}},
                                            {"topologyKey", "kubernetes.io/hostname"}}})}}}};
  cache.ingestPod(pod("sidecar", "2026-01-01T00:00:04Z",
                      {.gpus = 1, .labels = {{"app", "log"}}, .affinity = nextToWeb2}),
                  t0);
  actions = cache.next(t0, 10);
  const Action* side = find(actions, "sidecar");
  REQUIRE(side != nullptr);
  CHECK(side->kind == Kind::kBind);  // both nodes hold a web pod and one free GPU
}

TEST_CASE("sched semantics: topology spread puts the second replica in the other zone", "[sched]") {
  SchedCache cache(options());
  const auto t0 = kc::sched::Clock::time_point{} + 1h;
  for (const auto& [n, zone] : {std::pair{"n1", "a"}, std::pair{"n2", "a"}, std::pair{"n3", "b"}}) {
    json obj = node(n, 2);
    obj["metadata"]["labels"] = {{"topology.kubernetes.io/zone", zone}};
    cache.ingestNode(obj);
  }
  cache.ingestPool(
      pool("p0", {"n1", "n2", "n3"},
           {{"a1", "n1"}, {"a2", "n1"}, {"b1", "n2"}, {"b2", "n2"}, {"c1", "n3"}, {"c2", "n3"}}));
  cache.resetQueue(t0);
  const json spread = json::array({{{"maxSkew", 1},
                                    {"topologyKey", "topology.kubernetes.io/zone"},
                                    {"whenUnsatisfiable", "DoNotSchedule"},
                                    {"labelSelector", {{"matchLabels", {{"app", "train"}}}}}}});
  PodSpec train{.gpus = 1, .labels = {{"app", "train"}}};
  json p1 = pod("train-1", "2026-01-01T00:00:01Z", train);
  json p2 = pod("train-2", "2026-01-01T00:00:02Z", train);
  p1["spec"]["topologySpreadConstraints"] = spread;
  p2["spec"]["topologySpreadConstraints"] = spread;
  cache.ingestPod(p1, t0);
  cache.ingestPod(p2, t0);
  auto actions = cache.next(t0, 10);
  REQUIRE(actions.size() == 2);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node != "n3");  // zone a first (ties by name)
  CHECK(actions[1].kind == Kind::kBind);
  CHECK(actions[1].node == "n3");  // zone a would be 2 against 0
}

TEST_CASE("sched semantics: preferred anti-affinity spreads replicas Eq. 1 would pack", "[sched]") {
  // Three nodes with two GPUs each. Eq. 1's best fit alone puts web-1 and web-2 on n1 (ties by
  // name, then the fuller node) and web-3 on n2; preferring other hosts spreads them, with no
  // GPU moved.
  for (const bool prefersApart : {false, true}) {
    CAPTURE(prefersApart);
    SchedCache cache(options());
    const auto t0 = kc::sched::Clock::time_point{} + 1h;
    for (const char* n : {"n1", "n2", "n3"}) {
      json obj = node(n, 2);
      obj["metadata"]["labels"] = {{"kubernetes.io/hostname", n}};
      cache.ingestNode(obj);
    }
    cache.ingestPool(
        pool("p0", {"n1", "n2", "n3"},
             {{"a1", "n1"}, {"a2", "n1"}, {"b1", "n2"}, {"b2", "n2"}, {"c1", "n3"}, {"c2", "n3"}}));
    cache.resetQueue(t0);
    const json apart = {{"podAntiAffinity",
                         {{"preferredDuringSchedulingIgnoredDuringExecution",
                           json::array({{{"weight", 100},
                                         {"podAffinityTerm",
                                          {{"labelSelector", {{"matchLabels", {{"app", "web"}}}}},
                                           {"topologyKey", "kubernetes.io/hostname"}}}}})}}}};
    const PodSpec web{
        .gpus = 1, .labels = {{"app", "web"}}, .affinity = prefersApart ? apart : json()};
    cache.ingestPod(pod("web-1", "2026-01-01T00:00:01Z", web), t0);
    cache.ingestPod(pod("web-2", "2026-01-01T00:00:02Z", web), t0);
    cache.ingestPod(pod("web-3", "2026-01-01T00:00:03Z", web), t0);
    auto actions = cache.next(t0, 10);
    REQUIRE(actions.size() == 3);
    std::vector<std::string> nodes;
    for (const auto& a : actions) {
      CHECK(a.kind == Kind::kBind);  // no GPU moved either way
      nodes.push_back(a.node);
    }
    CHECK(nodes == (prefersApart ? std::vector<std::string>{"n1", "n2", "n3"}
                                 : std::vector<std::string>{"n1", "n1", "n2"}));
  }
}
