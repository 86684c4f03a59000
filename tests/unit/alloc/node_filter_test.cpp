// The scheduler's node filters (node_filter.hpp), table-driven. Expected verdicts and messages
// are written by hand from the Kubernetes documentation ("Taints and Tolerations", "Assigning
// Pods to Nodes", "Resource Management for Pods and Containers") and kube-scheduler's
// documented message format ("0/N nodes are available: ..."), not from the code under test.

#include "libcore/alloc/node_filter.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace kc::alloc;
using nlohmann::json;

namespace {

SchedPod podFrom(const std::string& specExtra) {
  json spec = json::parse(specExtra.empty() ? "{}" : specExtra);
  if (!spec.contains("containers")) {
    spec["containers"] = json::array({{{"name", "c"}}});
  }
  auto p = parsePod(json{{"metadata", {{"name", "p"}, {"namespace", "ns"}}}, {"spec", spec}});
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

SchedNode nodeFrom(const std::string& object) {
  auto n = parseNode(json::parse(object));
  INFO((n ? std::string() : n.error().message));
  REQUIRE(n);
  return *n;
}

// A node with room for anything: 8 cpu, 32Gi, 110 pods.
SchedNode roomyNode(const std::string& name) {
  return nodeFrom(R"({"metadata":{"name":")" + name +
                  R"("},"status":{"allocatable":{"cpu":"8","memory":"32Gi","pods":"110"}}})");
}

std::string joined(const FilterReasons& r) {
  std::string out;
  for (const auto& s : r) {
    out += (out.empty() ? "" : " | ") + s;
  }
  return out;
}

}  // namespace

TEST_CASE("taints and tolerations: NoSchedule and NoExecute must be tolerated", "[alloc]") {
  auto [name, taints, tolerations,
        expected] = GENERATE(table<std::string, std::string, std::string, std::string>({
      {"untolerated NoSchedule", R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])", "[]",
       "node(s) had untolerated taint {gpu: true}"},
      {"Equal with the same key, value and effect",
       R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"gpu","operator":"Equal","value":"true","effect":"NoSchedule"}])", ""},
      {"operator left out means Equal", R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"gpu","value":"true"}])", ""},
      {"Equal with another value", R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"gpu","value":"false"}])", "node(s) had untolerated taint {gpu: true}"},
      {"Exists on the key, any value", R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"gpu","operator":"Exists"}])", ""},
      {"empty key with Exists tolerates everything",
       R"([{"key":"a","value":"1","effect":"NoSchedule"},{"key":"b","effect":"NoExecute"}])",
       R"([{"operator":"Exists"}])", ""},
      {"the effect must match when given",
       R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"gpu","operator":"Exists","effect":"NoExecute"}])",
       "node(s) had untolerated taint {gpu: true}"},
      {"another key", R"([{"key":"gpu","value":"true","effect":"NoSchedule"}])",
       R"([{"key":"fpga","operator":"Exists"}])", "node(s) had untolerated taint {gpu: true}"},
      {"PreferNoSchedule does not filter",
       R"([{"key":"soft","value":"x","effect":"PreferNoSchedule"}])", "[]", ""},
      {"untolerated NoExecute", R"([{"key":"evict","effect":"NoExecute"}])", "[]",
       "node(s) had untolerated taint {evict: }"},
      {"the first untolerated taint is named",
       R"([{"key":"a","value":"1","effect":"NoSchedule"},{"key":"b","value":"2","effect":"NoSchedule"},{"key":"c","value":"3","effect":"NoSchedule"}])",
       R"([{"key":"a","operator":"Exists"}])", "node(s) had untolerated taint {b: 2}"},
      {"no taints", "[]", "[]", ""},
  }));
  CAPTURE(name);
  const SchedPod pod = podFrom(R"({"tolerations":)" + tolerations + "}");
  const SchedNode node = nodeFrom(R"({"metadata":{"name":"n1"},"spec":{"taints":)" + taints + "}}");
  CHECK(joined(taintTolerationFilter(pod, node)) == expected);
}

// A pod spec whose required node affinity holds the given nodeSelectorTerms.
#define TERM(expr)                                                                                               \
  R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[)" expr \
  R"(]}}}})"

TEST_CASE("nodeSelector and required node affinity", "[alloc]") {
  const std::string kNo = std::string(kReasonNodeAffinity);
  auto [name, spec, expected] = GENERATE_COPY(table<std::string, std::string, std::string>({
      {"no constraint", "{}", ""},
      {"nodeSelector matches", R"({"nodeSelector":{"zone":"a"}})", ""},
      {"nodeSelector: every label must match", R"({"nodeSelector":{"zone":"a","disk":"ssd"}})",
       kNo},
      {"nodeSelector other value", R"({"nodeSelector":{"zone":"b"}})", kNo},
      {"In holding the value",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"In","values":["b","a"]}]})"), ""},
      {"In without the value",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]})"), kNo},
      {"In on a missing label",
       TERM(R"({"matchExpressions":[{"key":"rack","operator":"In","values":["a"]}]})"), kNo},
      {"NotIn without the value",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"NotIn","values":["b"]}]})"), ""},
      {"NotIn holding the value",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"NotIn","values":["a"]}]})"), kNo},
      {"NotIn on a missing label matches",
       TERM(R"({"matchExpressions":[{"key":"rack","operator":"NotIn","values":["a"]}]})"), ""},
      {"Exists", TERM(R"({"matchExpressions":[{"key":"zone","operator":"Exists"}]})"), ""},
      {"Exists on a missing label",
       TERM(R"({"matchExpressions":[{"key":"rack","operator":"Exists"}]})"), kNo},
      {"DoesNotExist on a missing label",
       TERM(R"({"matchExpressions":[{"key":"rack","operator":"DoesNotExist"}]})"), ""},
      {"DoesNotExist on a present label",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"DoesNotExist"}]})"), kNo},
      {"Gt smaller bound",
       TERM(R"({"matchExpressions":[{"key":"gen","operator":"Gt","values":["4"]}]})"), ""},
      {"Gt equal bound",
       TERM(R"({"matchExpressions":[{"key":"gen","operator":"Gt","values":["5"]}]})"), kNo},
      {"Lt larger bound",
       TERM(R"({"matchExpressions":[{"key":"gen","operator":"Lt","values":["6"]}]})"), ""},
      {"Lt negative bound",
       TERM(R"({"matchExpressions":[{"key":"gen","operator":"Lt","values":["-1"]}]})"), kNo},
      {"Gt on a non-integer label",
       TERM(R"({"matchExpressions":[{"key":"zone","operator":"Gt","values":["0"]}]})"), kNo},
      {"Gt on a missing label",
       TERM(R"({"matchExpressions":[{"key":"rack","operator":"Gt","values":["0"]}]})"), kNo},
      {"expressions of a term are ANDed",
       TERM(
           R"({"matchExpressions":[{"key":"zone","operator":"In","values":["a"]},{"key":"gen","operator":"Gt","values":["9"]}]})"),
       kNo},
      {"terms are ORed",
       TERM(
           R"({"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]},{"matchExpressions":[{"key":"gen","operator":"Lt","values":["9"]}]})"),
       ""},
      {"an empty term matches nothing", TERM(R"({})"), kNo},
      {"matchFields metadata.name In",
       TERM(R"({"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]})"), ""},
      {"matchFields metadata.name In another node",
       TERM(R"({"matchFields":[{"key":"metadata.name","operator":"In","values":["n2"]}]})"), kNo},
      {"matchFields metadata.name NotIn",
       TERM(R"({"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["n1"]}]})"),
       kNo},
      {"matchFields and matchExpressions are ANDed",
       TERM(
           R"({"matchExpressions":[{"key":"zone","operator":"Exists"}],"matchFields":[{"key":"metadata.name","operator":"In","values":["n2"]}]})"),
       kNo},
      {"nodeSelector matching but affinity not",
       R"({"nodeSelector":{"zone":"a"},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]}]}}}})",
       kNo},
      {"preferred affinity alone does not filter",
       R"({"affinity":{"nodeAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"preference":{"matchExpressions":[{"key":"zone","operator":"In","values":["b"]}]}}]}}})",
       ""},
  }));
  CAPTURE(name);
  const SchedNode node = nodeFrom(R"({"metadata":{"name":"n1","labels":{"zone":"a","gen":"5"}}})");
  CHECK(joined(nodeAffinityFilter(podFrom(spec), node)) == expected);
}
#undef TERM

TEST_CASE("a cordoned node takes only pods tolerating node.kubernetes.io/unschedulable",
          "[alloc]") {
  auto [name, tolerations, cordoned,
        expected] = GENERATE(table<std::string, std::string, bool, std::string>({
      {"schedulable node", "[]", false, ""},
      {"cordoned, no toleration", "[]", true, "node(s) were unschedulable"},
      {"cordoned, tolerated by key",
       R"([{"key":"node.kubernetes.io/unschedulable","operator":"Exists","effect":"NoSchedule"}])",
       true, ""},
      {"cordoned, tolerated by an empty-key Exists", R"([{"operator":"Exists"}])", true, ""},
      {"cordoned, toleration for NoExecute only",
       R"([{"key":"node.kubernetes.io/unschedulable","operator":"Exists","effect":"NoExecute"}])",
       true, "node(s) were unschedulable"},
  }));
  CAPTURE(name);
  SchedNode node = roomyNode("n1");
  node.unschedulable = cordoned;
  CHECK(joined(nodeUnschedulableFilter(podFrom(R"({"tolerations":)" + tolerations + "}"), node)) ==
        expected);
}

TEST_CASE("a pod naming a node fits only that node", "[alloc]") {
  CHECK(nodeNameFilter(podFrom(R"({"nodeName":"n1"})"), roomyNode("n1")).empty());
  CHECK(joined(nodeNameFilter(podFrom(R"({"nodeName":"n1"})"), roomyNode("n2"))) ==
        "node(s) didn't match the requested node name");
  CHECK(nodeNameFilter(podFrom("{}"), roomyNode("n2")).empty());
}

TEST_CASE("resource fit against allocatable minus what the node's pods request", "[alloc]") {
  // Node: 4 cpu, 8Gi, 3 pods, 10Gi ephemeral storage, 2 example.com/foo, 4 hugepages-2Mi.
  // Already there: 2 pods requesting 3 cpu, 4Gi, 1 foo.
  const SchedNode node = nodeFrom(R"({"metadata":{"name":"n1"},"status":{"allocatable":{
      "cpu":"4","memory":"8Gi","pods":"3","ephemeral-storage":"10Gi","example.com/foo":"2",
      "hugepages-2Mi":"8Mi"}}})");
  NodeUsage used;
  used.pods = 2;
  used.requested.milliCpu = 3000;
  used.requested.memory = 4LL << 30;
  used.requested.scalar["example.com/foo"] = 1;
  auto [name, requests, usedPods, options, expected] =
      GENERATE(table<std::string, std::string, std::int64_t, std::string, std::string>({
          {"exactly what is left", R"({"cpu":"1","memory":"4Gi"})", 2, "", ""},
          {"one millicore too many", R"({"cpu":"1001m"})", 2, "", "Insufficient cpu"},
          {"one byte too many", R"({"memory":"4294967297"})", 2, "", "Insufficient memory"},
          {"ephemeral storage", R"({"ephemeral-storage":"11Gi"})", 2, "",
           "Insufficient ephemeral-storage"},
          {"extended resource left", R"({"example.com/foo":"1"})", 2, "", ""},
          {"extended resource short", R"({"example.com/foo":"2"})", 2, "",
           "Insufficient example.com/foo"},
          {"extended resource the node lacks", R"({"other.io/bar":"1"})", 2, "",
           "Insufficient other.io/bar"},
          {"hugepages", R"({"hugepages-2Mi":"10Mi"})", 2, "", "Insufficient hugepages-2Mi"},
          {"ignored by name", R"({"example.com/foo":"2"})", 2, "name", ""},
          {"ignored by group", R"({"example.com/foo":"2"})", 2, "group", ""},
          {"pod count full, empty request", "{}", 3, "", "Too many pods"},
          {"every shortage is listed, pods first",
           R"({"example.com/foo":"5","cpu":"2","memory":"5Gi","ephemeral-storage":"11Gi"})", 3, "",
           "Too many pods | Insufficient cpu | Insufficient memory | Insufficient "
           "ephemeral-storage | Insufficient example.com/foo"},
          {"zero requests pass", R"({"cpu":"0","example.com/foo":"0"})", 2, "", ""},
      }));
  CAPTURE(name);
  const SchedPod pod =
      podFrom(R"({"containers":[{"name":"c","resources":{"requests":)" + requests + "}}]}");
  NodeUsage u = used;
  u.pods = usedPods;
  FitOptions fit;
  if (options == "name") {
    fit.ignoredResources.insert("example.com/foo");
  } else if (options == "group") {
    fit.ignoredResourceGroups.insert("example.com");
  }
  CHECK(joined(resourcesFitFilter(podRequests(pod), node, u, fit)) == expected);
}

TEST_CASE("the fit check uses the effective request (init containers and overhead)", "[alloc]") {
  const SchedNode node = nodeFrom(
      R"({"metadata":{"name":"n1"},"status":{"allocatable":{"cpu":"1","memory":"1Gi","pods":"10"}}})");
  // containers 600m, init 900m, overhead 200m: 1100m > 1000m although no part alone is.
  const SchedPod pod = podFrom(R"({
      "containers":[{"name":"a","resources":{"requests":{"cpu":"300m"}}},
                    {"name":"b","resources":{"requests":{"cpu":"300m"}}}],
      "initContainers":[{"name":"i","resources":{"requests":{"cpu":"900m"}}}],
      "overhead":{"cpu":"200m"}})");
  CHECK(joined(resourcesFitFilter(podRequests(pod), node, NodeUsage{})) == "Insufficient cpu");
}

TEST_CASE("kubecomp.io/gpu is left to the pool filter when ignored", "[alloc]") {
  const SchedNode node = roomyNode("n1");  // no GPU attached right now
  const SchedPod pod =
      podFrom(R"({"containers":[{"name":"c","resources":{"limits":{"kubecomp.io/gpu":"4"}}}]})");
  CHECK(joined(resourcesFitFilter(podRequests(pod), node, NodeUsage{})) ==
        "Insufficient kubecomp.io/gpu");
  FitOptions fit;
  fit.ignoredResources.insert(std::string(kGpuResource));
  CHECK(resourcesFitFilter(podRequests(pod), node, NodeUsage{}, fit).empty());
}

TEST_CASE("filterNodes: kube-scheduler's order, one filter's reasons per node, its message",
          "[alloc]") {
  // n1, n2: too busy for 2 cpu; n3, n4, n5: tainted dedicated=gpu (n5 also busy: only the taint
  // is reported, the taint filter runs before the fit filter).
  std::vector<SchedNode> nodes;
  std::vector<NodeUsage> usage(5);
  for (int i = 1; i <= 5; ++i) {
    nodes.push_back(roomyNode("n" + std::to_string(i)));
  }
  for (int i : {0, 1, 4}) {
    usage[i].pods = 1;
    usage[i].requested.milliCpu = 7000;
  }
  for (int i : {2, 3, 4}) {
    nodes[i].taints.push_back(Taint{"dedicated", "gpu", TaintEffect::NoSchedule});
  }
  const SchedPod pod =
      podFrom(R"({"containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]})");
  auto r = filterNodes(pod, nodes, usage);
  REQUIRE(r);
  CHECK(r->feasible.empty());
  REQUIRE(r->rejected.size() == 5);
  CHECK(joined(r->rejected[4].reasons) == "node(s) had untolerated taint {dedicated: gpu}");
  CHECK(r->message ==
        "0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint "
        "{dedicated: gpu}.");

  SECTION("a tolerating pod is left with the fit reasons, and one node fits") {
    const SchedPod tolerant = podFrom(
        R"({"tolerations":[{"key":"dedicated","operator":"Equal","value":"gpu","effect":"NoSchedule"}],
            "containers":[{"name":"c","resources":{"requests":{"cpu":"2"}}}]})");
    auto t = filterNodes(tolerant, nodes, usage);
    REQUIRE(t);
    CHECK(t->feasible == std::vector<std::size_t>{2, 3});
    CHECK(t->rejected.size() == 3);
    CHECK(t->message.empty());
  }
}

TEST_CASE("unschedulableMessage: counts per reason, sorted as strings", "[alloc]") {
  // kube-scheduler sorts the "<count> <reason>" strings, so "10 ..." comes before "2 ...".
  std::vector<RejectedNode> rejected;
  for (std::size_t i = 0; i < 10; ++i) {
    rejected.push_back(RejectedNode{i, {"node(s) were unschedulable"}});
  }
  rejected.push_back(RejectedNode{10, {"Insufficient cpu", "Insufficient memory"}});
  rejected.push_back(RejectedNode{11, {"Insufficient cpu"}});
  CHECK(unschedulableMessage(12, rejected) ==
        "0/12 nodes are available: 1 Insufficient memory, 10 node(s) were unschedulable, 2 "
        "Insufficient cpu.");
  CHECK(unschedulableMessage(0, {}) == "no nodes available to schedule pods");
}

TEST_CASE("filterNodes refuses usage that does not line up with the nodes", "[alloc]") {
  std::vector<SchedNode> nodes{roomyNode("n1"), roomyNode("n2")};
  std::vector<NodeUsage> usage(1);
  auto r = filterNodes(podFrom("{}"), nodes, usage);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == "invalid");
}

TEST_CASE("filterNodes with no nodes says so as kube-scheduler does", "[alloc]") {
  auto r = filterNodes(podFrom("{}"), {}, {});
  REQUIRE(r);
  CHECK(r->message == "no nodes available to schedule pods");
}

TEST_CASE("the RT hook runs last, only on nodes that passed, and its reasons count", "[alloc]") {
  std::vector<SchedNode> nodes{roomyNode("n1"), roomyNode("n2"), roomyNode("n3")};
  nodes[0].unschedulable = true;
  std::vector<NodeUsage> usage(3);
  std::vector<std::string> asked;
  FilterOptions options;
  options.rt = [&asked](const SchedPod&, const Resources& request, const SchedNode& node,
                        const NodeUsage&) -> FilterReasons {
    asked.push_back(node.name + "@" + std::to_string(request.milliCpu));
    if (node.name == "n2") {
      return {"node(s) had no RT capacity"};
    }
    return {};
  };
  const SchedPod pod =
      podFrom(R"({"containers":[{"name":"c","resources":{"requests":{"cpu":"250m"}}}]})");
  auto r = filterNodes(pod, nodes, usage, options);
  REQUIRE(r);
  CHECK(asked == std::vector<std::string>{"n2@250", "n3@250"});
  CHECK(r->feasible == std::vector<std::size_t>{2});

  SECTION("no hook: no RT filter") {
    auto plain = filterNodes(pod, nodes, usage);
    REQUIRE(plain);
    CHECK(plain->feasible == std::vector<std::size_t>{1, 2});
  }
  SECTION("nothing left: the hook's reason is in the message") {
    nodes[2].unschedulable = true;
    auto none = filterNodes(pod, nodes, usage, options);
    REQUIRE(none);
    CHECK(none->message ==
          "0/3 nodes are available: 1 node(s) had no RT capacity, 2 node(s) were unschedulable.");
  }
}
