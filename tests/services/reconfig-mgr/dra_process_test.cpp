// reconfig-mgr on the DRA path (docs/dra.md) as a process with the API server double (which
// serves resource.k8s.io/v1), chassis-sim, kubelet stand-ins and the real device plugins: the
// pool's ResourceSlices follow the inventory and the pool's allocationPath, and a GPU is never
// offered on both paths.

#include <catch2/catch.hpp>

#include "libcore/api/dra_binding.hpp"
#include "libcore/api/dra_claim.hpp"
#include "libcore/api/dra_slice.hpp"
#include "tests/services/reconfig-mgr/cluster.hpp"
#include "tests/support/dra_objects.hpp"
#include "tests/support/wait.hpp"

using kc::reconfig::testing::ClusterSpec;
using kc::reconfig::testing::SimCluster;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// host01: two GPUs, host02: one, and one unattached.
ClusterSpec small() {
  ClusterSpec s;
  s.nodes = {"host01", "host02"};
  s.chassis["c0"] = {{"01", "host01"}, {"02", "host01"}, {"03", "host02"}, {"04", ""}};
  return s;
}

// The pool's slices by DRA pool name: device GPU ids, and whether they bind to a node.
struct Published {
  std::map<std::string, std::vector<std::string>> ids;
  std::map<std::string, bool> fabric;
  std::set<std::int64_t> generations;
};

Published published(SimCluster& c) {
  Published out;
  kc::kube::ListOptions opts;
  opts.labelSelector = "gpu.kubecomp.io/gpupool=pool-a";
  auto list = c.client().listAll(kc::api::gvr::resourceSlices(), "", opts);
  if (!list) {
    return out;
  }
  for (const json& item : list->items) {
    auto s = kc::api::parseResourceSlice(item);
    if (!s) {
      continue;
    }
    out.generations.insert(s->generation);
    auto& ids = out.ids[s->poolName];
    for (const auto& d : s->devices) {
      ids.push_back(d.id);
      out.fabric[d.id] = d.bindsToNode;
    }
  }
  return out;
}

void setPath(SimCluster& c, const std::string& path) {
  const json patch = {{"spec", {{"allocationPath", path}}}};
  REQUIRE(
      c.client().patch(kc::api::gvr::gpuPools(), "", "pool-a", kc::kube::PatchType::kMerge, patch));
}

}  // namespace

TEST_CASE("reconfig-mgr: a DRA pool's GPUs are ResourceSlices, not device-plugin resources",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  REQUIRE(c.poolUntil([](const json& st) { return st.value("totalGPUs", 0) == 4; }));
  REQUIRE(c.waitAllocatable("host01", 2));
  CHECK(published(c).ids.empty());  // the device-plugin path publishes no slices

  setPath(c, "DRA");
  const bool shown = kc::testing::eventually(
      [&] {
        Published p = published(c);
        return p.ids["pool-a/host01"] == std::vector<std::string>{"c0.01", "c0.02"} &&
               p.ids["pool-a/host02"] == std::vector<std::string>{"c0.03"} &&
               p.ids["pool-a"] == std::vector<std::string>{"c0.04"};
      },
      30s);
  const Published p = published(c);
  CAPTURE(p.ids);
  REQUIRE(shown);
  CHECK(p.fabric.at("c0.04"));  // unattached: attached on demand
  CHECK_FALSE(p.fabric.at("c0.01"));
  CHECK(p.generations.size() == 1);  // one generation for the whole pool
  // The device plugins withdraw the pool: a GPU is offered on one path only.
  CHECK(kc::testing::eventually([&] { return c.allocatable("host01") == 0; }, 30s));

  // A spec reconfig-mgr cannot read (an API server that does not check the CRD's enum) changes
  // nothing: the pool reports the error and what was published stays.
  setPath(c, "Both");
  REQUIRE(c.poolUntil([](const json& st) {
    for (const auto& cond : st.value("conditions", json::array())) {
      if (cond.value("type", "") == "SpecValid" && cond.value("status", "") == "False") {
        return true;
      }
    }
    return false;
  }));
  // The status and the slices are written in the same pass: give a removal time to show.
  CHECK_FALSE(kc::testing::eventually([&] { return published(c).ids.size() != 3; }, 3s));

  // Back to the device plugin: the slices go, kubelet advertises the GPUs again.
  setPath(c, "DevicePlugin");
  CHECK(kc::testing::eventually([&] { return published(c).ids.empty(); }, 30s));
  CHECK(c.waitAllocatable("host01", 2));

  // DRA again, then the pool is deleted: nothing of it stays published.
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  REQUIRE(c.client().remove(kc::api::gvr::gpuPools(), "", "pool-a"));
  CHECK(kc::testing::eventually([&] { return published(c).ids.empty(); }, 30s));
}

namespace {

// A ResourceClaim for one GPU of class gpu.kubecomp.io, allocated by hand the way kube-scheduler
// writes it: device `gpuId` of pool-a's fabric pool for `node`, reserved for pod `pod`.
void allocateClaim(SimCluster& c, const std::string& name, const std::string& gpuId,
                   const std::string& node, const std::string& pod) {
  auto created = c.client().create(kc::api::gvr::resourceClaims(), "default",
                                   kc::testing::oneGpuClaim(name, "default"));
  REQUIRE(created);
  json body = *created;
  body["status"] = kc::testing::fabricAllocationStatus("pool-a", gpuId, node, pod);
  REQUIRE(c.client().updateStatus(kc::api::gvr::resourceClaims(), "default", body));
}

// The claim's condition `type` on its only device (null when not set).
json claimCondition(SimCluster& c, const std::string& name, std::string_view type) {
  auto obj = c.client().get(kc::api::gvr::resourceClaims(), "default", name);
  if (!obj) {
    return nullptr;
  }
  for (const auto& d : obj->value("status", json::object()).value("devices", json::array())) {
    for (const auto& cond : d.value("conditions", json::array())) {
      if (cond.value("type", "") == type) {
        json out = cond;
        out["claimGeneration"] = (*obj)["metadata"].value("generation", 0);
        return out;
      }
    }
  }
  return nullptr;
}

bool poolShows(SimCluster& c, const std::string& gpu, const std::string& node) {
  for (const auto& g : c.poolStatus().value("gpus", json::array())) {
    if (g.value("id", "") == gpu) {
      return g.value("node", "") == node;
    }
  }
  return false;
}

}  // namespace

namespace {

// The DRA invariants against the chassis' true state, after a scenario: no device held by two
// claims (a GPU keeps its device name in every DRA pool of its GPUPool), and every device whose
// binding conditions are all True is attached, on the chassis, to the node its claim names.
void claimInvariants(SimCluster& c) {
  auto list = c.client().listAll(kc::api::gvr::resourceClaims(), "");
  REQUIRE(list);
  const auto truth = c.simGpus();
  std::map<std::string, std::string> idOf;  // device name -> GPU id
  for (const auto& [id, node] : truth) {
    idOf[kc::api::draDeviceName(id)] = id;
  }
  std::map<std::string, std::string> holder;
  for (const json& obj : list->items) {
    auto claim = kc::api::parseClaim(obj);
    REQUIRE(claim);
    if (!claim->allocation) {
      continue;
    }
    for (const auto& d : claim->allocation->results) {
      const std::string key = d.pool.substr(0, d.pool.find('/')) + "/" + d.device;
      CAPTURE(claim->name, key);
      CHECK(holder.emplace(key, claim->name).second);  // never two claims on one GPU
      if (kc::api::bindingState(*claim, d) == kc::api::BindingState::kAttached &&
          idOf.count(d.device) != 0) {
        CHECK(truth.at(idOf[d.device]) == claim->allocation->nodeName);
      }
    }
  }
}

}  // namespace

TEST_CASE("reconfig-mgr: the attach controller attaches a claim's fabric GPU to its node",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids["pool-a"].size() == 1; }, 30s));

  allocateClaim(c, "claim-1", "c0.04", "host02", "pod-1");
  // The unattached GPU is attached to the claim's node.
  CHECK(kc::testing::eventually([&] { return c.simGpus()["c0.04"] == "host02"; }, 60s));
  CHECK(kc::testing::eventually([&] { return poolShows(c, "c0.04", "host02"); }, 30s));
  // The claim's binding condition turns True, for the claim's generation.
  REQUIRE(kc::testing::eventually(
      [&] { return !claimCondition(c, "claim-1", kc::api::kAttachedCondition).is_null(); }, 30s));
  const json cond = claimCondition(c, "claim-1", kc::api::kAttachedCondition);
  CAPTURE(cond);
  CHECK(cond["status"] == "True");
  CHECK(cond["observedGeneration"] == cond["claimGeneration"]);
  CHECK_FALSE(cond.value("lastTransitionTime", "").empty());
  CHECK(claimCondition(c, "claim-1", kc::api::kAttachFailedCondition).is_null());
  // While the claim holds it, the GPU stays in the fabric pool (its identity does not change).
  Published p = published(c);
  CAPTURE(p.ids);
  CHECK(p.ids.at("pool-a") == std::vector<std::string>{"c0.04"});
  CHECK(p.ids["pool-a/host02"] == std::vector<std::string>{"c0.03"});
  const json moves = c.poolStatus().value("moves", json::array());
  REQUIRE_FALSE(moves.empty());
  CHECK(moves[0]["kind"] == "Claim");
  CHECK(moves[0]["claim"] == "default/claim-1");
  CHECK(moves[0]["phase"] == "Succeeded");
  claimInvariants(c);
  // The claim's GPU counts as in use: no planner moves it while the claim holds it.
  CHECK(kc::testing::eventually(
      [&] {
        for (const auto& g : c.poolStatus().value("gpus", json::array())) {
          if (g.value("id", "") == "c0.04") {
            return g.value("inUseBy", json::array()) ==
                   json::array({"ResourceClaim default/claim-1"});
          }
        }
        return false;
      },
      30s));
}

TEST_CASE("reconfig-mgr: a claim allocated a GPU the pool does not have fails to attach",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids["pool-a"].size() == 1; }, 30s));

  allocateClaim(c, "claim-2", "c0.99", "host02", "pod-2");
  REQUIRE(kc::testing::eventually(
      [&] { return !claimCondition(c, "claim-2", kc::api::kAttachFailedCondition).is_null(); },
      30s));
  const json cond = claimCondition(c, "claim-2", kc::api::kAttachFailedCondition);
  CAPTURE(cond);
  CHECK(cond["status"] == "True");
  CHECK(cond["reason"] == "DeviceGone");
  CHECK(cond["observedGeneration"] == cond["claimGeneration"]);
  CHECK(claimCondition(c, "claim-2", kc::api::kAttachedCondition).is_null());
  CHECK(c.simGpus()["c0.04"] == "");  // nothing moved
}

TEST_CASE("reconfig-mgr: a claim allocated an unhealthy GPU fails to attach, nothing moves",
          "[reconfig][dra][e2e]") {
  ClusterSpec s = small();
  s.chassis["c0"][3].healthy = false;  // c0.04, unattached
  SimCluster c(s);
  c.startManager();
  setPath(c, "DRA");
  REQUIRE(c.poolUntil([](const json& st) {
    for (const auto& g : st.value("gpus", json::array())) {
      if (g.value("id", "") == "c0.04") {
        return g.value("health", "") == "Unhealthy";
      }
    }
    return false;
  }));

  allocateClaim(c, "claim-3", "c0.04", "host02", "pod-3");
  REQUIRE(kc::testing::eventually(
      [&] { return !claimCondition(c, "claim-3", kc::api::kAttachFailedCondition).is_null(); },
      30s));
  const json cond = claimCondition(c, "claim-3", kc::api::kAttachFailedCondition);
  CAPTURE(cond);
  CHECK(cond["status"] == "True");
  CHECK(cond["reason"] == "Unhealthy");
  CHECK(cond["observedGeneration"] == cond["claimGeneration"]);
  CHECK(claimCondition(c, "claim-3", kc::api::kAttachedCondition).is_null());
  CHECK(c.simGpus()["c0.04"] == "");
  CHECK(c.poolStatus().value("moves", json::array()).empty());
  // The claim holds it: it stays in the fabric pool, unhealthy or not.
  CHECK(kc::testing::eventually(
      [&] { return published(c).ids["pool-a"] == std::vector<std::string>{"c0.04"}; }, 30s));
}

TEST_CASE("reconfig-mgr: a claim deleted while its GPU drains cancels the attach",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager({"--dra-drain-settle-seconds", "60"});  // the drain lasts: time to delete
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  REQUIRE(kc::testing::eventually([&] { return c.allocatable("host01") == 0; }, 30s));

  allocateClaim(c, "claim-4", "c0.01", "host02", "pod-4");
  auto first = [&] {
    const json moves = c.poolStatus().value("moves", json::array());
    return moves.empty() ? json::object() : moves[0];
  };
  REQUIRE(kc::testing::eventually(
      [&] { return first().value("phase", "") == "Draining" && first()["kind"] == "Claim"; }, 30s));
  REQUIRE(c.client().remove(kc::api::gvr::resourceClaims(), "default", "claim-4"));
  REQUIRE(kc::testing::eventually([&] { return first().value("phase", "") == "Failed"; }, 30s));
  const json m = first();
  CAPTURE(m);
  CHECK(m.value("cancelled", false));
  CHECK(m["claim"] == "default/claim-4");
  CHECK(c.simGpus()["c0.01"] == "host01");  // left where it was
}

TEST_CASE("reconfig-mgr: a fabric that refuses the attach fails the claim, nothing is lost",
          "[reconfig][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids["pool-a"].size() == 1; }, 30s));
  c.fault({{"chassis", "c0"}, {"op", "assign"}, {"kind", "fail"}, {"gpu", "04"}, {"times", -1}});

  allocateClaim(c, "claim-5", "c0.04", "host02", "pod-5");
  REQUIRE(kc::testing::eventually(
      [&] { return !claimCondition(c, "claim-5", kc::api::kAttachFailedCondition).is_null(); },
      60s));
  const json cond = claimCondition(c, "claim-5", kc::api::kAttachFailedCondition);
  CAPTURE(cond);
  CHECK(cond["status"] == "True");
  CHECK(cond["reason"] == "AttachFailed");
  CHECK_FALSE(cond.value("message", "").empty());
  CHECK(claimCondition(c, "claim-5", kc::api::kAttachedCondition).is_null());
  // The GPU is shown Unhealthy for the hold-off, so no allocator picks it again at once; the
  // claim still holds it, so it stays where the allocation names it until let go.
  CHECK(c.poolUntil([](const json& st) {
    for (const auto& g : st.value("gpus", json::array())) {
      if (g.value("id", "") == "c0.04") {
        return g.value("health", "") == "Unhealthy" &&
               g.value("healthDetail", "").find("failed attach") != std::string::npos;
      }
    }
    return false;
  }));
  REQUIRE(c.client().remove(kc::api::gvr::resourceClaims(), "default", "claim-5"));
  CHECK(kc::testing::eventually([&] { return published(c).ids["pool-a"].empty(); }, 30s));
  c.clearFaults();
  c.invariants();
  claimInvariants(c);
  CHECK(c.simGpus()["c0.04"] == "");
  // Decided: the controller does not try again for this allocation.
  const auto movesNow = c.poolStatus().value("moves", json::array()).size();
  CHECK_FALSE(kc::testing::eventually(
      [&] { return c.poolStatus().value("moves", json::array()).size() != movesNow; }, 3s));
}

TEST_CASE("reconfig-mgr: killed in the middle of a claim's move, the next leader finishes it",
          "[reconfig][dra][e2e]") {
  struct Case {
    std::string gpu;    // allocated from the fabric pool
    std::string op;     // the chassis operation that hangs ("" none)
    std::string phase;  // the journal phase the kill comes in
  };
  const auto which = GENERATE(as<std::string>{}, "Draining", "Detaching", "Attaching", "Verifying");
  CAPTURE(which);
  const std::map<std::string, Case> cases = {
      {"Draining", {"c0.02", "", "Draining"}},
      {"Detaching", {"c0.02", "unassign", "Detaching"}},
      {"Attaching", {"c0.04", "assign", "Attaching"}},
      {"Verifying", {"c0.04", "", "Verifying"}},
  };
  const Case& k = cases.at(which);
  ClusterSpec spec = small();
  if (which == "Verifying") {
    // The node's kernel misses the hot-add: the destination's host view shows the GPU only
    // after the node agent's rescan, 3 s on, so Verifying lasts that long; the kill is in it.
    spec.hostView = true;
    spec.hostNeedsRescan = true;
    spec.draNodes = true;
    spec.pluginFlags = {"--rescan-after-seconds", "3"};
  }
  SimCluster c(spec);
  // Draining: the first replica's drain would last a minute; it is killed in it.
  const int first =
      which == "Draining" ? c.startManager({"--dra-drain-settle-seconds", "60"}) : c.startManager();
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  REQUIRE(kc::testing::eventually([&] { return c.allocatable("host01") == 0; }, 30s));
  if (!k.op.empty()) {
    c.fault({{"chassis", "c0"},
             {"op", k.op},
             {"kind", "hang"},
             {"hangMs", 3000},
             {"gpu", k.gpu.substr(3)},
             {"times", 1}});
  }

  allocateClaim(c, "claim-6", k.gpu, "host02", "pod-6");
  REQUIRE(c.poolUntil([&](const json& st) {
    const json moves = st.value("moves", json::array());
    return !moves.empty() && moves[0].value("phase", "") == k.phase;
  }));
  c.killManager(first);
  c.startManager();
  CHECK(kc::testing::eventually([&] { return c.simGpus()[k.gpu] == "host02"; }, 60s));
  REQUIRE(kc::testing::eventually(
      [&] { return !claimCondition(c, "claim-6", kc::api::kAttachedCondition).is_null(); }, 60s));
  CHECK(claimCondition(c, "claim-6", kc::api::kAttachedCondition)["status"] == "True");
  CHECK(claimCondition(c, "claim-6", kc::api::kAttachFailedCondition).is_null());
  c.invariants();
  claimInvariants(c);
}

// ---- kubecomp-sched on the DRA path (docs/dra.md "kubecomp-sched")

namespace {

void createDeviceClass(SimCluster& c, const std::string& name, const std::string& driver) {
  const json cls = {
      {"apiVersion", "resource.k8s.io/v1"},
      {"kind", "DeviceClass"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"selectors",
         json::array({{{"cel", {{"expression", "device.driver == \"" + driver + "\""}}}}})}}}};
  REQUIRE(c.client().create(kc::api::gvr::deviceClasses(), "", cls));
}

void createTemplate(SimCluster& c, const std::string& name, const std::string& cls, int count) {
  const json t = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceClaimTemplate"},
                  {"metadata", {{"name", name}, {"namespace", "default"}}},
                  {"spec",
                   {{"spec",
                     {{"devices",
                       {{"requests", json::array({{{"name", "gpus"},
                                                   {"exactly",
                                                    {{"deviceClassName", cls},
                                                     {"allocationMode", "ExactCount"},
                                                     {"count", count}}}}})}}}}}}}};
  REQUIRE(
      c.client().create({"resource.k8s.io", "v1", "resourceclaimtemplates", true}, "default", t));
}

// reconfig-mgr and kubecomp-sched on the pool, turned to DRA, its 3 GPUs published, and the
// chart's DeviceClass gpu.kubecomp.io.
void startDraWithScheduler(SimCluster& c) {
  c.startManager();
  c.startScheduler();
  setPath(c, "DRA");
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  createDeviceClass(c, "gpu.kubecomp.io", "gpu.kubecomp.io");
}

// A pod of kubecomp-sched whose GPUs come from a claim made from `tmpl`.
void createClaimPod(SimCluster& c, const std::string& name, const std::string& tmpl) {
  const json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"schedulerName", "kubecomp-sched"},
        {"resourceClaims", json::array({{{"name", "gpus"}, {"resourceClaimTemplateName", tmpl}}})},
        {"containers",
         json::array({{{"name", "main"},
                       {"image", "cuda"},
                       {"resources", {{"claims", json::array({{{"name", "gpus"}}})}}}}})}}}};
  REQUIRE(c.client().create(kc::kube::gvr::pods(), "default", pod));
}

json getPod(SimCluster& c, const std::string& name) {
  auto p = c.client().get(kc::kube::gvr::pods(), "default", name);
  return p ? *p : json::object();
}

// The claim the resourceclaim controller made for the pod ("" none yet).
std::string podClaim(SimCluster& c, const std::string& pod) {
  for (const auto& s : getPod(c, pod)
                           .value("status", json::object())
                           .value("resourceClaimStatuses", json::array())) {
    return s.value("resourceClaimName", "");
  }
  return "";
}

// The messages of the pod's Events, one per line (they stay; a condition is overwritten).
std::string podEvents(SimCluster& c, const std::string& pod) {
  std::string out;
  auto list = c.client().listAll(kc::kube::gvr::events(), "default");
  if (!list) {
    return out;
  }
  for (const auto& e : list->items) {
    if (e.value("involvedObject", json::object()).value("name", "") == pod) {
      out += e.value("message", "") + "\n";
    }
  }
  return out;
}

std::string podCondition(SimCluster& c, const std::string& pod) {
  for (const auto& cond :
       getPod(c, pod).value("status", json::object()).value("conditions", json::array())) {
    if (cond.value("type", "") == "PodScheduled") {
      return cond.value("reason", "") + ": " + cond.value("message", "");
    }
  }
  return "";
}

}  // namespace

TEST_CASE("kubecomp-sched: a pod's claim from a template is allocated, attached, and bound",
          "[reconfig][sched][dra][e2e]") {
  SimCluster c(small());
  startDraWithScheduler(c);
  createTemplate(c, "three-gpus", "gpu.kubecomp.io", 3);

  // No node has 3; host01 has 2 and the pool 1 unattached: Eq. 1 picks host01, one move.
  createClaimPod(c, "train", "three-gpus");
  REQUIRE(kc::testing::eventually([&] { return !podClaim(c, "train").empty(); }, 30s));
  const std::string claim = podClaim(c, "train");
  const bool bound = kc::testing::eventually(
      [&] { return getPod(c, "train")["spec"].value("nodeName", "") == "host01"; }, 60s);
  CAPTURE(podCondition(c, "train"));
  REQUIRE(bound);
  CHECK(c.simGpus()["c0.04"] == "host01");
  auto obj = c.client().get(kc::api::gvr::resourceClaims(), "default", claim);
  REQUIRE(obj);
  auto parsed = kc::api::parseClaim(*obj);
  REQUIRE(parsed);
  REQUIRE(parsed->allocation);
  CHECK(parsed->allocation->nodeName == "host01");
  CHECK_FALSE(parsed->allocation->allocationTimestamp.empty());
  REQUIRE(parsed->allocation->results.size() == 3);
  std::map<std::string, std::string> pools;
  for (const auto& d : parsed->allocation->results) {
    pools[d.device] = d.pool;
    CHECK(d.driver == "gpu.kubecomp.io");
    CHECK(d.request == "gpus");
    // Only the device that had to be attached carries the binding conditions.
    CHECK(d.bindingConditions.empty() == (d.pool == "pool-a/host01"));
  }
  CHECK(pools["c0-04-d4c00c44"] == "pool-a");
  REQUIRE(parsed->reservedFor.size() == 1);
  CHECK(parsed->reservedFor[0].name == "train");
  // As kube-scheduler: the claim carries the delete-protection finalizer while allocated.
  CHECK((*obj)["metadata"].value("finalizers", json::array()) ==
        json::array({std::string(kc::api::kClaimDeleteProtectionFinalizer)}));
  CHECK(claimCondition(c, claim, kc::api::kAttachedCondition)["status"] == "True");
  // The pod ends: the resourceclaim controller lets the claim go (the finalizer allows it).
  json done = getPod(c, "train");
  done["status"]["phase"] = "Succeeded";
  REQUIRE(c.client().updateStatus(kc::kube::gvr::pods(), "default", done));
  CHECK(kc::testing::eventually(
      [&] {
        auto r = c.client().get(kc::api::gvr::resourceClaims(), "default", claim);
        return !r && r.error().isNotFound();
      },
      30s));
  c.invariants();
  claimInvariants(c);
}

TEST_CASE("kubecomp-sched: a pod with a claim of another driver stays Pending, saying why",
          "[reconfig][sched][dra][e2e]") {
  SimCluster c(small());
  c.startManager();
  c.startScheduler();
  setPath(c, "DRA");
  createDeviceClass(c, "nic.example.com", "nic.example.com");
  createTemplate(c, "one-nic", "nic.example.com", 1);
  REQUIRE(kc::testing::eventually([&] { return published(c).ids.size() == 3; }, 30s));
  createClaimPod(c, "nic-user", "one-nic");
  REQUIRE(kc::testing::eventually(
      [&] { return podCondition(c, "nic-user").find("nic.example.com") != std::string::npos; },
      30s));
  CHECK_THAT(podCondition(c, "nic-user"),
             Catch::Contains("Unschedulable") && Catch::Contains("driver gpu.kubecomp.io"));
  CHECK(getPod(c, "nic-user")["spec"].value("nodeName", "").empty());
}

TEST_CASE("kubecomp-sched: an attach that fails clears the allocation and the pod goes elsewhere",
          "[reconfig][sched][dra][e2e]") {
  SimCluster c(small());
  startDraWithScheduler(c);
  createTemplate(c, "two-gpus", "gpu.kubecomp.io", 2);
  // host02 has 1: a 2-GPU pod there needs c0.04 attached; the chassis refuses. host01 (2 local)
  // is taken first by a pod that runs there.
  c.fault({{"chassis", "c0"}, {"op", "assign"}, {"kind", "fail"}, {"gpu", "04"}, {"times", -1}});
  createClaimPod(c, "first", "two-gpus");
  REQUIRE(kc::testing::eventually(
      [&] { return getPod(c, "first")["spec"].value("nodeName", "") == "host01"; }, 60s));
  createClaimPod(c, "second", "two-gpus");
  // Placed on host02 with c0.04 from the pool; the attach fails; the allocation is cleared and
  // the pod is scheduled again (and fails again, the pool having nothing else): never bound.
  REQUIRE(kc::testing::eventually(
      [&] { return podEvents(c, "second").find("failed to bind") != std::string::npos; }, 60s));
  CHECK(getPod(c, "second")["spec"].value("nodeName", "").empty());
  // host01's pod ends: its GPUs come free on host01, and the second pod lands there.
  REQUIRE(c.client().remove(kc::kube::gvr::pods(), "default", "first"));
  const bool landed = kc::testing::eventually(
      [&] { return getPod(c, "second")["spec"].value("nodeName", "") == "host01"; }, 60s);
  CAPTURE(podCondition(c, "second"));
  CHECK(landed);
  c.clearFaults();
  c.invariants({"c0.04"});
  claimInvariants(c);
}

TEST_CASE("kubecomp-sched: two pods racing for one node's GPUs never share a device",
          "[reconfig][sched][dra][e2e]") {
  SimCluster c(small());
  startDraWithScheduler(c);
  createTemplate(c, "two-gpus", "gpu.kubecomp.io", 2);
  // Both would rather have host01's two GPUs; one gets them, the other goes to host02 with
  // the unattached GPU attached there.
  createClaimPod(c, "left", "two-gpus");
  createClaimPod(c, "right", "two-gpus");
  const bool bothBound = kc::testing::eventually(
      [&] {
        return !getPod(c, "left")["spec"].value("nodeName", "").empty() &&
               !getPod(c, "right")["spec"].value("nodeName", "").empty();
      },
      60s);
  CAPTURE(podCondition(c, "left"), podCondition(c, "right"));
  REQUIRE(bothBound);
  const std::set<std::string> nodes = {getPod(c, "left")["spec"].value("nodeName", ""),
                                       getPod(c, "right")["spec"].value("nodeName", "")};
  CHECK(nodes == std::set<std::string>{"host01", "host02"});
  CHECK(c.simGpus()["c0.04"] == "host02");
  c.invariants();
  claimInvariants(c);
}
