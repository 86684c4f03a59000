// kube-scheduler's preference scores (pod_preference.hpp) and how placePod uses them: scores
// worked out by hand from the documented formulas on a two-zone cluster, then random clusters
// checked plugin by plugin against preference_oracle.hpp (written from the documentation, not
// from the code), then placePod: a preference spreads what Eq. 1 packs, never costs a GPU move,
// and without preference inputs the choice is exactly Eq. 1's.

#include "libcore/alloc/pod_preference.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/policy_registry.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/cluster_builder.hpp"
#include "tests/unit/alloc/preference_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::NsLabels;
using kc::alloc::test::PrefNode;
using nlohmann::json;

namespace {

const std::string kHost = "kubernetes.io/hostname";

json prefPod(const std::string& name, const json& labels, const json& spec = json::object(),
             const std::string& ns = "team") {
  json s = spec;
  s["containers"] = json::array({{{"name", "c"}}});
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}}, {"spec", s}};
}

json term(const std::string& app, const std::string& key, const json& extra = json::object()) {
  json t = {{"labelSelector", {{"matchLabels", {{"app", app}}}}}, {"topologyKey", key}};
  for (const auto& [k, v] : extra.items()) {
    t[k] = v;
  }
  return t;
}

json weighted(int weight, const json& t) {
  return {{"weight", weight}, {"podAffinityTerm", t}};
}

// spec.affinity with preferred (anti-)affinity and required affinity lists.
json affinity(const json& preferred, const json& preferredAnti, const json& required = json()) {
  json a = json::object();
  if (!preferred.is_null()) {
    a["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferred;
  }
  if (!required.is_null()) {
    a["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = required;
  }
  if (!preferredAnti.is_null()) {
    a["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = preferredAnti;
  }
  return a;
}

json soft(int maxSkew, const std::string& key, const std::string& app,
          const std::string& when = "ScheduleAnyway") {
  return {{"maxSkew", maxSkew},
          {"topologyKey", key},
          {"whenUnsatisfiable", when},
          {"labelSelector", {{"matchLabels", {{"app", app}}}}}};
}

SchedPod parsed(const json& obj) {
  auto p = parsePod(obj);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

SchedNode makeNode(const PrefNode& n) {
  json obj = {{"metadata", {{"name", n.name}, {"labels", n.labels}}},
              {"spec", {{"taints", n.taints}}},
              {"status", {{"allocatable", {{"cpu", "8"}, {"pods", "110"}}}}}};
  auto out = parseNode(obj);
  REQUIRE(out);
  return *out;
}

struct Built {
  std::vector<SchedNode> nodes;
  PlacedPods placed;
  NamespaceLabels namespaces;
};

void build(const std::vector<PrefNode>& all, const NsLabels& ns, Built& out) {
  for (const auto& n : all) {
    out.nodes.push_back(makeNode(n));
    int k = 0;
    for (const auto& p : n.pods) {
      out.placed.place(n.name + "/" + std::to_string(k++), n.name, parsed(p));
    }
  }
  for (const auto& [name, labels] : ns) {
    out.namespaces[name] = StringMap(labels.begin(), labels.end());
  }
}

PreferenceScores moduleScores(const json& incoming, const std::vector<PrefNode>& all,
                              const std::vector<std::size_t>& cands, const NsLabels& ns) {
  Built b;
  build(all, ns, b);
  return scorePreferences(parsed(incoming), b.nodes, cands, &b.placed, &b.namespaces);
}

std::map<std::string, std::string> hostLabels(const std::string& name, const json& extra) {
  std::map<std::string, std::string> out{{kHost, name}};
  for (const auto& [k, v] : extra.items()) {
    out[k] = v.get<std::string>();
  }
  return out;
}

json taint(const std::string& key, const std::string& value, const std::string& effect) {
  return {{"key", key}, {"value", value}, {"effect", effect}};
}

// The two-zone cluster of the hand-worked table.
std::vector<PrefNode> twoZones() {
  std::vector<PrefNode> all{
      {"a1", hostLabels("a1", {{"zone", "a"}, {"rack", "r1"}}), json::array(), {}},
      {"a2",
       hostLabels("a2", {{"zone", "a"}}),
       json::array({taint("spot", "true", "PreferNoSchedule")}),
       {}},
      {"b1", hostLabels("b1", {{"zone", "b"}, {"rack", "r2"}}), json::array(), {}},
      {"b2",
       hostLabels("b2", {{"zone", "b"}, {"disk", "ssd"}}),
       json::array(
           {taint("maint", "yes", "PreferNoSchedule"), taint("noisy", "yes", "PreferNoSchedule")}),
       {}},
  };
  // web-1 would rather not share its host with a cache; db must share its zone with one.
  all[0].pods.push_back(
      prefPod("web-1", {{"app", "web"}},
              {{"affinity", affinity(json(), json::array({weighted(20, term("cache", kHost))}))}}));
  all[1].pods.push_back(prefPod("web-2", {{"app", "web"}}));
  all[2].pods.push_back(
      prefPod("db", {{"app", "db"}},
              {{"affinity", affinity(json(), json(), json::array({term("cache", "zone")}))}}));
  all[3].pods.push_back(prefPod("web-x", {{"app", "web"}}, json::object(), "other"));
  return all;
}

std::vector<std::int64_t> pick(const PreferenceScores& s, const std::string& plugin) {
  return plugin == "ipa"      ? s.interPodAffinity
         : plugin == "spread" ? s.topologySpread
         : plugin == "na"     ? s.nodeAffinity
         : plugin == "tt"     ? s.taintToleration
                              : s.total;
}

std::vector<std::int64_t> pick(const test::OracleScores& s, const std::string& plugin) {
  return plugin == "ipa"      ? s.interPodAffinity
         : plugin == "spread" ? s.topologySpread
         : plugin == "na"     ? s.nodeAffinity
         : plugin == "tt"     ? s.taintToleration
                              : s.total;
}

json nodePreference(int weight, const json& preference) {
  return {{"weight", weight}, {"preference", preference}};
}

json preferNodes(const json& terms) {
  return {{"nodeAffinity", {{"preferredDuringSchedulingIgnoredDuringExecution", terms}}}};
}

}  // namespace

TEST_CASE("preference scores: hand-worked on a two-zone cluster", "[alloc][sched]") {
  using V = std::vector<std::int64_t>;
  const json other = {{"app", "other"}};
  const json cache = {{"app", "cache"}};
  const json zoneB = {
      {"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}}}};
  const json ssd = {{"matchExpressions", {{{"key", "disk"}, {"operator", "Exists"}}}}};
  const json nameA2 = {
      {"matchFields", {{{"key", "metadata.name"}, {"operator", "In"}, {"values", {"a2"}}}}}};
  auto [name, plugin, incoming, expected] = GENERATE_COPY(table<std::string, std::string, json, V>({
      // InterPodAffinity: raw a1 a2 b1 b2, then (s - min) * 100 / (max - min).
      {"nothing matches: all equal, 0", "ipa", prefPod("in", other), V{0, 0, 0, 0}},
      {"placed pods' terms: web-1's anti -20, db's required +1 on zone b", "ipa",
       prefPod("in", cache), V{0, 95, 100, 100}},  // raw -20 0 1 1: 20*100/21 = 95
      {"preferred anti-affinity to web per host", "ipa",
       prefPod("in", other,
               {{"affinity", affinity(json(), json::array({weighted(10, term("web", kHost))}))}}),
       V{0, 0, 100, 100}},  // raw -10 -10 0 0
      {"affinity to web per zone, anti to db per host", "ipa",
       prefPod("in", other,
               {{"affinity", affinity(json::array({weighted(5, term("web", "zone"))}),
                                      json::array({weighted(10, term("db", kHost))}))}}),
       V{100, 100, 0, 50}},  // raw 10 10 -10 0
      {"a term's namespaces: only web-x of namespace other", "ipa",
       prefPod("in", other,
               {{"affinity", affinity(json::array({weighted(
                                          5, term("web", kHost, {{"namespaces", {"other"}}}))}),
                                      json())}}),
       V{0, 0, 0, 100}},
      // PodTopologySpread, ScheduleAnyway: round(cnt * ln(domains + 2) + maxSkew - 1).
      {"zone, maxSkew 1: a holds 2 (2 ln 4 = 2.77 -> 3), b 0 (web-x is elsewhere)", "spread",
       prefPod("in", other, {{"topologySpreadConstraints", json::array({soft(1, "zone", "web")})}}),
       V{0, 0, 100, 100}},
      {"hostname, maxSkew 2: 1 ln 6 + 1 -> 3 on a1 a2, 1 on b1 b2", "spread",
       prefPod("in", other, {{"topologySpreadConstraints", json::array({soft(2, kHost, "web")})}}),
       V{33, 33, 100, 100}},  // 100 * (3 + 1 - 3) / 3
      {"rack: a2 and b2 lack it and are ignored", "spread",
       prefPod("in", other, {{"topologySpreadConstraints", json::array({soft(1, "rack", "web")})}}),
       V{0, 0, 100, 0}},
      {"DoNotSchedule only: the plugin is skipped", "spread",
       prefPod(
           "in", other,
           {{"topologySpreadConstraints", json::array({soft(1, "zone", "web", "DoNotSchedule")})}}),
       V{0, 0, 0, 0}},
      // NodeAffinity: matched weights, * 100 / max.
      {"zone b 30, ssd 10", "na",
       prefPod("in", other,
               {{"affinity",
                 preferNodes(json::array({nodePreference(30, zoneB), nodePreference(10, ssd)}))}}),
       V{0, 0, 75, 100}},
      {"matchFields on the node name", "na",
       prefPod("in", other, {{"affinity", preferNodes(json::array({nodePreference(7, nameA2)}))}}),
       V{0, 100, 0, 0}},
      {"no preferred node affinity", "na", prefPod("in", other), V{0, 0, 0, 0}},
      // TaintToleration: untolerated PreferNoSchedule taints, 100 - s * 100 / max.
      {"no tolerations: a2 has 1, b2 2", "tt", prefPod("in", other), V{100, 50, 100, 0}},
      {"spot tolerated", "tt",
       prefPod("in", other,
               {{"tolerations",
                 {{{"key", "spot"}, {"operator", "Exists"}, {"effect", "PreferNoSchedule"}}}}}),
       V{100, 100, 100, 0}},
      {"tolerate everything", "tt",
       prefPod("in", other, {{"tolerations", {{{"operator", "Exists"}}}}}), V{100, 100, 100, 100}},
      {"a NoSchedule toleration does not count", "tt",
       prefPod("in", other,
               {{"tolerations", {{{"key", "maint"}, {"value", "yes"}, {"effect", "NoSchedule"}}}}}),
       V{100, 50, 100, 0}},
      {"a toleration without effect counts", "tt",
       prefPod("in", other, {{"tolerations", {{{"key", "maint"}, {"value", "yes"}}}}}),
       V{100, 0, 100, 0}},
      // 2 * (0 95 100 100) + 2 * (0 0 100 100) + 3 * (100 50 100 0)
      {"weighted total", "total",
       prefPod("in", cache, {{"affinity", preferNodes(json::array({nodePreference(30, zoneB)}))}}),
       V{300, 340, 700, 400}},
  }));
  CAPTURE(name, incoming.dump());
  const std::vector<PrefNode> all = twoZones();
  const std::vector<std::size_t> cands{0, 1, 2, 3};
  const NsLabels ns{{"team", {{"env", "prod"}}}, {"other", {{"env", "dev"}}}};
  CHECK(pick(moduleScores(incoming, all, cands, ns), plugin) == expected);
  CHECK(pick(test::oraclePreferences(incoming, all, cands, ns), plugin) == expected);
}

TEST_CASE("preference scores: preferred node affinity is validated naming the field",
          "[alloc][sched]") {
  const json zone = {
      {"matchExpressions", {{{"key", "zone"}, {"operator", "In"}, {"values", {"b"}}}}}};
  auto ok = parsePod(prefPod("p", json::object(),
                             {{"affinity", preferNodes(json::array({nodePreference(30, zone)}))}}));
  REQUIRE(ok);
  REQUIRE(ok->preferredNodeAffinity.size() == 1);
  CHECK(ok->preferredNodeAffinity[0].weight == 30);
  CHECK(ok->preferredNodeAffinity[0].preference.matchExpressions.size() == 1);
  const std::string base =
      "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";
  auto [bad, message] = GENERATE_COPY(table<json, std::string>({
      {preferNodes(json::array({nodePreference(0, zone)})),
       base + "[0].weight: must be an integer in 1..100"},
      {preferNodes(json::array({nodePreference(101, zone)})),
       base + "[0].weight: must be an integer in 1..100"},
      {preferNodes(json::array({{{"weight", 1}}})), base + "[0].preference: required"},
      {preferNodes(json::object()), base + ": not a list"},
      {preferNodes(json::array(
           {nodePreference(5, zone),
            nodePreference(5, {{"matchExpressions", {{{"key", "zone"}, {"operator", "Near"}}}}})})),
       base + "[1].preference.matchExpressions[0].operator: 'Near' is not one of In, NotIn, "
              "Exists, DoesNotExist, Gt, Lt"},
  }));
  auto p = parsePod(prefPod("p", json::object(), {{"affinity", bad}}));
  REQUIRE_FALSE(p);
  CHECK(p.error().code == "invalid");
  CHECK(p.error().message == message);
}

namespace {

json randomTerm(SplitMix64& rng) {
  const std::vector<std::string> apps{"web", "db", "cache"};
  const std::vector<std::string> keys{"zone", kHost, "rack"};
  json extra = json::object();
  switch (rng.below(5)) {
    case 0:
      extra["namespaces"] = {"other"};
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
  return term(apps[rng.below(3)], keys[rng.below(3)], extra);
}

json randomWeighted(SplitMix64& rng, std::uint64_t max) {
  json out = json::array();
  for (std::uint64_t i = 0, n = rng.below(max + 1); i < n; ++i) {
    out.push_back(weighted(1 + static_cast<int>(rng.below(100)), randomTerm(rng)));
  }
  return out;
}

json randomRequirement(SplitMix64& rng) {
  switch (rng.below(6)) {
    case 0:
      return {
          {"key", "zone"}, {"operator", "In"}, {"values", {"z" + std::to_string(rng.below(3))}}};
    case 1:
      return {{"key", "disk"}, {"operator", "Exists"}};
    case 2:
      return {{"key", "gen"}, {"operator", "Gt"}, {"values", {"2"}}};
    case 3:
      return {{"key", "gen"}, {"operator", "Lt"}, {"values", {"4"}}};
    case 4:
      return {{"key", "rack"}, {"operator", "DoesNotExist"}};
    default:
      return {{"key", "zone"}, {"operator", "NotIn"}, {"values", {"z1"}}};
  }
}

json randomNodePreferences(SplitMix64& rng) {
  json out = json::array();
  for (std::uint64_t i = 0, n = rng.below(4); i < n; ++i) {
    json pref = json::object();
    for (std::uint64_t k = 0, m = rng.below(3); k < m; ++k) {
      pref["matchExpressions"].push_back(randomRequirement(rng));
    }
    if (rng.below(4) == 0) {
      pref["matchFields"] = {{{"key", "metadata.name"},
                              {"operator", rng.below(2) ? "In" : "NotIn"},
                              {"values", {"n" + std::to_string(rng.below(5))}}}};
    }
    out.push_back(nodePreference(1 + static_cast<int>(rng.below(100)), pref));
  }
  return out;
}

std::vector<PrefNode> randomCluster(SplitMix64& rng, int n) {
  const std::vector<std::string> apps{"web", "db", "cache"};
  std::vector<PrefNode> all;
  for (int i = 0; i < n; ++i) {
    PrefNode node{"n" + std::to_string(i),
                  hostLabels("n" + std::to_string(i), json::object()),
                  json::array(),
                  {}};
    if (rng.below(6) != 0) {
      node.labels["zone"] = "z" + std::to_string(rng.below(3));
    }
    if (rng.below(2) == 0) {
      node.labels["rack"] = "r" + std::to_string(rng.below(2));
    }
    if (rng.below(3) == 0) {
      node.labels["disk"] = "ssd";
    }
    node.labels["gen"] = std::to_string(1 + rng.below(5));
    if (rng.below(3) == 0) {
      node.taints.push_back(taint("spot", rng.below(2) ? "yes" : "no", "PreferNoSchedule"));
    }
    if (rng.below(3) == 0) {
      node.taints.push_back(taint("maint", "yes", "PreferNoSchedule"));
    }
    if (rng.below(6) == 0) {
      node.taints.push_back(taint("dedicated", "x", "NoSchedule"));
    }
    for (std::uint64_t k = 0, pods = rng.below(4); k < pods; ++k) {
      json spec = json::object();
      json required = rng.below(4) == 0 ? json::array({randomTerm(rng)}) : json();
      json preferred = rng.below(4) == 0 ? randomWeighted(rng, 2) : json();
      json anti = rng.below(4) == 0 ? randomWeighted(rng, 2) : json();
      if (!required.is_null() || !preferred.is_null() || !anti.is_null()) {
        spec["affinity"] = affinity(preferred, anti, required);
      }
      node.pods.push_back(
          prefPod(test::named(node.name + "-p", k),
                  {{"app", apps[rng.below(3)]}, {"version", rng.below(2) ? "v1" : "v2"}}, spec,
                  rng.below(4) == 0 ? "other" : "team"));
    }
    all.push_back(std::move(node));
  }
  return all;
}

json randomIncoming(SplitMix64& rng) {
  const std::vector<std::string> apps{"web", "db", "cache"};
  const std::vector<std::string> keys{"zone", kHost, "rack"};
  json spec = json::object();
  json a = affinity(rng.below(2) ? randomWeighted(rng, 2) : json(),
                    rng.below(2) ? randomWeighted(rng, 2) : json());
  if (rng.below(2) == 0) {
    a["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] =
        randomNodePreferences(rng);
  }
  spec["affinity"] = a;
  json constraints = json::array();
  for (std::uint64_t i = 0, n = rng.below(3); i < n; ++i) {
    json c = soft(1 + static_cast<int>(rng.below(3)), keys[rng.below(3)], apps[rng.below(3)],
                  rng.below(4) == 0 ? "DoNotSchedule" : "ScheduleAnyway");
    if (rng.below(3) == 0) {
      c["nodeTaintsPolicy"] = "Honor";
    }
    if (rng.below(4) == 0) {
      c["nodeAffinityPolicy"] = "Ignore";
    }
    if (rng.below(4) == 0) {
      c["matchLabelKeys"] = {"version"};
    }
    constraints.push_back(c);
  }
  if (!constraints.empty()) {
    spec["topologySpreadConstraints"] = constraints;
  }
  if (rng.below(5) == 0) {
    spec["nodeSelector"] = {{"disk", "ssd"}};
  }
  const std::vector<json> tolerations{
      {{"key", "spot"}, {"operator", "Exists"}, {"effect", "PreferNoSchedule"}},
      {{"key", "maint"}, {"value", "yes"}},
      {{"key", "dedicated"}, {"operator", "Exists"}, {"effect", "NoSchedule"}},
      {{"operator", "Exists"}}};
  for (const auto& t : tolerations) {
    if (rng.below(t.size() == 1 ? 10 : 3) == 0) {
      spec["tolerations"].push_back(t);
    }
  }
  return prefPod("in", {{"app", apps[rng.below(3)]}, {"version", rng.below(2) ? "v1" : "v2"}},
                 spec);
}

}  // namespace

TEST_CASE("preference scores: random clusters, every plugin agrees with the oracle",
          "[alloc][sched]") {
  SplitMix64 rng(2727);
  const NsLabels ns{{"team", {{"env", "prod"}}}, {"other", {{"env", "dev"}}}};
  std::map<std::string, int> varied;  // rounds where a plugin told the candidates apart
  for (int round = 0; round < 300; ++round) {
    const auto all = randomCluster(rng, 2 + static_cast<int>(rng.below(6)));
    std::vector<std::size_t> cands;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (rng.below(4) != 0) {
        cands.push_back(i);
      }
    }
    if (cands.empty()) {
      cands.push_back(rng.below(all.size()));
    }
    const json incoming = randomIncoming(rng);
    CAPTURE(round, incoming.dump(), cands);
    const PreferenceScores got = moduleScores(incoming, all, cands, ns);
    const test::OracleScores want = test::oraclePreferences(incoming, all, cands, ns);
    for (const char* plugin : {"ipa", "spread", "na", "tt", "total"}) {
      CAPTURE(plugin);
      CHECK(pick(got, plugin) == pick(want, plugin));
      const auto v = pick(want, plugin);
      if (std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) != v.end()) {
        ++varied[plugin];
      }
    }
  }
  CAPTURE(varied);
  CHECK(varied["ipa"] > 50);
  CHECK(varied["spread"] > 30);
  CHECK(varied["na"] > 30);
  CHECK(varied["tt"] > 50);
}

namespace {

// n1..n3 in one pool, 4 GPUs each, `used[i]` of them in use; `placed` the pods on them.
struct SmallCluster {
  std::vector<SchedNode> nodes;
  std::vector<NodeUsage> usage;
  ClusterState state;
  PlacedPods placed;
};

SmallCluster smallCluster(const std::vector<std::uint32_t>& freeGpus,
                          const std::vector<std::uint32_t>& used,
                          const std::vector<std::vector<json>>& pods,
                          std::uint32_t unattached = 0) {
  SmallCluster c;
  auto b = test::makeCluster().pool("p");
  for (std::size_t i = 0; i < freeGpus.size(); ++i) {
    const std::string name = test::named("n", i + 1);
    b.node(name, freeGpus[i], used[i]);
    c.nodes.push_back(makeNode({name, hostLabels(name, json::object()), json::array(), {}}));
    int k = 0;
    for (const auto& p : pods[i]) {
      c.placed.place(name + "/" + std::to_string(k++), name, parsed(p));
    }
  }
  b.unattached(unattached);
  c.state = b.build();
  c.usage.resize(c.nodes.size());
  return c;
}

kc::Result<PodPlacement> place(SmallCluster& c, const json& pod) {
  PlacementOptions options;
  options.filter.placed = &c.placed;
  return placePod(parsed(pod), c.nodes, c.usage, c.state, options);
}

json replica(const std::string& name, bool prefersApart) {
  json container = {{"name", "c"}, {"resources", {{"limits", {{"kubecomp.io/gpu", "1"}}}}}};
  json spec = {{"containers", json::array({container})}};
  if (prefersApart) {
    spec["affinity"] = affinity(json(), json::array({weighted(100, term("web", kHost))}));
  }
  return {{"metadata", {{"name", name}, {"namespace", "team"}, {"labels", {{"app", "web"}}}}},
          {"spec", spec}};
}

}  // namespace

TEST_CASE("placePod: preferred anti-affinity on hostname spreads what Eq. 1 packs",
          "[alloc][sched]") {
  for (const bool prefersApart : {false, true}) {
    CAPTURE(prefersApart);
    std::vector<std::uint32_t> used{0, 0, 0};
    std::vector<std::vector<json>> pods(3);
    std::vector<std::string> chosen;
    for (int r = 1; r <= 3; ++r) {
      const json pod = replica(test::named("web-", r), prefersApart);
      SmallCluster c = smallCluster({4 - used[0], 4 - used[1], 4 - used[2]}, used, pods);
      auto at = place(c, pod);
      REQUIRE(at);
      CHECK(at->deficit == 0);
      chosen.push_back(c.nodes[at->node].name);
      ++used[at->node];
      pods[at->node].push_back(pod);
    }
    // Eq. 1's best fit keeps filling the emptiest-fitting node; the preference spreads them.
    CHECK(chosen == (prefersApart ? std::vector<std::string>{"n1", "n2", "n3"}
                                  : std::vector<std::string>{"n1", "n1", "n1"}));
  }
}

TEST_CASE("placePod: a preference never costs a GPU move", "[alloc][sched]") {
  // n1 holds web-1 and one free GPU; n2 none (two GPUs wait unattached in the pool).
  SmallCluster c = smallCluster({1, 0}, {1, 0}, {{replica("web-1", true)}, {}}, 2);
  auto at = place(c, replica("web-2", true));
  REQUIRE(at);
  CHECK(c.nodes[at->node].name == "n1");
  CHECK(at->deficit == 0);
  // When both need one GPU moved, the preference decides (Eq. 1 alone ties, n1 by name).
  SmallCluster both = smallCluster({0, 0}, {1, 0}, {{replica("web-1", true)}, {}}, 2);
  auto apart = place(both, replica("web-2", true));
  REQUIRE(apart);
  CHECK(both.nodes[apart->node].name == "n2");
  CHECK(apart->deficit == 1);
  SmallCluster plain = smallCluster({0, 0}, {1, 0}, {{replica("web-1", false)}, {}}, 2);
  auto packed = place(plain, replica("web-2", false));
  REQUIRE(packed);
  CHECK(plain.nodes[packed->node].name == "n1");
  CHECK(packed->deficit == 1);
}

TEST_CASE("placePod: random clusters, the choice is (deficit, preference, Eq. 1, name)",
          "[alloc][sched]") {
  // With preference inputs: the reference ranks by the oracle's totals. Without: placePod must
  // choose exactly what Eq. 1 over the filters' survivors chooses (pod_placement_test's
  // definition), whatever labels, required terms and DoNotSchedule constraints the pods carry.
  SplitMix64 rng(4711);
  const NodePolicy eq1 = *findNodePolicy("eq1");
  int withPreferences = 0;
  int without = 0;
  for (int round = 0; round < 300; ++round) {
    auto all = randomCluster(rng, 2 + static_cast<int>(rng.below(5)));
    const bool plain = rng.below(2) == 0;
    json incoming = randomIncoming(rng);
    if (plain) {  // no preference inputs anywhere
      incoming["spec"].erase("affinity");
      incoming["spec"].erase("topologySpreadConstraints");
      incoming["spec"]["topologySpreadConstraints"] =
          json::array({soft(1, "zone", "web", "DoNotSchedule")});
      for (auto& n : all) {
        json kept = json::array();
        for (const auto& t : n.taints) {
          if (t["effect"] != "PreferNoSchedule") {
            kept.push_back(t);
          }
        }
        n.taints = kept;
        for (auto& p : n.pods) {
          p["spec"].erase("affinity");
        }
      }
    }
    incoming["spec"]["containers"][0]["resources"]["limits"]["kubecomp.io/gpu"] =
        std::to_string(rng.below(3));
    Built b;
    build(all, {}, b);
    auto builder = test::makeCluster().pool("p");
    for (const auto& n : all) {
      const auto used = static_cast<std::uint32_t>(rng.below(2));
      builder.node(n.name, static_cast<std::uint32_t>(rng.below(3)), used);
    }
    builder.unattached(static_cast<std::uint32_t>(rng.below(3)));
    const ClusterState state = builder.build();
    std::vector<NodeUsage> usage(b.nodes.size());
    const SchedPod pod = parsed(incoming);
    CAPTURE(round, incoming.dump());
    REQUIRE(hasPreferenceInputs(pod, b.nodes, &b.placed) == !plain);
    PlacementOptions options;
    options.filter.placed = &b.placed;
    auto ours = placePod(pod, b.nodes, usage, state, options);
    // The reference: the kube filters over every node, then the pool filter one node at a time.
    FilterOptions f;
    f.placed = &b.placed;
    f.fit.ignoredResources.emplace(kGpuResource);
    auto passed = filterNodes(pod, b.nodes, usage, f);
    REQUIRE(passed);
    const PodRequest req{0, 0, static_cast<std::uint32_t>(gpuRequest(pod))};
    std::vector<NodeIndex> survivors(passed->feasible.begin(), passed->feasible.end());
    if (plain) {
      auto ref = survivors.empty() ? kc::Result<NodeChoice>(kc::makeError("unschedulable", ""))
                                   : selectNodeForModelsAmong(state, req, pod.gpuModels, eq1,
                                                              Composability::Composable, survivors);
      REQUIRE(ours.ok() == ref.ok());
      if (ours) {
        ++without;
        CHECK(ours->node == ref->node);
        CHECK(ours->deficit == ref->deficit);
      }
      continue;
    }
    std::vector<std::size_t> pool;
    std::vector<std::uint32_t> deficit;
    for (NodeIndex n : survivors) {
      const NodeIndex one[] = {n};
      if (auto c = selectNodeForModelsAmong(state, req, pod.gpuModels, eq1,
                                            Composability::Composable, one)) {
        pool.push_back(n);
        deficit.push_back(c->deficit);
      }
    }
    REQUIRE(ours.ok() == !pool.empty());
    if (pool.empty()) {
      continue;
    }
    ++withPreferences;
    const auto totals = test::oraclePreferences(incoming, all, pool, {}).total;
    const std::uint32_t least = *std::min_element(deficit.begin(), deficit.end());
    std::int64_t best = -1;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      best = deficit[i] == least ? std::max(best, totals[i]) : best;
    }
    std::vector<NodeIndex> tied;
    for (std::size_t i = 0; i < pool.size(); ++i) {
      if (deficit[i] == least && totals[i] == best) {
        tied.push_back(static_cast<NodeIndex>(pool[i]));
      }
    }
    auto ref =
        selectNodeForModelsAmong(state, req, pod.gpuModels, eq1, Composability::Composable, tied);
    REQUIRE(ref);
    CHECK(ours->node == ref->node);
    CHECK(ours->deficit == least);
  }
  CHECK(withPreferences > 60);
  CHECK(without > 60);
}
