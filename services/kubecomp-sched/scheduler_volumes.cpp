// kubecomp-sched's VolumeBinding writes (docs/sched.md "Volumes"): the informers of
// PersistentVolumeClaims, PersistentVolumes and StorageClasses, and what kube-scheduler's
// PreBind writes once a node is chosen (bindAPIUpdate):
//   - a PV chosen for a WaitForFirstConsumer claim gets spec.claimRef (and the annotation
//     pv.kubernetes.io/bound-by-controller), written with the resourceVersion the decision saw,
//     so a PV taken meanwhile answers 409 and the pod is scheduled again. Nothing more: the
//     claim's half of the binding (spec.volumeName, pv.kubernetes.io/bind-completed) is the PV
//     controller's, and the pod waits for it (the cache's PreBind wait, bounded);
//   - a claim to provision gets volume.kubernetes.io/selected-node: <node>; the provisioner
//     (external-provisioner, after the PV controller has set its storage-provisioner
//     annotation) creates a PV for that node and the claim is bound to it.

#include <spdlog/spdlog.h>

#include "libcore/alloc/volume_objects.hpp"
#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

kube::GroupVersionResource pvcResource() {
  return {"", "v1", "persistentvolumeclaims", true};
}
kube::GroupVersionResource pvResource() {
  return {"", "v1", "persistentvolumes", false};
}
kube::GroupVersionResource storageClassResource() {
  return {"storage.k8s.io", "v1", "storageclasses", false};
}

}  // namespace

void Scheduler::makeVolumeInformers() {
  volumeClaims_ = compactInformer(
      client_, pvcResource(), [this](json&& obj) { return cache_.ingestVolumeClaim(obj); },
      [this](const json& obj) {
        cache_.removeVolumeClaim(obj.at("metadata").value("namespace", std::string()) + "/" +
                                 nameOf(obj));
      });
  volumes_ = compactInformer(
      client_, pvResource(), [this](json&& obj) { return cache_.ingestVolume(obj); },
      [this](const json& obj) { cache_.removeVolume(nameOf(obj)); });
  storageClasses_ = compactInformer(
      client_, storageClassResource(),
      [this](json&& obj) { return cache_.ingestStorageClass(obj); },
      [this](const json& obj) { cache_.removeStorageClass(nameOf(obj)); });
}

void Scheduler::startVolumeInformers() {
  storageClasses_->start();
  volumes_->start();
  volumeClaims_->start();
}

bool Scheduler::volumeInformersSynced() const {
  return volumeClaims_->hasSynced() && volumes_->hasSynced() && storageClasses_->hasSynced();
}

bool Scheduler::writeVolumes(const Action& a) {
  const std::string yes = "yes";
  for (const VolumeBindingWrite& b : a.volumeWrites.bindings) {
    json pv = {{"metadata",
                {{"resourceVersion", b.volumeVersion},
                 {"annotations", {{std::string(alloc::kAnnBoundByController), yes}}}}},
               {"spec",
                {{"claimRef",
                  {{"kind", "PersistentVolumeClaim"},
                   {"apiVersion", "v1"},
                   {"namespace", b.claimNs},
                   {"name", b.claimName},
                   {"uid", b.claimUid},
                   {"resourceVersion", b.claimVersion}}}}}};
    auto r = client_.patch(pvResource(), "", b.volume, kube::PatchType::kMerge, pv);
    if (!r) {
      spdlog::warn("pod {}: binding PersistentVolume {} to claim {}/{}: {}", a.key, b.volume,
                   b.claimNs, b.claimName, r.error().message);
      return false;
    }
  }
  for (const ProvisionWrite& p : a.volumeWrites.provisions) {
    json pvc = {{"metadata",
                 {{"resourceVersion", p.claimVersion},
                  {"annotations", {{std::string(alloc::kAnnSelectedNode), a.node}}}}}};
    auto r = client_.patch(pvcResource(), p.claimNs, p.claimName, kube::PatchType::kMerge, pvc);
    if (!r) {
      spdlog::warn("pod {}: selecting node {} for claim {}/{}: {}", a.key, a.node, p.claimNs,
                   p.claimName, r.error().message);
      return false;
    }
  }
  return true;
}

void Scheduler::executeBindVolumes(const Action& a) {
  const bool ok = writeVolumes(a);
  if (!ok) {
    noteError();
  }
  cache_.volumesDone(a.key, ok, clock_.now());
}

}  // namespace kc::sched
