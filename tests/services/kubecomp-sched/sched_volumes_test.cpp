// VolumeBinding with kubecomp-sched against the API test double (issue 27): a pod whose
// WaitForFirstConsumer claim is provisioned gets its node written on the claim
// (volume.kubernetes.io/selected-node) and binds only once a stand-in provisioner (playing
// external-provisioner and the PV controller) has created a PV for that node and bound the
// claim; a local PV with node affinity steers its pod and gets its claimRef from the scheduler,
// which then waits for a stand-in PV controller to bind the claim (kube-scheduler writes only the
// PV's half of a static binding); an unbound claim of an Immediate class leaves the pod Pending
// with kube-scheduler's reason and no GPU moved for it.

#include <catch2/catch.hpp>
#include <mutex>

#include "libcore/kube/informer.hpp"
#include "tests/services/kubecomp-sched/sched_cluster.hpp"

using namespace std::chrono_literals;
using kc::testing::PodOpts;
using kc::testing::SchedCluster;
using nlohmann::json;

namespace {

const kc::kube::GroupVersionResource kPvcs{"", "v1", "persistentvolumeclaims", true};
const kc::kube::GroupVersionResource kPvs{"", "v1", "persistentvolumes", false};
const kc::kube::GroupVersionResource kClasses{"storage.k8s.io", "v1", "storageclasses", false};

void storageClass(SchedCluster& c, const std::string& name, const std::string& provisioner,
                  const std::string& mode, const json& allowedTopologies = json()) {
  json sc = {
      {"metadata", {{"name", name}}}, {"provisioner", provisioner}, {"volumeBindingMode", mode}};
  if (!allowedTopologies.is_null()) {
    sc["allowedTopologies"] = allowedTopologies;
  }
  auto r = c.client->create(kClasses, "", sc);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

void claim(SchedCluster& c, const std::string& name, const std::string& cls,
           const std::string& size = "5Gi") {
  json pvc = {{"metadata", {{"name", name}, {"namespace", "team"}}},
              {"spec",
               {{"storageClassName", cls},
                {"accessModes", {"ReadWriteOnce"}},
                {"resources", {{"requests", {{"storage", size}}}}}}}};
  auto r = c.client->create(kPvcs, "team", pvc);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

// A local PV on `node` (node affinity on kubernetes.io/hostname), made Available as the PV
// controller does for a new PV.
void localVolume(SchedCluster& c, const std::string& name, const std::string& cls,
                 const std::string& node, const json& claimRef = json()) {
  json spec = {{"storageClassName", cls},
               {"capacity", {{"storage", "10Gi"}}},
               {"accessModes", {"ReadWriteOnce"}},
               {"local", {{"path", "/mnt/disks/" + name}}},
               {"nodeAffinity",
                {{"required",
                  {{"nodeSelectorTerms",
                    {{{"matchExpressions",
                       {{{"key", "kubernetes.io/hostname"},
                         {"operator", "In"},
                         {"values", {node}}}}}}}}}}}}};
  if (!claimRef.is_null()) {
    spec["claimRef"] = claimRef;
  }
  auto r = c.client->create(kPvs, "", {{"metadata", {{"name", name}}}, {"spec", spec}});
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
  REQUIRE(c.client
              ->patch(kPvs, "", name, kc::kube::PatchType::kMerge,
                      {{"status", {{"phase", claimRef.is_null() ? "Available" : "Bound"}}}},
                      "status")
              .ok());
}

// A pod asking `gpus` kubecomp.io/gpu that mounts these claims.
void podWithClaims(SchedCluster& c, const std::string& name, const std::vector<std::string>& claims,
                   std::int64_t gpus = 1) {
  json volumes = json::array();
  json mounts = json::array();
  for (const auto& cl : claims) {
    volumes.push_back({{"name", cl}, {"persistentVolumeClaim", {{"claimName", cl}}}});
    mounts.push_back({{"name", cl}, {"mountPath", "/data/" + cl}});
  }
  json pod = {{"metadata", {{"name", name}, {"namespace", "team"}}},
              {"spec",
               {{"schedulerName", "kubecomp-sched"},
                {"volumes", volumes},
                {"containers",
                 {{{"name", "main"},
                   {"image", "busybox"},
                   {"volumeMounts", mounts},
                   {"resources", {{"limits", kc::testing::gpuLimits(gpus, "1")}}}}}}}}};
  auto r = c.client->create(kc::kube::gvr::pods(), "team", pod);
  INFO((r.ok() ? std::string() : r.error().message));
  REQUIRE(r.ok());
}

json getClaim(SchedCluster& c, const std::string& name) {
  auto r = c.client->get(kPvcs, "team", name);
  REQUIRE(r.ok());
  return *r;
}

std::string claimAnnotation(SchedCluster& c, const std::string& name, const std::string& key) {
  json pvc = getClaim(c, name);
  const json ann = pvc["metadata"].value("annotations", json::object());
  return ann.contains(key) ? ann[key].get<std::string>() : "<none>";
}

// external-provisioner and the PV controller, played by the test: a claim given a selected node
// gets a PV created for that node (node affinity on its hostname) and is bound to it.
class StandInProvisioner {
 public:
  explicit StandInProvisioner(SchedCluster& c) : c_(c) {
    kc::kube::InformerOptions io;
    io.resource = kPvcs;
    informer_ = std::make_unique<kc::kube::Informer>(*c.client, io);
    kc::kube::ResourceEventHandler h;
    h.onAdd = [this](const kc::kube::ObjectPtr& o) { provision(*o); };
    h.onUpdate = [this](const kc::kube::ObjectPtr&, const kc::kube::ObjectPtr& o) {
      provision(*o);
    };
    informer_->addHandler(std::move(h));
    informer_->start();
  }
  ~StandInProvisioner() { informer_->stop(); }

  std::vector<std::string> provisioned() {
    std::lock_guard<std::mutex> lock(mu_);
    return provisioned_;
  }

 private:
  void provision(const json& pvc) {
    const json ann = pvc["metadata"].value("annotations", json::object());
    if (!ann.contains("volume.kubernetes.io/selected-node") ||
        !pvc["spec"].value("volumeName", std::string()).empty()) {
      return;
    }
    const std::string node = ann["volume.kubernetes.io/selected-node"];
    const std::string name = pvc["metadata"]["name"];
    const std::string pv = "pvc-" + pvc["metadata"].value("uid", std::string());
    json ref = {{"kind", "PersistentVolumeClaim"},
                {"apiVersion", "v1"},
                {"namespace", "team"},
                {"name", name},
                {"uid", pvc["metadata"].value("uid", std::string())}};
    json spec = {{"storageClassName", pvc["spec"]["storageClassName"]},
                 {"capacity", {{"storage", pvc["spec"]["resources"]["requests"]["storage"]}}},
                 {"accessModes", pvc["spec"]["accessModes"]},
                 {"csi", {{"driver", "csi.example.com"}, {"volumeHandle", pv}}},
                 {"claimRef", ref},
                 {"nodeAffinity",
                  {{"required",
                    {{"nodeSelectorTerms",
                      {{{"matchExpressions",
                         {{{"key", "kubernetes.io/hostname"},
                           {"operator", "In"},
                           {"values", {node}}}}}}}}}}}}};
    if (!c_.client->create(kPvs, "", {{"metadata", {{"name", pv}}}, {"spec", spec}}).ok()) {
      return;  // made already (an update of the same claim)
    }
    const bool bound = c_.client
                           ->patch(kPvs, "", pv, kc::kube::PatchType::kMerge,
                                   {{"status", {{"phase", "Bound"}}}}, "status")
                           .ok() &&
                       c_.client
                           ->patch(kPvcs, "team", name, kc::kube::PatchType::kMerge,
                                   {{"metadata",
                                     {{"annotations",
                                       {{"pv.kubernetes.io/bind-completed", "yes"},
                                        {"pv.kubernetes.io/bound-by-controller", "yes"}}}}},
                                    {"spec", {{"volumeName", pv}}}})
                           .ok();
    std::lock_guard<std::mutex> lock(mu_);
    if (!bound) {
      provisioned_.push_back(name + ": binding failed");
      return;
    }
    provisioned_.push_back(name + "@" + node);
  }

  SchedCluster& c_;
  std::unique_ptr<kc::kube::Informer> informer_;
  std::mutex mu_;  // guards provisioned_
  std::vector<std::string> provisioned_;
};

// The PV controller's half of a static binding, played by the test: a PV whose claimRef names a
// claim of "team" (by uid) that has no volumeName yet gets that claim bound to it
// (spec.volumeName and the bind-completed and bound-by-controller annotations), and both are
// made Bound.
class StandInPvController {
 public:
  explicit StandInPvController(SchedCluster& c) : c_(c) {
    kc::kube::InformerOptions io;
    io.resource = kPvs;
    informer_ = std::make_unique<kc::kube::Informer>(*c.client, io);
    kc::kube::ResourceEventHandler h;
    h.onAdd = [this](const kc::kube::ObjectPtr& o) { bind(*o); };
    h.onUpdate = [this](const kc::kube::ObjectPtr&, const kc::kube::ObjectPtr& o) { bind(*o); };
    informer_->addHandler(std::move(h));
    informer_->start();
  }
  ~StandInPvController() { informer_->stop(); }

  std::vector<std::string> bound() {
    std::lock_guard<std::mutex> lock(mu_);
    return bound_;
  }

 private:
  void bind(const json& pv) {
    const json ref = pv["spec"].value("claimRef", json::object());
    if (ref.value("namespace", "") != "team" || ref.value("uid", "").empty()) {
      return;
    }
    const std::string claimName = ref.value("name", "");
    auto claim = c_.client->get(kPvcs, "team", claimName);
    if (!claim.ok() || (*claim)["metadata"].value("uid", "") != ref.value("uid", "") ||
        !(*claim)["spec"].value("volumeName", std::string()).empty()) {
      return;  // another claim of that name, or bound already
    }
    const std::string name = pv["metadata"]["name"];
    const bool ok = c_.client
                        ->patch(kPvcs, "team", claimName, kc::kube::PatchType::kMerge,
                                {{"metadata",
                                  {{"annotations",
                                    {{"pv.kubernetes.io/bind-completed", "yes"},
                                     {"pv.kubernetes.io/bound-by-controller", "yes"}}}}},
                                 {"spec", {{"volumeName", name}}}})
                        .ok() &&
                    c_.client
                        ->patch(kPvs, "", name, kc::kube::PatchType::kMerge,
                                {{"status", {{"phase", "Bound"}}}}, "status")
                        .ok();
    std::lock_guard<std::mutex> lock(mu_);
    bound_.push_back(ok ? claimName + "->" + name : claimName + ": binding failed");
  }

  SchedCluster& c_;
  std::unique_ptr<kc::kube::Informer> informer_;
  std::mutex mu_;  // guards bound_
  std::vector<std::string> bound_;
};

}  // namespace

TEST_CASE("a WaitForFirstConsumer claim gets its selected node, then the pod binds there",
          "[sched][volumes]") {
  SchedCluster c;
  c.node("n1", {.gpus = 1, .labels = {{"topology.kubernetes.io/zone", "a"}}});
  c.node("n2", {.gpus = 1, .labels = {{"topology.kubernetes.io/zone", "b"}}});
  c.pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n2"}});
  // Provisioned only in zone b.
  storageClass(
      c, "zonal", "csi.example.com", "WaitForFirstConsumer",
      {{{"matchLabelExpressions", {{{"key", "topology.kubernetes.io/zone"}, {"values", {"b"}}}}}}});
  claim(c, "data", "zonal");
  auto s = c.startScheduler(c.options());
  podWithClaims(c, "trainer", {"data"});

  REQUIRE(kc::testing::eventually([&] {
    return claimAnnotation(c, "data", "volume.kubernetes.io/selected-node") != "<none>";
  }));
  CHECK(claimAnnotation(c, "data", "volume.kubernetes.io/selected-node") == "n2");
  // PreBind: no binding while the claim is unbound.
  CHECK(c.nodeOf("trainer").empty());
  CHECK(c.events("trainer", "Scheduled").empty());

  StandInProvisioner provisioner(c);
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("trainer") == "n2"; }));
  CHECK(provisioner.provisioned() == std::vector<std::string>{"data@n2"});
  CHECK(getClaim(c, "data")["spec"].value("volumeName", "").rfind("pvc-", 0) == 0);
  REQUIRE(kc::testing::eventually([&] { return !c.events("trainer", "Scheduled").empty(); }));
  CHECK(c.events("trainer", "Scheduled").front().first ==
        "Successfully assigned team/trainer to n2");
}

TEST_CASE("a local PV steers its pod, gets its claimRef, and the PV controller binds the claim",
          "[sched][volumes]") {
  SchedCluster c;
  c.node("n1", {.gpus = 1});
  c.node("n2", {.gpus = 1});
  c.pool("p0", {"n1", "n2"}, {{"g1", "n1"}, {"g2", "n2"}});
  storageClass(c, "local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer");
  localVolume(c, "disk-n2", "local", "n2");
  claim(c, "cache", "local");
  // A claim bound already, to a PV on n1: its pod goes to n1.
  localVolume(c, "disk-n1", "local", "n1",
              {{"kind", "PersistentVolumeClaim"}, {"namespace", "team"}, {"name", "logs"}});
  claim(c, "logs", "local");
  REQUIRE(
      c.client
          ->patch(kPvcs, "team", "logs", kc::kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{"pv.kubernetes.io/bind-completed", "yes"}}}}},
                   {"spec", {{"volumeName", "disk-n1"}}}})
          .ok());
  auto s = c.startScheduler(c.options());

  podWithClaims(c, "reader", {"cache"});
  auto claimRefName = [&] {
    auto pv = c.client->get(kPvs, "", "disk-n2");
    REQUIRE(pv.ok());
    return (*pv)["spec"].value("claimRef", json::object()).value("name", "");
  };
  REQUIRE(kc::testing::eventually([&] { return claimRefName() == "cache"; }));
  auto pv = c.client->get(kPvs, "", "disk-n2");
  REQUIRE(pv.ok());
  CHECK((*pv)["spec"]["claimRef"].value("uid", "") == getClaim(c, "cache")["metadata"]["uid"]);
  CHECK((*pv)["metadata"]["annotations"].value("pv.kubernetes.io/bound-by-controller", "") ==
        "yes");
  // The claim's half is the PV controller's: with none running, the scheduler leaves the claim
  // alone and the pod waits (PreBind). Absence is checked for a while: the scheduler wrote the
  // claim right after the PV when it did write it.
  CHECK_FALSE(kc::testing::eventually(
      [&] { return !getClaim(c, "cache")["spec"].value("volumeName", "").empty(); }, 500ms));
  CHECK(claimAnnotation(c, "cache", "pv.kubernetes.io/bind-completed") == "<none>");
  CHECK(c.nodeOf("reader").empty());

  StandInPvController pvController(c);
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("reader") == "n2"; }));
  CHECK(pvController.bound() == std::vector<std::string>{"cache->disk-n2"});
  CHECK(getClaim(c, "cache")["spec"].value("volumeName", "") == "disk-n2");

  podWithClaims(c, "writer", {"logs"});
  REQUIRE(kc::testing::eventually([&] { return c.nodeOf("writer") == "n1"; }));

  // The PV is taken now: a second pod wanting a local volume finds none on any node.
  claim(c, "more", "local");
  podWithClaims(c, "late", {"more"}, 0);
  REQUIRE(kc::testing::eventually([&] { return !c.condition("late").is_null(); }));
  CHECK(c.condition("late").value("message", "") ==
        "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.");
  CHECK(c.nodeOf("late").empty());
}

TEST_CASE("an unbound Immediate claim leaves the pod Pending with the reason, no GPU moved",
          "[sched][volumes]") {
  SchedCluster c;
  c.node("n1", {.gpus = 0});
  c.pool("p0", {"n1"}, {{"g1", ""}, {"g2", ""}});
  storageClass(c, "standard", "csi.example.com", "Immediate");
  claim(c, "scratch", "standard");
  auto s = c.startScheduler(c.options());
  // Two GPUs the pool could move to n1, were it not for the claim.
  podWithClaims(c, "stuck", {"scratch"}, 2);
  podWithClaims(c, "nowhere", {"absent"}, 0);

  const std::string reason =
      "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: "
      "0/1 nodes are available: 1 Preemption is not helpful for scheduling.";
  REQUIRE(kc::testing::eventually([&] { return !c.condition("stuck").is_null(); }));
  CHECK(c.condition("stuck").value("reason", "") == "Unschedulable");
  CHECK(c.condition("stuck").value("message", "") == reason);
  REQUIRE(kc::testing::eventually([&] { return !c.events("stuck", "FailedScheduling").empty(); }));
  CHECK(c.events("stuck", "FailedScheduling").front().first == reason);
  CHECK(c.annotationOf("stuck", "kubecomp.io/dst-node") == "<none>");
  CHECK(c.events("stuck", "Reconfig").empty());
  REQUIRE(kc::testing::eventually([&] { return !c.condition("nowhere").is_null(); }));
  CHECK(c.condition("nowhere").value("message", "") ==
        "0/1 nodes are available: persistentvolumeclaim \"absent\" not found. preemption: 0/1 "
        "nodes are available: 1 Preemption is not helpful for scheduling.");

  // The PV controller binds the claim: the pod is scheduled (its GPUs asked for) after all.
  localVolume(c, "vol", "standard", "n1",
              {{"kind", "PersistentVolumeClaim"}, {"namespace", "team"}, {"name", "scratch"}});
  REQUIRE(
      c.client
          ->patch(kPvcs, "team", "scratch", kc::kube::PatchType::kMerge,
                  {{"metadata", {{"annotations", {{"pv.kubernetes.io/bind-completed", "yes"}}}}},
                   {"spec", {{"volumeName", "vol"}}}})
          .ok());
  REQUIRE(kc::testing::eventually(
      [&] { return c.annotationOf("stuck", "kubecomp.io/dst-node") == "n1"; }));
}

TEST_CASE("the API double validates storage objects as kube-apiserver does", "[sched][volumes]") {
  SchedCluster c;
  auto bad = c.client->create(kClasses, "",
                              {{"metadata", {{"name", "x"}}}, {"volumeBindingMode", "Later"}});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.find("provisioner: Required value") != std::string::npos);
  CHECK(bad.error().message.find("volumeBindingMode: Unsupported value: \"Later\"") !=
        std::string::npos);
  storageClass(c, "fast", "csi.example.com", "Immediate");
  auto mutate = c.client->patch(kClasses, "", "fast", kc::kube::PatchType::kMerge,
                                {{"volumeBindingMode", "WaitForFirstConsumer"}});
  REQUIRE_FALSE(mutate.ok());
  CHECK(mutate.error().message.find("volumeBindingMode: Forbidden: field is immutable") !=
        std::string::npos);
  auto noModes =
      c.client->create(kPvcs, "team",
                       {{"metadata", {{"name", "p"}}},
                        {"spec", {{"resources", {{"requests", {{"storage", "1Gi"}}}}}}}});
  REQUIRE_FALSE(noModes.ok());
  CHECK(noModes.error().message.find("spec.accessModes: Required value") != std::string::npos);
  claim(c, "p", "fast");
  CHECK(getClaim(c, "p")["status"].value("phase", "") == "Pending");
  // spec.volumeName may be set once; the rest of the spec is fixed.
  REQUIRE(c.client
              ->patch(kPvcs, "team", "p", kc::kube::PatchType::kMerge,
                      {{"spec", {{"volumeName", "v1"}}}})
              .ok());
  CHECK_FALSE(c.client
                  ->patch(kPvcs, "team", "p", kc::kube::PatchType::kMerge,
                          {{"spec", {{"volumeName", "v2"}}}})
                  .ok());
  auto local = c.client->create(kPvs, "",
                                {{"metadata", {{"name", "l"}}},
                                 {"spec",
                                  {{"capacity", {{"storage", "1Gi"}}},
                                   {"accessModes", {"ReadWriteOnce"}},
                                   {"local", {{"path", "/x"}}}}}});
  REQUIRE_FALSE(local.ok());
  CHECK(local.error().message.find("spec.nodeAffinity: Required value: Local volume requires "
                                   "node affinity") != std::string::npos);
}
