// VolumeBinding in SchedCache on its own (issue 27): objects handed in as the informers would,
// time passed in by the test. The pod holds its node while its claims are bound (PreBind's
// wait), binds once they are, and is scheduled again when the wait runs past its bound, when a
// provisioner gives the claim back (selected-node removed) or when a write is refused; a pod
// that also needs GPUs moved asks for them and binds once both are done; a PV given its claimRef
// leaves the claim to the PV controller (a stand-in step here) and the pod binds after it.

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

json podWithClaim(const std::string& name, const std::string& claim, int gpus) {
  json res = {{"cpu", "1"}};
  if (gpus > 0) {
    res["kubecomp.io/gpu"] = std::to_string(gpus);
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", "1"},
            {"creationTimestamp", "2026-01-01T00:00:01Z"}}},
          {"spec",
           {{"schedulerName", "kubecomp-sched"},
            {"volumes", {{{"name", "data"}, {"persistentVolumeClaim", {{"claimName", claim}}}}}},
            {"containers", {{{"name", "c"}, {"resources", {{"requests", res}}}}}}}},
          {"status", {{"phase", "Pending"}}}};
}

json claim(const std::string& name, const std::string& rv, const json& annotations = json::object(),
           const std::string& volumeName = "") {
  json spec = {{"storageClassName", "csi"},
               {"accessModes", {"ReadWriteOnce"}},
               {"resources", {{"requests", {{"storage", "1Gi"}}}}}};
  if (!volumeName.empty()) {
    spec["volumeName"] = volumeName;
  }
  return {{"metadata",
           {{"name", name},
            {"namespace", "team"},
            {"uid", "uid-" + name},
            {"resourceVersion", rv},
            {"annotations", annotations}}},
          {"spec", spec}};
}

json provisionedVolume(const std::string& name, const std::string& onNode) {
  return json::parse(R"({"metadata": {"name": ")" + name + R"(", "resourceVersion": "7"},
    "spec": {"storageClassName": "csi", "capacity": {"storage": "1Gi"},
             "accessModes": ["ReadWriteOnce"],
             "claimRef": {"namespace": "team", "name": "data", "uid": "uid-data"},
             "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
               {"key": "kubernetes.io/hostname", "operator": "In", "values": [")" +
                     onNode + R"("]}]}]}}},
    "status": {"phase": "Bound"}})");
}

json labelled(json n) {
  n["metadata"]["labels"] = {{"kubernetes.io/hostname", n["metadata"]["name"]}};
  return n;
}

struct Fixture {
  Fixture(int gpusOnNode, std::chrono::milliseconds bindTimeout = 60s)
      : cache([&] {
          kc::sched::CacheOptions o;
          o.reservationTimeout = 30s;
          o.volumeBindTimeout = bindTimeout;
          o.initialBackoff = 1s;
          o.maxBackoff = 4s;
          return o;
        }()) {
    cache.ingestNode(labelled(node("n1", gpusOnNode)));
    cache.ingestPool(pool("p0", {"n1"}, {{"g1", gpusOnNode > 0 ? "n1" : ""}}));
    cache.ingestStorageClass({{"metadata", {{"name", "csi"}}},
                              {"provisioner", "csi.example.com"},
                              {"volumeBindingMode", "WaitForFirstConsumer"}});
    cache.ingestVolumeClaim(claim("data", "1"));
    cache.resetQueue(t0);
  }
  SchedCache cache;
  const kc::sched::Clock::time_point t0 = kc::sched::Clock::time_point{} + 1h;
};

// An Available PV of class csi, reachable from every node.
json freeVolume(const std::string& name) {
  return {{"metadata", {{"name", name}, {"resourceVersion", "4"}}},
          {"spec",
           {{"storageClassName", "csi"},
            {"capacity", {{"storage", "5Gi"}}},
            {"accessModes", {"ReadWriteOnce"}}}},
          {"status", {{"phase", "Available"}}}};
}

// The PV controller, played by the test: the claim a PV's claimRef names (by uid) is bound to
// it (spec.volumeName and pv.kubernetes.io/bind-completed), as the informer then shows it.
void standInPvControllerBinds(SchedCache& cache, const json& pv, const std::string& rv) {
  const json& ref = pv["spec"]["claimRef"];
  json c = claim(ref["name"].get<std::string>(), rv, {{"pv.kubernetes.io/bind-completed", "yes"}},
                 pv["metadata"]["name"].get<std::string>());
  REQUIRE(c["metadata"]["uid"] == ref["uid"]);
  cache.ingestVolumeClaim(c);
}

const json kSelected = {{"volume.kubernetes.io/selected-node", "n1"}};
const json kBound = {{"volume.kubernetes.io/selected-node", "n1"},
                     {"pv.kubernetes.io/bind-completed", "yes"}};

}  // namespace

TEST_CASE("volumes: the pod binds once its provisioned claim is bound", "[sched][volumes]") {
  Fixture f(1);
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBindVolumes);
  CHECK(actions[0].node == "n1");
  REQUIRE(actions[0].volumeWrites.provisions.size() == 1);
  CHECK(actions[0].volumeWrites.provisions[0].claimName == "data");
  CHECK(actions[0].volumeWrites.provisions[0].claimVersion == "1");
  CHECK(f.cache.stats().reservations == 1);  // the node is held meanwhile
  f.cache.volumesDone("team/p", true, f.t0);
  CHECK(f.cache.next(f.t0 + 1s, 10).empty());
  f.cache.ingestVolumeClaim(claim("data", "2", kSelected));  // our annotation came back
  CHECK(f.cache.next(f.t0 + 2s, 10).empty());
  f.cache.ingestVolume(provisionedVolume("pvc-1", "n1"));
  f.cache.ingestVolumeClaim(claim("data", "3", kBound, "pvc-1"));
  actions = f.cache.next(f.t0 + 3s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n1");
}

TEST_CASE("volumes: the wait is bounded, then the pod is scheduled again", "[sched][volumes]") {
  Fixture f(1, 20s);
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  REQUIRE(f.cache.next(f.t0, 10).size() == 1);
  f.cache.volumesDone("team/p", true, f.t0);
  f.cache.ingestVolumeClaim(claim("data", "2", kSelected));
  CHECK(f.cache.next(f.t0 + 19s, 10).empty());
  CHECK(f.cache.nextWake(f.t0 + 19s) <= f.t0 + 20s);
  auto actions = f.cache.next(f.t0 + 20s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kCancel);
  CHECK(actions[0].message ==
        "running PreBind plugin \"VolumeBinding\": binding volumes: context deadline exceeded "
        "(the pod's PersistentVolumeClaims were not all bound within 20s); trying again");
  CHECK(f.cache.stats().reservations == 0);
  // After its backoff it is decided again: the claim still names n1, so n1 again.
  actions = f.cache.next(f.t0 + 22s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBindVolumes);
}

TEST_CASE("volumes: a provisioner that gives up makes the pod go again", "[sched][volumes]") {
  Fixture f(1);
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  REQUIRE(f.cache.next(f.t0, 10).size() == 1);
  f.cache.volumesDone("team/p", true, f.t0);
  f.cache.ingestVolumeClaim(claim("data", "2", kSelected));
  // external-provisioner failed: it removes the selected-node annotation.
  f.cache.ingestVolumeClaim(claim("data", "3"));
  auto actions = f.cache.next(f.t0 + 1s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kCancel);
  CHECK(actions[0].message ==
        "running PreBind plugin \"VolumeBinding\": binding volumes: selectedNode annotation "
        "reset for PVC \"data\"");
}

TEST_CASE("volumes: a refused write drops the assumption and the node", "[sched][volumes]") {
  Fixture f(1);
  f.cache.ingestVolume(freeVolume("local"));
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  REQUIRE(actions.size() == 1);
  REQUIRE(actions[0].volumeWrites.bindings.size() == 1);
  CHECK(actions[0].volumeWrites.bindings[0].volume == "local");
  CHECK(actions[0].volumeWrites.bindings[0].volumeVersion == "4");
  CHECK(actions[0].volumeWrites.bindings[0].claimUid == "uid-data");
  // The PV was taken meanwhile (409): the pod lets the node go and backs off.
  f.cache.volumesDone("team/p", false, f.t0);
  CHECK(f.cache.stats().reservations == 0);
  CHECK(f.cache.next(f.t0 + 500ms, 10).empty());
  actions = f.cache.next(f.t0 + 1s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].volumeWrites.bindings.size() == 1);  // the PV is free again in the catalog
}

TEST_CASE("volumes: GPUs moved and the claim provisioned, then the bind", "[sched][volumes]") {
  Fixture f(0);
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kReserve);
  CHECK(actions[0].deficit == 1);
  CHECK(actions[0].volumeWrites.provisions.size() == 1);
  f.cache.volumesDone("team/p", true, f.t0);
  f.cache.reserveDone("team/p", true, f.t0);
  f.cache.ingestVolume(provisionedVolume("pvc-1", "n1"));
  f.cache.ingestVolumeClaim(claim("data", "3", kBound, "pvc-1"));
  CHECK(f.cache.next(f.t0 + 1s, 10).empty());  // the GPU is not there yet
  f.cache.ingestPool(pool("p0", {"n1"}, {{"g1", "n1"}}));
  f.cache.ingestNode(labelled(node("n1", 1)));
  actions = f.cache.next(f.t0 + 2s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
}

TEST_CASE("volumes: a PV given its claimRef, the pod binds once the PV controller bound the claim",
          "[sched][volumes]") {
  Fixture f(1);
  f.cache.ingestVolume(freeVolume("local"));
  f.cache.ingestPod(podWithClaim("p", "data", 1), f.t0);
  auto actions = f.cache.next(f.t0, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBindVolumes);
  REQUIRE(actions[0].volumeWrites.bindings.size() == 1);
  CHECK(actions[0].volumeWrites.provisions.empty());
  f.cache.volumesDone("team/p", true, f.t0);
  // The PV as the API shows it after the scheduler's write: claimRef set, the claim untouched.
  json pv = freeVolume("local");
  pv["metadata"]["resourceVersion"] = "5";
  pv["spec"]["claimRef"] = {{"kind", "PersistentVolumeClaim"},
                            {"namespace", "team"},
                            {"name", "data"},
                            {"uid", "uid-data"}};
  f.cache.ingestVolume(pv);
  CHECK(f.cache.next(f.t0 + 1s, 10).empty());  // PreBind waits for the claim's half
  CHECK(f.cache.stats().reservations == 1);
  standInPvControllerBinds(f.cache, pv, "2");
  actions = f.cache.next(f.t0 + 2s, 10);
  REQUIRE(actions.size() == 1);
  CHECK(actions[0].kind == Kind::kBind);
  CHECK(actions[0].node == "n1");
}
