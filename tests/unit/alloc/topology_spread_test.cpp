// kube-scheduler's PodTopologySpread filter (topology_spread.hpp): hand-written verdicts from the
// documentation ("Pod Topology Spread Constraints") on a three-zone cluster, then random pods
// with random constraints checked node by node against spread_oracle.hpp (written from the
// documentation, not from the code), and placePod's choice checked to be a node it allows.

#include "libcore/alloc/topology_spread.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/spread_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;
using kc::alloc::test::naiveSpread;
using kc::alloc::test::SpreadNode;
using nlohmann::json;

namespace {

json spreadPod(const std::string& name, const json& labels, const json& constraints,
               const json& nodeSelector = json()) {
  json spec = {{"containers", json::array({{{"name", "c"}}})}};
  if (!constraints.is_null()) {  // {c} of one json is that json, not a list
    spec["topologySpreadConstraints"] =
        constraints.is_array() ? constraints : json::array({constraints});
  }
  if (!nodeSelector.is_null()) {
    spec["nodeSelector"] = nodeSelector;
  }
  return {{"metadata", {{"name", name}, {"namespace", "team"}, {"labels", labels}}},
          {"spec", spec}};
}

SchedPod parsed(const json& obj) {
  auto p = parsePod(obj);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

SchedNode makeNode(const SpreadNode& n) {
  json obj = {{"metadata", {{"name", n.name}, {"labels", n.labels}}},
              {"status", {{"allocatable", {{"cpu", "8"}, {"pods", "110"}}}}}};
  if (n.tainted) {
    obj["spec"] = {{"taints", json::array({{{"key", "k"}, {"effect", "NoSchedule"}}})}};
  }
  auto out = parseNode(obj);
  REQUIRE(out);
  return *out;
}

json constraint(int maxSkew, const std::string& key, const json& extra = json::object()) {
  json c = {{"maxSkew", maxSkew},
            {"topologyKey", key},
            {"whenUnsatisfiable", "DoNotSchedule"},
            {"labelSelector", {{"matchLabels", {{"foo", "bar"}}}}}};
  for (const auto& [k, v] : extra.items()) {
    c[k] = v;
  }
  return c;
}

std::string verdict(const FilterReasons& r) {
  if (r.empty()) {
    return "ok";
  }
  if (r[0] == kReasonSpread) {
    return "spread";
  }
  if (r[0] == kReasonSpreadMissingLabel) {
    return "missing";
  }
  if (r[0].rfind("node(s) had untolerated taint", 0) == 0) {
    return "taint";
  }
  if (r[0] == kReasonNodeAffinity) {
    return "nodeaffinity";
  }
  return r[0];
}

// Every node's verdict, "n1:ok n2:spread ...".
std::string verdicts(const json& incoming, std::vector<SpreadNode>& all, bool oracle) {
  std::vector<SchedNode> nodes;
  PlacedPods placed;
  for (const auto& n : all) {
    nodes.push_back(makeNode(n));
    int k = 0;
    for (const auto& p : n.pods) {
      placed.place(n.name + "/" + std::to_string(k++), n.name, parsed(p));
    }
  }
  std::vector<NodeUsage> usage(nodes.size());
  FilterOptions options;
  options.placed = &placed;
  auto result = filterNodes(parsed(incoming), nodes, usage, options);
  REQUIRE(result);
  std::map<std::size_t, std::string> got;
  for (std::size_t i : result->feasible) {
    got[i] = "ok";
  }
  for (const auto& r : result->rejected) {
    got[r.node] = verdict(r.reasons);
  }
  std::string text;
  for (std::size_t i = 0; i < all.size(); ++i) {
    std::string v = got[i];
    if (oracle && (v == "ok" || v == "spread" || v == "missing")) {
      v = naiveSpread(incoming, all[i], all);
    }
    text += (i ? " " : "") + all[i].name + ":" + v;
  }
  return text;
}

}  // namespace

TEST_CASE("topology spread: documented verdicts on a three-zone cluster", "[alloc][sched]") {
  const json foo = {{"foo", "bar"}};
  const std::string zone = "zone";
  const json main = {{"pool", "main"}};
  auto [name, incoming, expected] = GENERATE_COPY(table<std::string, json, std::string>({
      {"maxSkew 1: the empty tainted zone counts (nodeTaintsPolicy Ignore)",
       spreadPod("in", foo, {constraint(1, zone)}),
       "n1:spread n2:spread n3:spread n4:spread n5:taint nz:missing"},
      {"nodeTaintsPolicy Honor leaves the tainted zone out",
       spreadPod("in", foo, {constraint(1, zone, {{"nodeTaintsPolicy", "Honor"}})}),
       "n1:spread n2:spread n3:ok n4:ok n5:taint nz:missing"},
      {"nodeAffinityPolicy Honor: a zone the nodeSelector excludes does not count",
       spreadPod("in", foo, {constraint(1, zone)}, main),
       "n1:spread n2:spread n3:ok n4:ok n5:taint nz:missing"},
      {"nodeAffinityPolicy Ignore counts it again",
       spreadPod("in", foo, {constraint(1, zone, {{"nodeAffinityPolicy", "Ignore"}})}, main),
       "n1:spread n2:spread n3:spread n4:spread n5:taint nz:missing"},
      {"maxSkew 3", spreadPod("in", foo, {constraint(3, zone)}),
       "n1:ok n2:ok n3:ok n4:ok n5:taint nz:missing"},
      {"minDomains above the domains there are: the minimum is 0",
       spreadPod("in", foo,
                 {constraint(1, zone, {{"nodeTaintsPolicy", "Honor"}, {"minDomains", 3}})}),
       "n1:spread n2:spread n3:spread n4:spread n5:taint nz:missing"},
      {"minDomains met",
       spreadPod("in", foo,
                 {constraint(1, zone, {{"nodeTaintsPolicy", "Honor"}, {"minDomains", 2}})}),
       "n1:spread n2:spread n3:ok n4:ok n5:taint nz:missing"},
      {"ScheduleAnyway does not filter",
       spreadPod("in", foo, {constraint(1, zone, {{"whenUnsatisfiable", "ScheduleAnyway"}})}),
       "n1:ok n2:ok n3:ok n4:ok n5:taint nz:ok"},
      {"a pod its own selector does not select adds nothing",
       spreadPod("in", {{"foo", "baz"}}, {constraint(1, zone)}),
       "n1:spread n2:spread n3:ok n4:ok n5:taint nz:missing"},
      {"per host", spreadPod("in", foo, {constraint(1, "kubernetes.io/hostname")}),
       "n1:spread n2:spread n3:spread n4:ok n5:taint nz:ok"},
      {"two constraints: a node must carry both keys",
       spreadPod("in", foo, {constraint(3, zone), constraint(1, "kubernetes.io/hostname")}),
       "n1:spread n2:spread n3:spread n4:ok n5:taint nz:missing"},
      {"matchLabelKeys: only the pod's own version counts",
       spreadPod("in", {{"foo", "bar"}, {"version", "v2"}},
                 {constraint(1, zone,
                             {{"nodeTaintsPolicy", "Honor"}, {"matchLabelKeys", {"version"}}})}),
       "n1:ok n2:ok n3:ok n4:ok n5:taint nz:missing"},
  }));
  CAPTURE(name);
  auto host = [](const char* n, json extra) {
    extra["kubernetes.io/hostname"] = n;
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : extra.items()) {
      out[k] = v.get<std::string>();
    }
    return out;
  };
  std::vector<SpreadNode> all{
      {"n1", host("n1", {{"zone", "a"}, {"pool", "main"}}), false, {}},
      {"n2", host("n2", {{"zone", "a"}, {"pool", "main"}}), false, {}},
      {"n3", host("n3", {{"zone", "b"}, {"pool", "main"}}), false, {}},
      {"n4", host("n4", {{"zone", "b"}, {"pool", "main"}}), false, {}},
      {"n5", host("n5", {{"zone", "c"}, {"pool", "other"}}), true, {}},
      {"nz", host("nz", {{"pool", "main"}}), false, {}},
  };
  // Zone a holds 2 foo=bar pods (versions v2, v1), zone b 1 (v2), zone c none; a foo=bar pod
  // of another namespace on n2 does not count.
  all[0].pods.push_back(spreadPod("a", {{"foo", "bar"}, {"version", "v2"}}, json()));
  all[1].pods.push_back(spreadPod("b", {{"foo", "bar"}, {"version", "v1"}}, json()));
  all[2].pods.push_back(spreadPod("c", {{"foo", "bar"}, {"version", "v2"}}, json()));
  all[1].pods.push_back(spreadPod("other-ns", {{"foo", "bar"}}, json()));
  all[1].pods.back()["metadata"]["namespace"] = "elsewhere";  // not counted
  CHECK(verdicts(incoming, all, false) == expected);
  CHECK(verdicts(incoming, all, true) == expected);
}

TEST_CASE("topology spread: bad constraints are refused naming the field", "[alloc][sched]") {
  auto zeroSkew = parsePod(spreadPod("p", json::object(), {constraint(0, "zone")}));
  REQUIRE_FALSE(zeroSkew);
  CHECK(zeroSkew.error().message ==
        "spec.topologySpreadConstraints[0].maxSkew: must be a positive integer");
  auto when = parsePod(
      spreadPod("p", json::object(), {constraint(1, "zone", {{"whenUnsatisfiable", "Never"}})}));
  REQUIRE_FALSE(when);
  CHECK(when.error().message ==
        "spec.topologySpreadConstraints[0].whenUnsatisfiable: must be DoNotSchedule or "
        "ScheduleAnyway");
  auto minDomains = parsePod(spreadPod(
      "p", json::object(),
      {constraint(1, "zone", {{"whenUnsatisfiable", "ScheduleAnyway"}, {"minDomains", 2}})}));
  REQUIRE_FALSE(minDomains);
  CHECK(minDomains.error().message ==
        "spec.topologySpreadConstraints[0].minDomains: only with whenUnsatisfiable DoNotSchedule");
}

TEST_CASE("topology spread: random constraints, the filter agrees with the oracle",
          "[alloc][sched]") {
  SplitMix64 rng(3939);
  const std::vector<std::string> keys{"zone", "kubernetes.io/hostname", "rack"};
  auto pick = [&](const auto& v) { return v[rng.below(v.size())]; };
  int placedCount = 0;
  int refused = 0;
  std::map<std::string, int> seen;
  for (int round = 0; round < 300; ++round) {
    std::vector<SpreadNode> all;
    const int n = 2 + static_cast<int>(rng.below(6));
    auto builder = makeCluster().pool("p");
    for (int i = 0; i < n; ++i) {
      SpreadNode node{"n" + std::to_string(i),
                      {{"kubernetes.io/hostname", "n" + std::to_string(i)}},
                      rng.below(6) == 0,
                      {}};
      if (rng.below(6) != 0) {
        node.labels["zone"] = "z" + std::to_string(rng.below(3));
      }
      if (rng.below(2) == 0) {
        node.labels["rack"] = "r" + std::to_string(rng.below(2));
      }
      node.labels["pool"] = rng.below(4) == 0 ? "other" : "main";
      const auto pods = rng.below(4);
      for (std::uint64_t k = 0; k < pods; ++k) {
        json labels = {{"foo", rng.below(3) == 0 ? "baz" : "bar"},
                       {"version", pick(std::vector<std::string>{"v1", "v2"})}};
        node.pods.push_back(spreadPod("p" + std::to_string(k), labels, json()));
      }
      all.push_back(std::move(node));
      builder.node(all.back().name, 2);
    }
    json constraints = json::array();
    const auto count = 1 + rng.below(2);
    for (std::uint64_t k = 0; k < count; ++k) {
      json extra = json::object();
      if (rng.below(5) == 0) {
        extra["whenUnsatisfiable"] = "ScheduleAnyway";
      } else if (rng.below(3) == 0) {
        extra["minDomains"] = 1 + static_cast<int>(rng.below(4));
      }
      if (rng.below(3) == 0) {
        extra["nodeTaintsPolicy"] = "Honor";
      }
      if (rng.below(4) == 0) {
        extra["nodeAffinityPolicy"] = "Ignore";
      }
      if (rng.below(4) == 0) {
        extra["matchLabelKeys"] = {"version"};
      }
      constraints.push_back(constraint(1 + static_cast<int>(rng.below(2)), pick(keys), extra));
    }
    const json incoming =
        spreadPod("in", {{"foo", rng.below(4) == 0 ? "baz" : "bar"}, {"version", "v1"}},
                  constraints, rng.below(3) == 0 ? json{{"pool", "main"}} : json());
    const std::string got = verdicts(incoming, all, false);
    CAPTURE(round, incoming.dump(), got);
    CHECK(got == verdicts(incoming, all, true));
    for (std::size_t i = 0; i < all.size(); ++i) {
      ++seen[naiveSpread(incoming, all[i], all)];
    }
    // placePod chooses a node every filter allows, or none when none does.
    std::vector<SchedNode> nodes;
    PlacedPods placed;
    for (const auto& node : all) {
      nodes.push_back(makeNode(node));
      int k = 0;
      for (const auto& p : node.pods) {
        placed.place(node.name + "/" + std::to_string(k++), node.name, parsed(p));
      }
    }
    std::vector<NodeUsage> usage(nodes.size());
    PlacementOptions options;
    options.filter.placed = &placed;
    const ClusterState state = builder.build();
    auto choice = placePod(parsed(incoming), nodes, usage, state, options);
    if (choice) {
      ++placedCount;
      CHECK(got.find(nodes[choice->node].name + ":ok") != std::string::npos);
    } else {
      ++refused;
      CHECK(got.find(":ok") == std::string::npos);
    }
  }
  CAPTURE(seen);
  CHECK(seen["spread"] > 50);
  CHECK(seen["missing"] > 20);
  CHECK(placedCount > 50);
  CHECK(refused > 10);
}
