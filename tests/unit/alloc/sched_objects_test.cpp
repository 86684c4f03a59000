// The scheduler's Pod/Node models (sched_objects.hpp) and the effective pod request
// (pod_fit.hpp). Expected values are worked out by hand from the Kubernetes documentation
// ("Resource Management for Pods and Containers", "Init Containers", "Sidecar Containers",
// KEP-753 "Exposing Pod Resource Requirements", the Pod/Node API reference), not from the code.

#include "libcore/alloc/sched_objects.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "libcore/alloc/pod_fit.hpp"

using namespace kc::alloc;
using nlohmann::json;

namespace {

constexpr std::int64_t kMi = 1024 * 1024;

// A Pod object as the API returns it, around the given spec (one bare container if none).
json podObject(json spec, json annotations = json::object()) {
  if (!spec.contains("containers")) {
    spec["containers"] = json::array({{{"name", "c"}}});
  }
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "p"}, {"namespace", "ns"}, {"uid", "u-1"}, {"annotations", annotations}}},
          {"spec", spec}};
}

SchedPod mustParsePod(const json& j) {
  auto p = parsePod(j);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

json container(const std::string& name, json requests, json limits = nullptr) {
  json res = {{"requests", std::move(requests)}};
  if (!limits.is_null()) {
    res["limits"] = std::move(limits);
  }
  return {{"name", name}, {"image", "busybox"}, {"resources", res}};
}

json sidecar(const std::string& name, json requests) {
  json c = container(name, std::move(requests));
  c["restartPolicy"] = "Always";
  return c;
}

}  // namespace

TEST_CASE("a Pod object parses into the compact model", "[alloc]") {
  const json j = json::parse(R"({
    "metadata": {"name": "train", "namespace": "ml", "uid": "abc",
                 "annotations": {"kubecomp.io/gpu-models": "H100, A100"}},
    "spec": {
      "schedulerName": "kubecomp-sched",
      "containers": [{"name": "main", "resources": {"requests": {"cpu": "2", "memory": "4Gi",
                        "example.com/foo": "1", "storage": "1"},
                        "limits": {"kubecomp.io/gpu": "2", "cpu": "4"}}}],
      "nodeSelector": {"pool": "gpu"},
      "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt",
                                                     "values": ["3"]}]}]}}},
      "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
                      {"operator": "Exists"}]
    }})");
  const SchedPod p = mustParsePod(j);
  CHECK(p.ns == "ml");
  CHECK(p.name == "train");
  CHECK(p.uid == "abc");
  CHECK(p.schedulerName == "kubecomp-sched");
  REQUIRE(p.containers.size() == 1);
  const Resources& r = p.containers[0].requests;
  CHECK(r.milliCpu == 2000);  // the request, not the limit of 4
  CHECK(r.memory == 4096 * kMi);
  CHECK(r.scalarOr0("example.com/foo") == 1);
  CHECK(r.scalarOr0("kubecomp.io/gpu") == 2);  // defaulted from the limit
  CHECK(r.scalar.count("storage") == 0);       // not a resource the scheduler counts
  CHECK(p.nodeSelector == StringMap{{"pool", "gpu"}});
  REQUIRE(p.requiredNodeAffinity);
  REQUIRE(p.requiredNodeAffinity->size() == 1);
  CHECK((*p.requiredNodeAffinity)[0].matchExpressions[0].op == SelectorOperator::Gt);
  REQUIRE(p.tolerations.size() == 2);
  CHECK(p.tolerations[0].op == TolerationOperator::Exists);
  CHECK(p.tolerations[0].effect == TaintEffect::NoSchedule);
  CHECK(p.tolerations[1].key.empty());
  CHECK_FALSE(p.tolerations[1].effect.has_value());
  CHECK(p.gpuModels.models() == std::vector<std::string>{"A100", "H100"});
}

TEST_CASE("a Pod without schedulerName belongs to default-scheduler", "[alloc]") {
  CHECK(mustParsePod(podObject(json::object())).schedulerName == "default-scheduler");
}

TEST_CASE("a Node object parses into the compact model", "[alloc]") {
  const json j = json::parse(R"({
    "metadata": {"name": "n1", "labels": {"zone": "a"}},
    "spec": {"unschedulable": true,
             "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"},
                        {"key": "soft", "effect": "PreferNoSchedule"}]},
    "status": {"allocatable": {"cpu": "3500m", "memory": "16Gi", "pods": "110",
                               "ephemeral-storage": "100G", "kubecomp.io/gpu": "4",
                               "hugepages-2Mi": "0"}}})");
  auto n = parseNode(j);
  REQUIRE(n);
  CHECK(n->name == "n1");
  CHECK(n->labels == StringMap{{"zone", "a"}});
  CHECK(n->unschedulable);
  REQUIRE(n->taints.size() == 2);
  CHECK(n->taints[0].key == "gpu");
  CHECK(n->taints[0].value == "true");
  CHECK(n->taints[1].effect == TaintEffect::PreferNoSchedule);
  CHECK(n->allocatable.milliCpu == 3500);
  CHECK(n->allocatable.memory == 16384 * kMi);
  CHECK(n->allocatable.ephemeralStorage == 100'000'000'000);
  CHECK(n->allocatablePods == 110);
  CHECK(n->allocatable.scalarOr0("kubecomp.io/gpu") == 4);
  CHECK(n->allocatable.scalar.count("hugepages-2Mi") == 1);
}

TEST_CASE("a just-registered Node without status has nothing allocatable", "[alloc]") {
  auto n = parseNode(json{{"metadata", {{"name", "n0"}}}});
  REQUIRE(n);
  CHECK(n->allocatable == Resources{});
  CHECK(n->allocatablePods == 0);
  CHECK_FALSE(n->unschedulable);
}

TEST_CASE("bad Pod objects are refused with an invalid error naming the field", "[alloc]") {
  auto [name, object, field] = GENERATE(table<std::string, std::string, std::string>({
      {"cpu not a quantity",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"abc"}}}]}})",
       "spec.containers[0].resources.requests.cpu"},
      {"negative memory limit",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"},{"name":"d","resources":{"limits":{"memory":"-1Gi"}}}]}})",
       "spec.containers[1].resources.limits.memory"},
      {"unknown suffix in an init container",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"initContainers":[{"name":"i","resources":{"requests":{"memory":"1Xi"}}}]}})",
       "spec.initContainers[0].resources.requests.memory"},
      {"bad overhead",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"overhead":{"cpu":"1..5"}}})",
       "spec.overhead.cpu"},
      {"quantity of the wrong JSON type",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":true}}}]}})",
       "spec.containers[0].resources.requests.cpu"},
      {"no containers", R"({"metadata":{"name":"p"},"spec":{"containers":[]}})", "spec.containers"},
      {"no name", R"({"metadata":{},"spec":{"containers":[{"name":"c"}]}})", "metadata.name"},
      {"not an object", R"([1,2])", "object"},
      {"init restartPolicy other than Always",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"initContainers":[{"name":"i","restartPolicy":"OnFailure"}]}})",
       "spec.initContainers[0].restartPolicy"},
      {"nodeSelector value not a string",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"nodeSelector":{"zone":1}}})",
       "spec.nodeSelector[zone]"},
      {"unknown toleration operator",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"tolerations":[{"key":"k","operator":"Foo"}]}})",
       "spec.tolerations[0].operator"},
      {"Equal toleration without key",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"tolerations":[{"value":"v"}]}})",
       "spec.tolerations[0].operator"},
      {"Exists toleration with a value",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"tolerations":[{"key":"k","operator":"Exists","value":"v"}]}})",
       "spec.tolerations[0].value"},
      {"unknown toleration effect",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"tolerations":[{"key":"k","effect":"Sometimes"}]}})",
       "spec.tolerations[0].effect"},
      {"unknown affinity operator",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Near","values":["a"]}]}]}}}}})",
       "nodeSelectorTerms[0].matchExpressions[0].operator"},
      {"In without values",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"In"}]}]}}}}})",
       "nodeSelectorTerms[0].matchExpressions[0].values"},
      {"Exists with values",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"k","operator":"Exists","values":["a"]}]}]}}}}})",
       "nodeSelectorTerms[0].matchExpressions[0].values"},
      {"Gt with a non-integer",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{},{"matchExpressions":[{"key":"k","operator":"Gt","values":["1.5"]}]}]}}}}})",
       "nodeSelectorTerms[1].matchExpressions[0].values"},
      {"matchFields on a field other than metadata.name",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.labels","operator":"In","values":["a"]}]}]}}}}})",
       "nodeSelectorTerms[0].matchFields[0].key"},
      {"matchFields with two values",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["a","b"]}]}]}}}}})",
       "nodeSelectorTerms[0].matchFields[0]"},
      {"empty nodeSelectorTerms",
       R"({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c"}],"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[]}}}}})",
       "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"},
      {"bad GPU model list",
       R"({"metadata":{"name":"p","annotations":{"kubecomp.io/gpu-models":"A100,,H100"}},"spec":{"containers":[{"name":"c"}]}})",
       "metadata.annotations[kubecomp.io/gpu-models]"},
  }));
  CAPTURE(name);
  auto p = parsePod(json::parse(object));
  REQUIRE_FALSE(p);
  CHECK(p.error().code == "invalid");
  CHECK_THAT(p.error().message, Catch::Contains(field));
}

TEST_CASE("bad Node objects are refused with an invalid error naming the field", "[alloc]") {
  auto [name, object, field] = GENERATE(table<std::string, std::string, std::string>({
      {"allocatable cpu not a quantity",
       R"({"metadata":{"name":"n"},"status":{"allocatable":{"cpu":"x"}}})",
       "status.allocatable.cpu"},
      {"allocatable extended resource too large",
       R"({"metadata":{"name":"n"},"status":{"allocatable":{"kubecomp.io/gpu":"9Ei"}}})",
       "status.allocatable.kubecomp.io/gpu"},
      {"unknown taint effect",
       R"({"metadata":{"name":"n"},"spec":{"taints":[{"key":"k","effect":"Never"}]}})",
       "spec.taints[0].effect"},
      {"taint without effect", R"({"metadata":{"name":"n"},"spec":{"taints":[{"key":"k"}]}})",
       "spec.taints[0].effect"},
      {"taint without key",
       R"({"metadata":{"name":"n"},"spec":{"taints":[{"effect":"NoSchedule"}]}})",
       "spec.taints[0].key"},
      {"unschedulable not a boolean", R"({"metadata":{"name":"n"},"spec":{"unschedulable":"yes"}})",
       "spec.unschedulable"},
      {"label value not a string", R"({"metadata":{"name":"n","labels":{"a":2}}})",
       "metadata.labels[a]"},
      {"no name", R"({"metadata":{"labels":{}}})", "metadata.name"},
  }));
  CAPTURE(name);
  auto n = parseNode(json::parse(object));
  REQUIRE_FALSE(n);
  CHECK(n.error().code == "invalid");
  CHECK_THAT(n.error().message, Catch::Contains(field));
}

TEST_CASE("effective pod request: containers summed, init containers maxed, overhead added",
          "[alloc]") {
  struct Row {
    std::string name;
    json spec;
    std::int64_t milliCpu;
    std::int64_t memory;
  };
  auto row = GENERATE(
      Row{"two containers add up",
          {{"containers",
            {container("a", {{"cpu", "100m"}, {"memory", "64Mi"}}),
             container("b", {{"cpu", "200m"}, {"memory", "128Mi"}})}}},
          300,
          192 * kMi},
      Row{"the largest init container wins over a smaller sum",
          {{"containers", {container("a", {{"cpu", "300m"}})}},
           {"initContainers",
            {container("i1", {{"cpu", "500m"}}), container("i2", {{"cpu", "50m"}})}}},
          500,
          0},
      Row{"init containers are maxed, not summed",
          {{"containers", {container("a", {{"cpu", "100m"}})}},
           {"initContainers",
            {container("i1", {{"cpu", "80m"}, {"memory", "256Mi"}}),
             container("i2", {{"cpu", "90m"}, {"memory", "64Mi"}})}}},
          100,
          256 * kMi},
      Row{"overhead is added after the max",
          {{"containers", {container("a", {{"cpu", "100m"}})}},
           {"initContainers", {container("i", {{"cpu", "200m"}})}},
           {"overhead", {{"cpu", "250m"}, {"memory", "120Mi"}}}},
          450,
          120 * kMi},
      Row{"limits stand in for missing requests",
          {{"containers", {container("a", json::object(), {{"cpu", "1"}, {"memory", "1Gi"}})}}},
          1000,
          1024 * kMi},
      Row{"an explicit zero request is kept even with a limit",
          {{"containers", {container("a", {{"cpu", "0"}}, {{"cpu", "2"}})}}},
          0,
          0},
      // KEP-753: a sidecar keeps running, so it adds to the containers and to every later
      // init container: regular = 200 + 100, init(i) = 500 + 100.
      Row{"a sidecar before an init container adds to it",
          {{"containers", {container("a", {{"cpu", "200m"}})}},
           {"initContainers",
            {sidecar("s", {{"cpu", "100m"}}), container("i", {{"cpu", "500m"}})}}},
          600,
          0},
      Row{"an init container before the sidecar runs alone",
          {{"containers", {container("a", {{"cpu", "200m"}})}},
           {"initContainers",
            {container("i", {{"cpu", "500m"}}), sidecar("s", {{"cpu", "100m"}})}}},
          500,
          0},
      Row{"sidecars add to the containers",
          {{"containers", {container("a", {{"cpu", "200m"}})}},
           {"initContainers",
            {sidecar("s1", {{"cpu", "300m"}}), sidecar("s2", {{"cpu", "400m"}}),
             container("i", {{"cpu", "100m"}})}}},
          900,
          0});
  CAPTURE(row.name);
  const Resources r = podRequests(mustParsePod(podObject(row.spec)));
  CHECK(r.milliCpu == row.milliCpu);
  CHECK(r.memory == row.memory);
}

TEST_CASE("GPU request reads every container, not container 0 only", "[alloc]") {
  auto [name, spec, gpus] = GENERATE(table<std::string, json, std::int64_t>({
      {"summed over containers (the original read container 0: 1)",
       {{"containers",
         {container("a", {{"kubecomp.io/gpu", "1"}}), container("b", {{"kubecomp.io/gpu", "2"}})}}},
       3},
      {"only a later container asks",
       {{"containers",
         {container("a", {{"cpu", "1"}}), container("b", {{"kubecomp.io/gpu", "2"}})}}},
       2},
      {"limits only (extended resources are set as limits)",
       {{"containers",
         {container("a", json::object(), {{"kubecomp.io/gpu", "2"}}),
          container("b", json::object(), {{"kubecomp.io/gpu", "2"}})}}},
       4},
      {"an init container asking for more wins",
       {{"containers",
         {container("a", {{"kubecomp.io/gpu", "1"}}), container("b", {{"kubecomp.io/gpu", "2"}})}},
        {"initContainers", {container("i", {{"kubecomp.io/gpu", "4"}})}}},
       4},
      {"an init container asking for less does not add",
       {{"containers",
         {container("a", {{"kubecomp.io/gpu", "1"}}), container("b", {{"kubecomp.io/gpu", "2"}})}},
        {"initContainers", {container("i", {{"kubecomp.io/gpu", "2"}})}}},
       3},
      {"no GPU", {{"containers", {container("a", {{"cpu", "1"}})}}}, 0},
  }));
  CAPTURE(name);
  CHECK(gpuRequest(mustParsePod(podObject(spec))) == gpus);
}

TEST_CASE("node usage adds and removes pods without overflow or going negative", "[alloc]") {
  NodeUsage u;
  Resources big;
  big.milliCpu = std::numeric_limits<std::int64_t>::max() - 1;
  big.scalar["example.com/foo"] = 3;
  addPodUsage(u, big);
  addPodUsage(u, big);
  CHECK(u.pods == 2);
  CHECK(u.requested.milliCpu == std::numeric_limits<std::int64_t>::max());
  CHECK(u.requested.scalarOr0("example.com/foo") == 6);
  Resources small;
  small.milliCpu = 5;
  small.memory = 7;
  NodeUsage v;
  addPodUsage(v, small);
  removePodUsage(v, small);
  removePodUsage(v, small);
  CHECK(v == NodeUsage{Resources{}, 0});
}

TEST_CASE("node usage counts bound, non-terminal pods on the node they are bound to", "[alloc]") {
  auto pod = [](const std::string& name, const std::string& node, const std::string& phase,
                const std::string& cpu) {
    json j = podObject({{"containers", {container("c", {{"cpu", cpu}, {"memory", "1Mi"}})}}});
    j["metadata"]["name"] = name;
    if (!node.empty()) {
      j["spec"]["nodeName"] = node;
    }
    if (!phase.empty()) {
      j["status"] = {{"phase", phase}};
    }
    return mustParsePod(j);
  };
  const std::vector<SchedPod> pods{
      pod("running", "n1", "Running", "1"),      // counts on n1
      pod("starting", "n1", "Pending", "500m"),  // bound, not started yet: counts on n1
      pod("fresh", "n2", "", "250m"),            // bound, no status yet: counts on n2
      pod("done", "n1", "Succeeded", "4"),       // terminal: frees its resources
      pod("crashed", "n2", "Failed", "4"),       // terminal
      pod("waiting", "", "Pending", "8"),        // not bound
      pod("orphan", "gone", "Running", "8"),     // bound to a node no longer listed
  };
  CHECK(holdsNodeResources(pods[1]));
  CHECK(holdsNodeResources(pods[2]));
  CHECK_FALSE(holdsNodeResources(pods[3]));
  CHECK_FALSE(holdsNodeResources(pods[4]));
  CHECK_FALSE(holdsNodeResources(pods[5]));
  std::vector<SchedNode> nodes(3);
  nodes[0].name = "n1";
  nodes[1].name = "n2";
  nodes[2].name = "n3";
  auto u = nodeUsage(nodes, pods);
  REQUIRE(u);
  REQUIRE(u->size() == 3);
  CHECK((*u)[0].pods == 2);
  CHECK((*u)[0].requested.milliCpu == 1500);
  CHECK((*u)[0].requested.memory == 2 * kMi);
  CHECK((*u)[1].pods == 1);
  CHECK((*u)[1].requested.milliCpu == 250);
  CHECK((*u)[2] == NodeUsage{});

  nodes[2].name = "n1";
  auto dup = nodeUsage(nodes, pods);
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code == "invalid");
}

TEST_CASE("status.phase of the wrong type is refused", "[alloc]") {
  json j = podObject(json::object());
  j["status"] = {{"phase", 3}};
  auto p = parsePod(j);
  REQUIRE_FALSE(p);
  CHECK_THAT(p.error().message, Catch::Contains("status.phase"));
}

TEST_CASE("a pod's expected run time: the annotation, else activeDeadlineSeconds", "[alloc]") {
  CHECK_FALSE(mustParsePod(podObject(json::object())).expectedRuntimeSeconds);
  CHECK(mustParsePod(podObject({{"activeDeadlineSeconds", 600}})).expectedRuntimeSeconds == 600);
  CHECK(mustParsePod(podObject(json::object(), {{"kubecomp.io/expected-runtime-seconds", "90"}}))
            .expectedRuntimeSeconds == 90);
  // The annotation (the user's estimate) wins over the deadline (a hard limit).
  CHECK(mustParsePod(podObject({{"activeDeadlineSeconds", 600}},
                               {{"kubecomp.io/expected-runtime-seconds", "90"}}))
            .expectedRuntimeSeconds == 90);
  // A deadline far beyond planning range is capped, not refused (the API server accepts it).
  CHECK(mustParsePod(podObject({{"activeDeadlineSeconds", std::int64_t{1} << 60}}))
            .expectedRuntimeSeconds == kMaxExpectedRuntimeSeconds);

  for (const char* bad :
       {"", "0", "-5", "1.5", "90s", " 90", "99999999999999999999", "400000000"}) {
    INFO(bad);
    auto p = parsePod(podObject(json::object(), {{"kubecomp.io/expected-runtime-seconds", bad}}));
    REQUIRE_FALSE(p);
    CHECK(p.error().message.find("kubecomp.io/expected-runtime-seconds") != std::string::npos);
  }
  for (const json& bad : {json(0), json(-1), json("60"), json(1.5)}) {
    INFO(bad.dump());
    auto p = parsePod(podObject({{"activeDeadlineSeconds", bad}}));
    REQUIRE_FALSE(p);
    CHECK(p.error().message.find("spec.activeDeadlineSeconds") != std::string::npos);
  }
}
