// kube-scheduler's InterPodAffinity filter (pod_affinity.hpp): hand-written verdicts from the
// documentation ("Assigning Pods to Nodes") on a two-zone cluster, then random pods mixing
// affinity, anti-affinity, namespaces, namespaceSelector, host ports, node selectors and taints,
// each node's verdict checked against affinity_oracle.hpp and ports_oracle.hpp (written from the
// documentation, not from the code), and placePod's choice checked to be a node they allow.

#include "libcore/alloc/pod_affinity.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/affinity_oracle.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/ports_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::makeCluster;
using kc::alloc::test::naiveInterPod;
using kc::alloc::test::naivePortsFree;
using kc::alloc::test::OracleNode;
using nlohmann::json;

namespace {

using NsLabels = std::map<std::string, std::map<std::string, std::string>>;

json podJson(const std::string& name, const std::string& ns, const json& labels,
             const json& affinity, const json& extraSpec = json::object()) {
  json spec = {{"containers", json::array({{{"name", "c"}}})}};
  if (!affinity.is_null()) {
    spec["affinity"] = affinity;
  }
  for (const auto& [k, v] : extraSpec.items()) {
    spec[k] = v;
  }
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}}, {"spec", spec}};
}

SchedPod parsed(const json& obj) {
  auto p = parsePod(obj);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

SchedNode nodeJson(const std::string& name, const json& labels, const json& taints = json()) {
  json n = {{"metadata", {{"name", name}, {"labels", labels}}},
            {"status", {{"allocatable", {{"cpu", "8"}, {"pods", "110"}}}}}};
  if (!taints.is_null()) {
    n["spec"] = {{"taints", taints}};
  }
  auto out = parseNode(n);
  REQUIRE(out);
  return *out;
}

json term(const json& selector, const std::string& key, const json& extra = json::object()) {
  json t = {{"labelSelector", selector}, {"topologyKey", key}};
  for (const auto& [k, v] : extra.items()) {
    t[k] = v;
  }
  return t;
}

// `terms`: one term, or a list of them ({t} of one json is that json, not a list).
json required(const char* side, const json& terms) {
  const json list = terms.is_array() ? terms : json::array({terms});
  return {{side, {{"requiredDuringSchedulingIgnoredDuringExecution", list}}}};
}

std::string verdict(const FilterReasons& r) {
  if (r.empty()) {
    return "ok";
  }
  if (r[0] == kReasonExistingAntiAffinity) {
    return "existing";
  }
  if (r[0] == kReasonPodAffinity) {
    return "affinity";
  }
  if (r[0] == kReasonPodAntiAffinity) {
    return "anti";
  }
  return r[0];
}

}  // namespace

TEST_CASE("inter-pod affinity: documented verdicts on a two-zone cluster", "[alloc][sched]") {
  const json db = json{{"matchLabels", {{"app", "db"}}}};
  const json cache = json{{"matchLabels", {{"app", "cache"}}}};
  const std::string zone = "topology.kubernetes.io/zone";
  const std::string host = "kubernetes.io/hostname";
  auto [name, incoming, nsTeamLabels,
        expected] = GENERATE_COPY(table<std::string, json, json, std::string>({
      {"affinity to app=db by zone",
       podJson("in", "team", json::object(), required("podAffinity", {term(db, zone)})),
       json::object(), "a1:ok a2:ok b1:affinity nz:affinity"},
      {"affinity to app=db by host",
       podJson("in", "team", json::object(), required("podAffinity", {term(db, host)})),
       json::object(), "a1:ok a2:affinity b1:affinity nz:affinity"},
      {"anti-affinity to app=db by zone; no zone label passes",
       podJson("in", "team", json::object(), required("podAntiAffinity", {term(db, zone)})),
       json::object(), "a1:anti a2:anti b1:ok nz:ok"},
      {"a running pod's anti-affinity keeps app=web out of its zone",
       podJson("in", "team", {{"app", "web"}}, nullptr), json::object(),
       "a1:ok a2:ok b1:existing nz:ok"},
      {"the first pod of a series matching its own affinity",
       podJson("in", "team", {{"app", "cache"}}, required("podAffinity", {term(cache, zone)})),
       json::object(), "a1:ok a2:ok b1:ok nz:affinity"},
      {"affinity to a pod nowhere, not matching itself",
       podJson("in", "team", json::object(), required("podAffinity", {term(cache, zone)})),
       json::object(), "a1:affinity a2:affinity b1:affinity nz:affinity"},
      {"another namespace listed: app=db of team is not covered",
       podJson("in", "team", json::object(),
               required("podAffinity", {term(db, zone, {{"namespaces", {"other"}}})})),
       json::object(), "a1:affinity a2:affinity b1:affinity nz:affinity"},
      {"namespaceSelector {} covers every namespace",
       podJson("in", "elsewhere", json::object(),
               required("podAffinity", {term(db, zone, {{"namespaceSelector", json::object()}})})),
       json::object(), "a1:ok a2:ok b1:affinity nz:affinity"},
      {"namespaceSelector by the namespace's labels",
       podJson("in", "elsewhere", json::object(),
               required("podAffinity",
                        {term(db, zone,
                              {{"namespaceSelector", {{"matchLabels", {{"env", "prod"}}}}}})})),
       json{{"env", "prod"}}, "a1:ok a2:ok b1:affinity nz:affinity"},
      {"namespaceSelector not matching",
       podJson("in", "elsewhere", json::object(),
               required("podAffinity",
                        {term(db, zone,
                              {{"namespaceSelector", {{"matchLabels", {{"env", "prod"}}}}}})})),
       json{{"env", "dev"}}, "a1:affinity a2:affinity b1:affinity nz:affinity"},
      {"a missing labelSelector matches no pod",
       podJson("in", "team", json::object(),
               required("podAntiAffinity", {json{{"topologyKey", zone}}})),
       json::object(), "a1:ok a2:ok b1:ok nz:ok"},
      {"an empty labelSelector matches every pod of the namespace",
       podJson("in", "team", json::object(),
               required("podAntiAffinity", {term(json::object(), zone)})),
       json::object(), "a1:anti a2:anti b1:anti nz:ok"},
  }));
  CAPTURE(name);
  std::vector<SchedNode> nodes{
      nodeJson("a1", {{zone, "a"}, {host, "a1"}}), nodeJson("a2", {{zone, "a"}, {host, "a2"}}),
      nodeJson("b1", {{zone, "b"}, {host, "b1"}}), nodeJson("nz", {{host, "nz"}})};
  PlacedPods placed;
  const json dbPod = podJson("db", "team", {{"app", "db"}}, nullptr);
  const json lonely =
      podJson("lonely", "team", {{"app", "lonely"}},
              required("podAntiAffinity", {term(json{{"matchLabels", {{"app", "web"}}}}, zone)}));
  placed.place("team/db", "a1", parsed(dbPod));
  placed.place("team/lonely", "b1", parsed(lonely));
  NamespaceLabels namespaces;
  namespaces["elsewhere"] = {};
  namespaces["team"] = {};
  for (const auto& [k, v] : nsTeamLabels.items()) {
    namespaces["team"][k] = v.get<std::string>();
  }
  std::vector<NodeUsage> usage(nodes.size());
  FilterOptions options;
  options.placed = &placed;
  options.namespaces = &namespaces;
  const SchedPod pod = parsed(incoming);
  auto result = filterNodes(pod, nodes, usage, options);
  REQUIRE(result);
  std::map<std::size_t, std::string> got;
  for (std::size_t i : result->feasible) {
    got[i] = "ok";
  }
  for (const auto& r : result->rejected) {
    got[r.node] = verdict(r.reasons);
  }
  std::string text;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    text += (i ? " " : "") + nodes[i].name + ":" + got[i];
  }
  CHECK(text == expected);

  // The oracle reads the same cluster the same way.
  std::vector<OracleNode> all;
  for (const auto& n : nodes) {
    all.push_back({n.name, {n.labels.begin(), n.labels.end()}, {}});
  }
  all[0].pods.push_back(dbPod);
  all[2].pods.push_back(lonely);
  NsLabels ns{{"team", {namespaces["team"].begin(), namespaces["team"].end()}}, {"elsewhere", {}}};
  std::string oracle;
  for (std::size_t i = 0; i < all.size(); ++i) {
    oracle += (i ? " " : "") + all[i].name + ":" + naiveInterPod(incoming, all[i], all, ns);
  }
  CHECK(oracle == expected);
}

TEST_CASE("inter-pod affinity: bad terms are refused naming the field", "[alloc][sched]") {
  auto missingKey =
      parsePod(podJson("p", "team", json::object(),
                       required("podAffinity", {json{{"labelSelector", json::object()}}})));
  REQUIRE_FALSE(missingKey);
  CHECK(missingKey.error().message ==
        "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]."
        "topologyKey: required");
  auto badOp = parsePod(podJson(
      "p", "team", json::object(),
      required(
          "podAntiAffinity",
          {term(json{{"matchExpressions", {{{"key", "a"}, {"operator", "Gt"}, {"values", {"1"}}}}}},
                "zone")})));
  REQUIRE_FALSE(badOp);
  CHECK(badOp.error().message ==
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]."
        "labelSelector.matchExpressions[0].operator: 'Gt' is not one of In, NotIn, Exists, "
        "DoesNotExist");
  auto badWeight = parsePod(
      podJson("p", "team", json::object(),
              {{"podAffinity",
                {{"preferredDuringSchedulingIgnoredDuringExecution",
                  {{{"weight", 0}, {"podAffinityTerm", term(json::object(), "zone")}}}}}}}));
  REQUIRE_FALSE(badWeight);
  CHECK(badWeight.error().message ==
        "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be an integer in 1..100");
  // Preferred terms alone constrain nothing (and a pod with only node affinity has none).
  auto preferred = parsePod(
      podJson("p", "team", json::object(),
              {{"podAntiAffinity",
                {{"preferredDuringSchedulingIgnoredDuringExecution",
                  {{{"weight", 10}, {"podAffinityTerm", term(json::object(), "zone")}}}}}}}));
  REQUIRE(preferred);
  REQUIRE(preferred->podAffinity != nullptr);
  CHECK(preferred->podAffinity->requiredAnti.empty());
  CHECK(preferred->podAffinity->preferredAnti.size() == 1);
}

TEST_CASE("inter-pod affinity: random pods mixing the features, placePod picks an allowed node",
          "[alloc][sched]") {
  SplitMix64 rng(2727);
  const std::vector<std::string> apps{"db", "web", "cache"};
  const std::vector<std::string> keys{"zone", "kubernetes.io/hostname", "rack"};
  const std::vector<std::string> nss{"team", "other"};
  auto pick = [&](const auto& v) { return v[rng.below(v.size())]; };
  auto randomSelector = [&]() -> json {
    switch (rng.below(4)) {
      case 0:
        return json{{"matchLabels", {{"app", pick(apps)}}}};
      case 1:
        return json{{"matchExpressions",
                     {{{"key", "app"}, {"operator", "In"}, {"values", {pick(apps), pick(apps)}}}}}};
      case 2:
        return json{{"matchExpressions",
                     {{{"key", "app"}, {"operator", "NotIn"}, {"values", {pick(apps)}}}}}};
      default:
        return json{{"matchExpressions", {{{"key", "tier"}, {"operator", "Exists"}}}}};
    }
  };
  auto randomTerm = [&] {
    json extra = json::object();
    switch (rng.below(4)) {
      case 0:
        extra["namespaces"] = {pick(nss)};
        break;
      case 1:
        extra["namespaceSelector"] = json::object();
        break;
      case 2:
        extra["namespaceSelector"] = {{"matchLabels", {{"env", "prod"}}}};
        break;
      default:
        break;
    }
    return term(randomSelector(), pick(keys), extra);
  };
  auto randomAffinity = [&]() -> json {
    json a = json::object();
    if (rng.below(3) == 0) {
      a.update(required("podAffinity", {randomTerm()}));
    }
    if (rng.below(3) == 0) {
      a.update(required("podAntiAffinity", {randomTerm()}));
    }
    return a.empty() ? json() : a;
  };
  auto randomLabels = [&] {
    json l = {{"app", pick(apps)}};
    if (rng.below(2) == 0) {
      l["tier"] = "x";
    }
    return l;
  };
  auto randomPorts = [&]() -> json {
    if (rng.below(3) != 0) {
      return json::object();
    }
    return {{"containers",
             json::array({{{"name", "c"},
                           {"ports", json::array({{{"containerPort", 1},
                                                   {"hostPort", 80 + rng.below(2)}}})}}})}};
  };
  int placed = 0;
  int refused = 0;
  std::map<std::string, int> seen;  // the oracle's verdicts: the mix reaches every rule
  for (int round = 0; round < 200; ++round) {
    const int nodeCount = 2 + static_cast<int>(rng.below(5));
    std::vector<SchedNode> nodes;
    std::vector<OracleNode> all;
    auto builder = makeCluster().pool("p");
    for (int n = 0; n < nodeCount; ++n) {
      const std::string name = "n" + std::to_string(n);
      json labels = {{"kubernetes.io/hostname", name}, {"zone", "z" + std::to_string(n % 2)}};
      if (rng.below(2) == 0) {
        labels["rack"] = "r" + std::to_string(n % 3);
      }
      const bool tainted = rng.below(5) == 0;
      nodes.push_back(
          nodeJson(name, labels,
                   tainted ? json::array({{{"key", "k"}, {"effect", "NoSchedule"}}}) : json()));
      all.push_back({name, {nodes.back().labels.begin(), nodes.back().labels.end()}, {}});
      builder.node(name, 4);
    }
    const ClusterState state = builder.build();
    PlacedPods placedPods;
    const auto running = rng.below(2 * static_cast<std::uint64_t>(nodeCount));
    for (std::uint64_t k = 0; k < running; ++k) {
      const auto n = rng.below(static_cast<std::uint64_t>(nodeCount));
      const json p = podJson("r" + std::to_string(k), pick(nss), randomLabels(), randomAffinity(),
                             randomPorts());
      placedPods.place("x/r" + std::to_string(k), nodes[n].name, parsed(p));
      all[n].pods.push_back(p);
    }
    json extra = randomPorts();
    if (rng.below(4) == 0) {
      extra["nodeSelector"] = {{"zone", "z1"}};
    }
    const json incoming = podJson("in", pick(nss), randomLabels(), randomAffinity(), extra);
    NamespaceLabels namespaces{{"team", {{"env", "prod"}}}, {"other", {}}};
    const NsLabels oracleNs{{"team", {{"env", "prod"}}}, {"other", {}}};
    std::vector<NodeUsage> usage(nodes.size());
    PlacementOptions options;
    options.filter.placed = &placedPods;
    options.filter.namespaces = &namespaces;
    const SchedPod pod = parsed(incoming);
    // Every node: the filter's verdict equals the oracles' (taints and the node selector
    // are decided before, by filters the other tests cover).
    std::vector<bool> allowed(nodes.size());
    auto filtered = filterNodes(pod, nodes, usage, options.filter);
    REQUIRE(filtered);
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const bool taintOk = nodes[i].taints.empty();
      const bool selectorOk = !extra.contains("nodeSelector") || nodes[i].labels.at("zone") == "z1";
      std::vector<json> here = all[i].pods;
      const bool portsOk = naivePortsFree(incoming, here);
      const std::string inter = naiveInterPod(incoming, all[i], all, oracleNs);
      ++seen[inter];
      allowed[i] = taintOk && selectorOk && portsOk && inter == "ok";
      const bool passed = std::find(filtered->feasible.begin(), filtered->feasible.end(), i) !=
                          filtered->feasible.end();
      CAPTURE(round, i, incoming.dump(), inter);
      CHECK(passed == allowed[i]);
      if (taintOk && selectorOk && portsOk && inter != "ok") {
        for (const auto& r : filtered->rejected) {
          if (r.node == i) {
            CHECK(verdict(r.reasons) == inter);
          }
        }
      }
    }
    auto choice = placePod(pod, nodes, usage, state, options);
    if (choice) {
      ++placed;
      CAPTURE(round, choice->node);
      CHECK(allowed[choice->node]);
    } else {
      ++refused;
      CHECK(std::none_of(allowed.begin(), allowed.end(), [](bool b) { return b; }));
    }
  }
  CHECK(placed > 40);
  CHECK(refused > 20);
  CAPTURE(seen);
  CHECK(seen["existing"] > 10);
  CHECK(seen["affinity"] > 10);
  CHECK(seen["anti"] > 10);
}
