// Pod Scheduling Readiness (spec.schedulingGates) and kube-scheduler's NodePorts filter
// (node_ports.hpp), table-driven. The expected verdicts are written by hand from the
// documentation; the random mixes are checked against ports_oracle.hpp, a separate reading of
// the Pod objects written from the documentation, not from the code under test.

#include "libcore/alloc/node_ports.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_fields.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/ports_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::naivePortsFree;
using nlohmann::json;

namespace {

// A Pod object whose first container binds `ports` (a JSON list of containerPort entries).
json podObject(const std::string& name, const json& ports, const json& extraSpec = json::object()) {
  json spec = {{"containers", json::array({{{"name", "c"}, {"ports", ports}}})}};
  for (const auto& [k, v] : extraSpec.items()) {
    spec[k] = v;
  }
  return {{"metadata", {{"name", name}, {"namespace", "ns"}}}, {"spec", spec}};
}

SchedPod parsed(const json& obj) {
  auto p = parsePod(obj);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

SchedNode roomyNode(const std::string& name) {
  auto n = parseNode(json{{"metadata", {{"name", name}}},
                          {"status", {{"allocatable", {{"cpu", "8"}, {"pods", "110"}}}}}});
  REQUIRE(n);
  return *n;
}

json port(int hostPort, const std::string& protocol = "", const std::string& hostIP = "") {
  json p = {{"containerPort", 8080}, {"hostPort", hostPort}};
  if (!protocol.empty()) {
    p["protocol"] = protocol;
  }
  if (!hostIP.empty()) {
    p["hostIP"] = hostIP;
  }
  return p;
}

}  // namespace

TEST_CASE("scheduling gates: parsed by name, a gated pod stays gated until every gate is gone",
          "[alloc][sched]") {
  SchedPod open = parsed(podObject("p", json::array()));
  CHECK_FALSE(schedulingGated(open));
  SchedPod gated = parsed(podObject(
      "p", json::array(),
      {{"schedulingGates",
        json::array({{{"name", "kueue.x-k8s.io/admission"}}, {{"name", "example.com/foo"}}})}}));
  CHECK(schedulingGated(gated));
  CHECK(gated.schedulingGates ==
        std::vector<std::string>{"kueue.x-k8s.io/admission", "example.com/foo"});
  CHECK_FALSE(
      schedulingGated(parsed(podObject("p", json::array(), {{"schedulingGates", json::array()}}))));
  auto bad = parsePod(podObject("p", json::array(), {{"schedulingGates", json::array({json{}})}}));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message == "spec.schedulingGates[0].name: must be a non-empty string");
}

TEST_CASE("host ports: defaults, init containers and bad input", "[alloc][sched]") {
  SchedPod p = parsed(podObject(
      "p", json::array({port(80), port(0), port(53, "UDP", "10.0.0.1"), {{"containerPort", 9000}}}),
      {{"initContainers", json::array({{{"name", "i"}, {"ports", {port(81)}}}})}}));
  // hostPort 0 or left out binds nothing; init containers' ports do not count.
  REQUIRE(p.hostPorts.size() == 2);
  CHECK(p.hostPorts[0] == HostPort{"0.0.0.0", "TCP", 80});
  CHECK(p.hostPorts[1] == HostPort{"10.0.0.1", "UDP", 53});
  auto bad = parsePod(podObject("p", json::array({port(70000)})));
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message ==
        "spec.containers[0].ports[0].hostPort: must be an integer in 0..65535");
  auto proto = parsePod(podObject("p", json::array({port(80, "HTTP")})));
  REQUIRE_FALSE(proto);
  CHECK(proto.error().message ==
        "spec.containers[0].ports[0].protocol: 'HTTP' is not one of TCP, UDP, SCTP");
  json withLabel = podObject("p", json::array());
  withLabel["metadata"]["labels"] = {{"app", 3}};
  auto labels = parsePod(withLabel);
  REQUIRE_FALSE(labels);
  CHECK(labels.error().message == "metadata.labels[app]: not a string");
}

TEST_CASE("NodePorts: a host port taken on the node refuses it", "[alloc][sched]") {
  auto [name, used, wanted, fits] = GENERATE(table<std::string, json, json, bool>({
      {"same port, both on every address", json::array({port(80)}), json::array({port(80)}), false},
      {"another port", json::array({port(80)}), json::array({port(81)}), true},
      {"same port, another protocol", json::array({port(53, "TCP")}),
       json::array({port(53, "UDP")}), true},
      {"protocol left out is TCP", json::array({port(53, "TCP")}), json::array({port(53)}), false},
      {"two distinct addresses", json::array({port(80, "TCP", "10.0.0.1")}),
       json::array({port(80, "TCP", "10.0.0.2")}), true},
      {"the same address", json::array({port(80, "TCP", "10.0.0.1")}),
       json::array({port(80, "TCP", "10.0.0.1")}), false},
      {"taken on every address, wanted on one", json::array({port(80)}),
       json::array({port(80, "", "10.0.0.1")}), false},
      {"taken on one address, wanted on every one", json::array({port(80, "", "10.0.0.1")}),
       json::array({port(80, "", "0.0.0.0")}), false},
      {"SCTP against SCTP", json::array({port(9, "SCTP")}), json::array({port(9, "SCTP")}), false},
      {"one of several wanted ports taken", json::array({port(443)}),
       json::array({port(80), port(443)}), false},
      {"no host port wanted", json::array({port(80)}), json::array({json{{"containerPort", 80}}}),
       true},
  }));
  CAPTURE(name);
  PlacedPods placed;
  placed.place("ns/old", "n1", parsed(podObject("old", used)));
  SchedPod pod = parsed(podObject("new", wanted));
  const SchedNode n1 = roomyNode("n1");
  const SchedNode n2 = roomyNode("n2");
  CHECK(nodePortsFilter(pod, n1, &placed).empty() == fits);
  CHECK(nodePortsFilter(pod, n2, &placed).empty());  // nothing on n2
  CHECK(naivePortsFree(podObject("new", wanted), {podObject("old", used)}) == fits);

  // Through the filter chain, with kube-scheduler's message.
  std::vector<SchedNode> nodes{n1};
  std::vector<NodeUsage> usage(1);
  FilterOptions options;
  options.placed = &placed;
  auto result = filterNodes(pod, nodes, usage, options);
  REQUIRE(result);
  CHECK(result->message ==
        (fits ? ""
              : "0/1 nodes are available: 1 node(s) didn't have free ports for the "
                "requested pod ports."));
}

TEST_CASE("NodePorts: the pod itself does not conflict with its own ports (its reservation)",
          "[alloc][sched]") {
  PlacedPods placed;
  const json obj = podObject("me", json::array({port(80)}));
  placed.place("ns/me", "n1", parsed(obj));
  CHECK(nodePortsFilter(parsed(obj), roomyNode("n1"), &placed).empty());
  placed.remove("ns/me");
  placed.place("ns/other", "n1", parsed(podObject("other", json::array({port(80)}))));
  CHECK_FALSE(nodePortsFilter(parsed(obj), roomyNode("n1"), &placed).empty());
  placed.place("ns/other", "n2", parsed(podObject("other", json::array({port(80)}))));  // moved
  CHECK(nodePortsFilter(parsed(obj), roomyNode("n1"), &placed).empty());
  CHECK(placed.size() == 1);
}

TEST_CASE("NodePorts: random pods with ports, the filter agrees with the oracle",
          "[alloc][sched]") {
  SplitMix64 rng(27);
  const std::vector<std::string> ips{"", "0.0.0.0", "10.0.0.1", "10.0.0.2"};
  const std::vector<std::string> protos{"", "TCP", "UDP", "SCTP"};
  auto randomPorts = [&] {
    json ports = json::array();
    const auto count = rng.below(3);
    for (std::uint64_t i = 0; i < count; ++i) {
      ports.push_back(port(static_cast<int>(80 + rng.below(3)), protos[rng.below(protos.size())],
                           ips[rng.below(ips.size())]));
    }
    return ports;
  };
  int refused = 0;
  for (int round = 0; round < 300; ++round) {
    const int nodeCount = 1 + static_cast<int>(rng.below(4));
    std::vector<SchedNode> nodes;
    std::vector<std::vector<json>> onNode(nodeCount);
    PlacedPods placed;
    for (int n = 0; n < nodeCount; ++n) {
      nodes.push_back(roomyNode("n" + std::to_string(n)));
      const auto pods = rng.below(3);
      for (std::uint64_t k = 0; k < pods; ++k) {
        const std::string name = "p" + std::to_string(n) + "-" + std::to_string(k);
        json obj = podObject(name, randomPorts());
        placed.place("ns/" + name, nodes.back().name, parsed(obj));
        onNode[n].push_back(std::move(obj));
      }
    }
    const json incoming = podObject("incoming", randomPorts());
    std::vector<NodeUsage> usage(nodes.size());
    FilterOptions options;
    options.placed = &placed;
    auto result = filterNodes(parsed(incoming), nodes, usage, options);
    REQUIRE(result);
    std::vector<std::size_t> expected;
    for (int n = 0; n < nodeCount; ++n) {
      if (naivePortsFree(incoming, onNode[n])) {
        expected.push_back(static_cast<std::size_t>(n));
      }
    }
    CAPTURE(round, incoming.dump());
    CHECK(result->feasible == expected);
    refused += static_cast<int>(result->rejected.size());
  }
  CHECK(refused > 50);  // the mix does exercise conflicts
}
