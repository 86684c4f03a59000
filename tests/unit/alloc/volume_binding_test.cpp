// kube-scheduler's VolumeBinding plugin (volume_binding.hpp) over PVC, PV and StorageClass
// objects parsed from their JSON. The expected texts of the table are written by hand from the
// documentation; the random clusters are checked against volume_oracle.hpp, a separate reading
// of the documented rules written over the test's own descriptions, not the code under test.

#include "libcore/alloc/volume_binding.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/rng.hpp"
#include "tests/unit/alloc/volume_oracle.hpp"

using namespace kc::alloc;
using kc::alloc::test::OracleClaim;
using kc::alloc::test::OracleClass;
using kc::alloc::test::OracleNode;
using kc::alloc::test::OracleVolume;
using kc::alloc::test::VolumeOracle;
using nlohmann::json;

namespace {

const char* const kModeNames[] = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany",
                                  "ReadWriteOncePod"};

json modesJson(std::uint8_t modes) {
  json out = json::array();
  for (int i = 0; i < 4; ++i) {
    if ((modes & (1U << i)) != 0) {
      out.push_back(kModeNames[i]);
    }
  }
  return out;
}

json claimJson(const OracleClaim& c) {
  json meta = {{"name", c.name}, {"namespace", "ns"}, {"uid", "uid-" + c.name}};
  json ann = json::object();
  if (c.bindCompleted) {
    ann["pv.kubernetes.io/bind-completed"] = "yes";
  }
  if (c.selectedNode) {
    ann["volume.kubernetes.io/selected-node"] = *c.selectedNode;
  }
  meta["annotations"] = ann;
  json spec = {{"accessModes", modesJson(c.modes)},
               {"resources", {{"requests", {{"storage", std::to_string(c.request)}}}}}};
  if (c.storageClass) {
    spec["storageClassName"] = *c.storageClass;
  }
  if (!c.volumeName.empty()) {
    spec["volumeName"] = c.volumeName;
  }
  if (c.block) {
    spec["volumeMode"] = "Block";
  }
  if (c.selector) {
    spec["selector"] = {{"matchLabels", {{c.selector->first, c.selector->second}}}};
  }
  return {{"metadata", meta}, {"spec", spec}};
}

json volumeJson(const OracleVolume& v) {
  json spec = {{"storageClassName", v.storageClass},
               {"capacity", {{"storage", std::to_string(v.capacity)}}},
               {"accessModes", modesJson(v.modes)},
               {"volumeMode", v.block ? "Block" : "Filesystem"}};
  if (!v.claimName.empty()) {
    spec["claimRef"] = {{"namespace", "ns"}, {"name", v.claimName}};
  }
  if (!v.affinity.empty()) {
    json terms = json::array();
    for (const auto& [k, val] : v.affinity) {
      terms.push_back(
          {{"matchExpressions", {{{"key", k}, {"operator", "In"}, {"values", {val}}}}}});
    }
    spec["nodeAffinity"] = {{"required", {{"nodeSelectorTerms", terms}}}};
  }
  json labels = json::object();
  for (const auto& [k, val] : v.labels) {
    labels[k] = val;
  }
  return {{"metadata", {{"name", v.name}, {"labels", labels}}},
          {"spec", spec},
          {"status", {{"phase", v.phase}}}};
}

json classJson(const OracleClass& c) {
  json out = {{"metadata", {{"name", c.name}}},
              {"provisioner", c.provisioner},
              {"volumeBindingMode", c.waitForFirstConsumer ? "WaitForFirstConsumer" : "Immediate"}};
  if (!c.topologies.empty()) {
    json terms = json::array();
    for (const auto& term : c.topologies) {
      json exprs = json::array();
      for (const auto& [k, values] : term) {
        exprs.push_back({{"key", k}, {"values", values}});
      }
      terms.push_back({{"matchLabelExpressions", exprs}});
    }
    out["allowedTopologies"] = terms;
  }
  return out;
}

VolumeCatalog catalogOf(const VolumeOracle& o) {
  VolumeCatalog cat;
  for (const auto& c : o.claims) {
    auto p = parseVolumeClaim(claimJson(c));
    REQUIRE(p);
    cat.setClaim(std::move(*p));
  }
  for (const auto& v : o.volumes) {
    auto p = parsePersistentVolume(volumeJson(v));
    REQUIRE(p);
    cat.setVolume(std::move(*p));
  }
  for (const auto& c : o.classes) {
    auto p = parseStorageClass(classJson(c));
    REQUIRE(p);
    cat.setClass(std::move(*p));
  }
  return cat;
}

// A pod named "web" in ns with these volumes (a JSON list).
SchedPod podWith(const json& volumes, const std::string& uid = "pod-uid") {
  json obj = {{"metadata", {{"name", "web"}, {"namespace", "ns"}, {"uid", uid}}},
              {"spec", {{"containers", {{{"name", "c"}}}}, {"volumes", volumes}}}};
  auto p = parsePod(obj);
  INFO((p ? std::string() : p.error().message));
  REQUIRE(p);
  return *p;
}

json claimVolumes(const std::vector<std::string>& claims) {
  json out = json::array();
  for (std::size_t i = 0; i < claims.size(); ++i) {
    out.push_back(
        {{"name", "v" + std::to_string(i)}, {"persistentVolumeClaim", {{"claimName", claims[i]}}}});
  }
  return out;
}

SchedNode node(const std::string& name, StringMap labels) {
  SchedNode n;
  n.name = name;
  n.labels = std::move(labels);
  n.allocatablePods = 110;
  n.allocatable.milliCpu = 8000;
  n.allocatable.memory = 1LL << 34;
  return n;
}

// Nodes a and b (zone a, zone b) filtered: how many pass, and the FitError (when some pass,
// the same "0/2 nodes are available: ..." histogram of the refusals, for the table).
struct Verdict {
  std::size_t feasible = 0;
  std::string message;
};

Verdict fitError(const SchedPod& pod, const VolumeCatalog& cat) {
  std::vector<SchedNode> nodes = {node("a", {{"zone", "a"}}), node("b", {{"zone", "b"}})};
  std::vector<NodeUsage> usage(2);
  FilterOptions opts;
  opts.volumes = &cat;
  auto r = filterNodes(pod, nodes, usage, opts);
  REQUIRE(r);
  return Verdict{r->feasible.size(), r->feasible.empty()
                                         ? r->message
                                         : unschedulableMessage(nodes.size(), r->rejected)};
}

OracleClass wffc(const std::string& name, const std::string& provisioner) {
  return OracleClass{name, provisioner, true, {}};
}

}  // namespace

TEST_CASE("VolumeBinding: kube-scheduler's texts for each refusal", "[volume]") {
  VolumeOracle o;
  o.classes = {wffc("local", "kubernetes.io/no-provisioner"), wffc("csi", "csi.example.com"),
               OracleClass{"fast", "csi.example.com", false, {}}};
  o.volumes = {OracleVolume{"pv-a", "local", 10, 1, false, "bound", "Bound", {{"zone", "a"}}, {}}};
  OracleClaim bound{"bound", std::string("local"), "pv-a", true, {}, 5, 1, false, {}};
  OracleClaim gone{"gone", std::string("local"), "pv-missing", true, {}, 5, 1, false, {}};
  OracleClaim immediate{"imm", std::string("fast"), "", false, {}, 5, 1, false, {}};
  OracleClaim noClass{"plain", std::nullopt, "", false, {}, 5, 1, false, {}};
  OracleClaim prebound{"pre", std::string("local"), "pv-a", false, {}, 5, 1, false, {}};
  OracleClaim elsewhere{"other", std::string("csi"), "", false, std::string("b"), 5, 1, false, {}};
  OracleClaim lonely{"lonely", std::string("local"), "", false, {}, 5, 1, false, {}};
  o.claims = {bound, gone, immediate, noClass, prebound, elsewhere, lonely};
  const VolumeCatalog cat = catalogOf(o);

  auto [claims, feasible,
        expected] = GENERATE(table<std::vector<std::string>, std::size_t, std::string>({
      {{"bound"}, 1, "0/2 nodes are available: 1 node(s) had volume node affinity conflict."},
      {{"gone"},
       0,
       "0/2 nodes are available: 2 node(s) unavailable due to one or more pvc(s) bound to "
       "non-existent pv(s)."},
      {{"imm"}, 0, "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."},
      {{"plain"}, 0, "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."},
      // Pre-bound by spec.volumeName alone: the PV controller's to finish, not ours.
      {{"pre"}, 0, "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims."},
      {{"missing"}, 0, "0/2 nodes are available: persistentvolumeclaim \"missing\" not found."},
      {{"bound", "missing"},
       0,
       "0/2 nodes are available: persistentvolumeclaim \"missing\" not found."},
      {{"other"},
       1,
       "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to "
       "bind."},
      {{"lonely"},
       0,
       "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to "
       "bind."},
      // a: "other" is promised to node b; b: the bound PV is in zone a.
      {{"bound", "other"},
       0,
       "0/2 nodes are available: 1 node(s) didn't find available persistent volumes to "
       "bind, 1 node(s) had volume node affinity conflict."},
      // b refuses for both reasons, a for one.
      {{"bound", "lonely"},
       0,
       "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 2 node(s) "
       "didn't find available persistent volumes to bind."},
  }));
  CAPTURE(claims);
  const Verdict v = fitError(podWith(claimVolumes(claims)), cat);
  CHECK(v.feasible == feasible);
  CHECK(v.message == expected);
}

TEST_CASE("VolumeBinding: a bound claim steers the pod to its PV's node", "[volume]") {
  VolumeOracle o;
  o.classes = {wffc("local", "kubernetes.io/no-provisioner")};
  o.volumes = {OracleVolume{"pv-b", "local", 10, 1, false, "data", "Bound", {{"zone", "b"}}, {}}};
  o.claims = {OracleClaim{"data", std::string("local"), "pv-b", true, {}, 5, 1, false, {}}};
  const VolumeCatalog cat = catalogOf(o);
  const SchedPod pod = podWith(claimVolumes({"data"}));
  std::vector<SchedNode> nodes = {node("a", {{"zone", "a"}}), node("b", {{"zone", "b"}})};
  std::vector<NodeUsage> usage(2);
  FilterOptions opts;
  opts.volumes = &cat;
  auto r = filterNodes(pod, nodes, usage, opts);
  REQUIRE(r);
  REQUIRE(r->feasible == std::vector<std::size_t>{1});
  CHECK(r->rejected.at(0).reasons == FilterReasons{std::string(kReasonVolumeNodeConflict)});
  // Without the catalog the filter is off (the simulator's pods have no volumes).
  auto off = filterNodes(pod, nodes, usage, FilterOptions{});
  REQUIRE(off);
  CHECK(off->feasible.size() == 2);
}

TEST_CASE("VolumeBinding: WaitForFirstConsumer static and dynamic plans", "[volume]") {
  VolumeOracle o;
  o.classes = {wffc("local", "kubernetes.io/no-provisioner"),
               OracleClass{"zonal", "csi.example.com", true, {{{"zone", {"b", "c"}}}}}};
  o.volumes = {
      OracleVolume{"pv-big", "local", 100, 1, false, "", "Available", {{"zone", "a"}}, {}},
      OracleVolume{"pv-small", "local", 20, 1, false, "", "Available", {{"zone", "a"}}, {}},
      OracleVolume{"pv-tiny", "local", 5, 1, false, "", "Available", {{"zone", "a"}}, {}},
      OracleVolume{"pv-rox", "local", 30, 2, false, "", "Available", {{"zone", "a"}}, {}},
      OracleVolume{"pv-released", "local", 30, 1, false, "", "Released", {{"zone", "a"}}, {}},
      OracleVolume{"pv-pre", "local", 500, 1, false, "pinned", "Available", {{"zone", "a"}}, {}}};
  o.claims = {OracleClaim{"ten", std::string("local"), "", false, {}, 10, 1, false, {}},
              OracleClaim{"fifteen", std::string("local"), "", false, {}, 15, 1, false, {}},
              OracleClaim{"pinned", std::string("local"), "", false, {}, 1, 1, false, {}},
              OracleClaim{"dyn", std::string("zonal"), "", false, {}, 1, 1, false, {}}};
  const VolumeCatalog cat = catalogOf(o);
  auto plan = [&](const std::vector<std::string>& claims, const SchedNode& n) {
    auto state = prepareVolumeBinding(podWith(claimVolumes(claims)), cat);
    REQUIRE(state);
    REQUIRE(state->rejectAll.empty());
    return findPodVolumes(*state, n);
  };
  const SchedNode a = node("a", {{"zone", "a"}});
  // Smallest claim first, each to the smallest PV that fits: ten -> pv-small, fifteen -> pv-big
  // (pv-tiny too small, pv-rox lacks ReadWriteOnce, pv-released not Available).
  auto p = plan({"fifteen", "ten"}, a);
  CHECK(p.reasons.empty());
  CHECK(p.bindings == std::vector<StaticBinding>{{"ns/ten", "pv-small"}, {"ns/fifteen", "pv-big"}});
  CHECK(p.provisions.empty());
  // A PV whose claimRef names the claim wins over smaller ones.
  CHECK(plan({"pinned"}, a).bindings == std::vector<StaticBinding>{{"ns/pinned", "pv-pre"}});
  // No PV in zone b and no provisioner: refused there.
  CHECK(plan({"ten"}, node("b", {{"zone", "b"}})).reasons ==
        std::vector<std::string>{std::string(kReasonVolumeBindConflict)});
  // Dynamic: allowed in zones b and c only.
  CHECK(plan({"dyn"}, node("c", {{"zone", "c"}})).provisions == std::vector<std::string>{"ns/dyn"});
  CHECK(plan({"dyn"}, a).reasons ==
        std::vector<std::string>{std::string(kReasonVolumeBindConflict)});
}

TEST_CASE("VolumeBinding: ephemeral volumes, lost and deleted claims", "[volume]") {
  VolumeCatalog cat;
  auto owned = claimJson(OracleClaim{"web-scratch", std::string("csi"), "", false, {}, 1});
  owned["metadata"]["ownerReferences"] = {{{"apiVersion", "v1"},
                                           {"kind", "Pod"},
                                           {"name", "web"},
                                           {"uid", "pod-uid"},
                                           {"controller", true}}};
  cat.setClaim(*parseVolumeClaim(owned));
  cat.setClass(*parseStorageClass(classJson(wffc("csi", "csi.example.com"))));
  auto lost = claimJson(OracleClaim{"lost", std::string("csi"), "pv-x", true, {}, 1});
  lost["status"] = {{"phase", "Lost"}};
  cat.setClaim(*parseVolumeClaim(lost));
  auto dying = claimJson(OracleClaim{"dying", std::string("csi"), "", false, {}, 1});
  dying["metadata"]["deletionTimestamp"] = "2026-11-28T00:00:00Z";
  cat.setClaim(*parseVolumeClaim(dying));
  const json eph = {
      {{"name", "scratch"}, {"ephemeral", {{"volumeClaimTemplate", {{"spec", json::object()}}}}}}};
  CHECK(fitError(podWith(eph), cat).feasible == 2);
  CHECK(fitError(podWith(eph, "another-uid"), cat).message ==
        "0/2 nodes are available: PVC ns/web-scratch was not created for pod ns/web (pod is not "
        "owner).");
  const json eph2 = {
      {{"name", "cache"}, {"ephemeral", {{"volumeClaimTemplate", {{"spec", json::object()}}}}}}};
  CHECK(fitError(podWith(eph2), cat).message ==
        "0/2 nodes are available: waiting for ephemeral volume controller to create the "
        "persistentvolumeclaim \"web-cache\".");
  CHECK(fitError(podWith(claimVolumes({"lost"})), cat).message ==
        "0/2 nodes are available: persistentvolumeclaim \"lost\" bound to non-existent "
        "persistentvolume \"pv-x\".");
  CHECK(fitError(podWith(claimVolumes({"dying"})), cat).message ==
        "0/2 nodes are available: persistentvolumeclaim \"dying\" is being deleted.");
}

TEST_CASE("VolumeBinding: PV node affinity is matched on labels only", "[volume]") {
  // kube-scheduler's CheckNodeAffinity builds a node with the labels and no name.
  auto pv = parsePersistentVolume(json::parse(R"({
    "metadata": {"name": "pv"},
    "spec": {"capacity": {"storage": "1Gi"},
             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchFields": [
               {"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}})"));
  REQUIRE(pv);
  CHECK_FALSE(volumeReachableFrom(*pv, node("a", {})));
  CHECK(topologyAllows({}, {}));
  CHECK_FALSE(topologyAllows({TopologySelectorTerm{}}, {{"zone", "a"}}));
}

TEST_CASE("VolumeBinding: objects are validated, naming the field", "[volume]") {
  auto bad = [](kc::Result<VolumeClaim> r) { return r ? std::string() : r.error().message; };
  auto c = claimJson(OracleClaim{"x", std::string("csi"), "", false, {}, 1});
  c["spec"]["accessModes"] = {"ReadWriteSometimes"};
  CHECK(bad(parseVolumeClaim(c)).find("spec.accessModes[0]") == 0);
  c = claimJson(OracleClaim{"x", std::string("csi"), "", false, {}, 1});
  c["spec"]["resources"]["requests"]["storage"] = "lots";
  CHECK(bad(parseVolumeClaim(c)).find("spec.resources.requests") == 0);
  auto sc = classJson(wffc("csi", "csi.example.com"));
  sc.erase("provisioner");
  CHECK_FALSE(parseStorageClass(sc));
  sc = classJson(wffc("csi", "csi.example.com"));
  sc["volumeBindingMode"] = "Later";
  CHECK_FALSE(parseStorageClass(sc));
  sc.erase("volumeBindingMode");
  REQUIRE(parseStorageClass(sc));
  CHECK(parseStorageClass(sc)->bindingMode == VolumeBindingMode::Immediate);
  auto pod =
      parsePod({{"metadata", {{"name", "p"}, {"namespace", "ns"}}},
                {"spec",
                 {{"containers", {{{"name", "c"}}}},
                  {"volumes", {{{"name", "v"}, {"persistentVolumeClaim", json::object()}}}}}}});
  REQUIRE_FALSE(pod);
  CHECK(pod.error().message.find("spec.volumes[0].persistentVolumeClaim.claimName") == 0);
  // The beta annotation names the class over spec.storageClassName.
  c = claimJson(OracleClaim{"x", std::string("csi"), "", false, {}, 1});
  c["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"] = "old";
  CHECK(parseVolumeClaim(c)->storageClass == "old");
}

TEST_CASE("VolumeBinding: assumptions hide a chosen PV until the API answers", "[volume]") {
  VolumeOracle o;
  o.classes = {wffc("local", "kubernetes.io/no-provisioner")};
  o.volumes = {OracleVolume{"pv", "local", 10, 1, false, "", "Available", {}, {}}};
  o.claims = {OracleClaim{"one", std::string("local"), "", false, {}, 1},
              OracleClaim{"two", std::string("local"), "", false, {}, 1}};
  VolumeCatalog cat = catalogOf(o);
  auto planFor = [&](const std::string& claim) {
    return findPodVolumes(*prepareVolumeBinding(podWith(claimVolumes({claim})), cat),
                          node("a", {}));
  };
  REQUIRE(planFor("one").bindings.size() == 1);
  cat.assumeBound("pv", *cat.claim("ns/one"));
  CHECK(planFor("two").reasons == std::vector<std::string>{std::string(kReasonVolumeBindConflict)});
  CHECK(planFor("one").bindings == std::vector<StaticBinding>{{"ns/one", "pv"}});
  cat.restore({"pv"}, {});
  CHECK(planFor("two").bindings.size() == 1);
  cat.assumeSelectedNode("ns/two", "b");
  CHECK(planFor("two").reasons == std::vector<std::string>{std::string(kReasonVolumeBindConflict)});
  cat.setClaim(*parseVolumeClaim(claimJson(o.claims[1])));  // the API's object replaces it
  CHECK(planFor("two").reasons.empty());
}

TEST_CASE("VolumeBinding agrees with the oracle on random clusters", "[volume]") {
  SplitMix64 rng(20261128);
  const std::vector<std::string> zones = {"a", "b", "c"};
  // How often each outcome came up: the mix must exercise all of them.
  std::map<std::string, int> seen;
  for (int round = 0; round < 400; ++round) {
    VolumeOracle o;
    o.classes = {
        wffc("local", "kubernetes.io/no-provisioner"),
        OracleClass{"zonal", "csi.example.com", true,
                    rng.below(2) == 0
                        ? decltype(OracleClass::topologies){}
                        : decltype(OracleClass::topologies){{{"zone", {zones[rng.below(3)]}}}}},
        OracleClass{"fast", "csi.example.com", false, {}}};
    const int nVolumes = static_cast<int>(rng.below(7));
    for (int i = 0; i < nVolumes; ++i) {
      OracleVolume v;
      v.name = "pv" + std::to_string(i);
      v.storageClass = rng.below(4) == 0 ? "zonal" : "local";
      v.capacity = static_cast<std::int64_t>(1 + rng.below(20));
      v.modes = static_cast<std::uint8_t>(1 + rng.below(7));
      v.block = rng.below(5) == 0;
      v.claimName = rng.below(5) == 0 ? "someone-else" : "";
      v.phase = rng.below(6) == 0 ? "Released" : "Available";
      if (rng.below(3) != 0) {
        v.affinity.emplace_back("zone", zones[rng.below(3)]);
        if (rng.below(3) == 0) {
          v.affinity.emplace_back("zone", zones[rng.below(3)]);
        }
      }
      if (rng.below(2) == 0) {
        v.labels["tier"] = rng.below(2) == 0 ? "gold" : "silver";
      }
      o.volumes.push_back(v);
    }
    const int nClaims = 1 + static_cast<int>(rng.below(3));
    std::vector<std::string> podClaims;
    for (int i = 0; i < nClaims; ++i) {
      OracleClaim c;
      c.name = "c" + std::to_string(i);
      const auto kind = rng.below(10);
      c.storageClass = kind == 0 ? "fast" : kind < 3 ? "zonal" : "local";
      c.request = static_cast<std::int64_t>(1 + rng.below(15));
      c.modes = static_cast<std::uint8_t>(1U << rng.below(3));
      c.block = rng.below(6) == 0;
      if (rng.below(4) == 0) {
        c.selector = std::make_pair(std::string("tier"), std::string("gold"));
      }
      if (*c.storageClass == "zonal" && rng.below(3) == 0) {
        c.selectedNode = zones[rng.below(3)];
      }
      if (rng.below(5) == 0) {
        // Bound: to one of the PVs, or to one that no longer exists.
        c.volumeName = "pv-gone";
        c.storageClass = "local";
        if (nVolumes > 0 && rng.below(4) != 0) {
          const auto& pv = o.volumes[rng.below(static_cast<std::uint64_t>(nVolumes))];
          c.volumeName = pv.name;
          c.storageClass = pv.storageClass;
        }
        c.bindCompleted = true;
        c.selectedNode.reset();
      }
      o.claims.push_back(c);
      podClaims.push_back(c.name);
    }
    const VolumeCatalog cat = catalogOf(o);
    const SchedPod pod = podWith(claimVolumes(podClaims));
    auto state = prepareVolumeBinding(pod, cat);
    REQUIRE(state);
    for (const auto& zone : zones) {
      const OracleNode on{zone, {{"zone", zone}}};
      const auto want = o.judge(podClaims, on);
      CAPTURE(round, zone, podClaims);
      CHECK(!state->rejectAll.empty() == want.refusedEverywhere);
      if (want.refusedEverywhere) {
        ++seen["refused everywhere"];
        continue;
      }
      seen["affinity conflict"] += want.affinityConflict ? 1 : 0;
      seen["nothing to bind"] += want.noVolumeToBind ? 1 : 0;
      seen["bound PV missing"] += want.boundVolumeMissing ? 1 : 0;
      seen["static binding"] += want.staticBindings.empty() ? 0 : 1;
      seen["provisioned"] += want.provisioned.empty() || want.noVolumeToBind ? 0 : 1;
      seen["fits"] += want.affinityConflict || want.noVolumeToBind ? 0 : 1;
      const PodVolumePlan got = findPodVolumes(*state, node(zone, {{"zone", zone}}));
      std::vector<std::string> wantReasons;
      if (want.affinityConflict) {
        wantReasons.emplace_back(kReasonVolumeNodeConflict);
      }
      if (want.noVolumeToBind) {
        wantReasons.emplace_back(kReasonVolumeBindConflict);
      }
      if (want.boundVolumeMissing) {
        wantReasons.emplace_back(kReasonVolumePvNotExist);
      }
      CHECK(got.reasons == wantReasons);
      std::map<std::string, std::string> gotBindings;
      for (const auto& b : got.bindings) {
        gotBindings[b.claim.substr(3)] = b.volume;
      }
      CHECK(gotBindings == want.staticBindings);
      std::vector<std::string> gotProvisions;
      for (const auto& p : got.provisions) {
        gotProvisions.push_back(p.substr(3));
      }
      CHECK(gotProvisions == want.provisioned);
    }
  }
  CAPTURE(seen);
  for (const char* outcome : {"refused everywhere", "affinity conflict", "nothing to bind",
                              "bound PV missing", "static binding", "provisioned", "fits"}) {
    INFO(outcome << ": " << seen[outcome]);
    CHECK(seen[outcome] >= 20);
  }
}
