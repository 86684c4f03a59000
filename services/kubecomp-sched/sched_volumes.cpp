// kubecomp-sched's VolumeBinding, the cache's side (docs/sched.md "Volumes"): the
// PersistentVolumeClaims, PersistentVolumes and StorageClasses the informers bring, parsed into
// the catalog that placement's filter reads (alloc::VolumeCatalog); after a node is chosen,
// the PVs to bind and the claims to provision there (kube-scheduler's Reserve: the catalog
// assumes them at once, so the next decision does not take the same PV); then, while the pod
// holds the node as a reservation, the claims checked until each is bound (PreBind's wait,
// bounded by volumeBindTimeout) with kube-scheduler's reasons to give up.

#include <spdlog/spdlog.h>

#include "services/kubecomp-sched/sched_cache.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

std::string metaString(const json& keep, const char* key) {
  return keep["metadata"].value(key, std::string());
}

std::string nameOfKey(const std::string& key) {
  return key.substr(key.find('/') + 1);
}

// kube-scheduler's FailedScheduling text for a PreBind failure of the plugin.
std::string preBindFailure(const std::string& why) {
  return "running PreBind plugin \"VolumeBinding\": binding volumes: " + why;
}

}  // namespace

// ---------------------------------------------------------------- informer side

json SchedCache::ingestVolumeClaim(const json& obj) {
  json keep = detail::storeIdentity(obj);
  auto c = alloc::parseVolumeClaim(obj);
  const std::string key = metaString(keep, "namespace") + "/" + metaString(keep, "name");
  std::lock_guard<std::mutex> lock(mu_);
  if (!c) {
    // A claim we cannot read counts as absent: its pods wait, saying it is not found.
    spdlog::warn("PersistentVolumeClaim {}: {}", key, c.error().message);
    volumes_.removeClaim(key);
  } else {
    volumes_.setClaim(std::move(*c));
  }
  // A claim bound or provisioned may let a pod go (queued or holding its node).
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeVolumeClaim(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  volumes_.removeClaim(key);
  reservationsDirty_ = !reservedByOrder_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestVolume(const json& obj) {
  json keep = detail::storeIdentity(obj);
  auto v = alloc::parsePersistentVolume(obj);
  const std::string name = metaString(keep, "name");
  std::lock_guard<std::mutex> lock(mu_);
  if (!v) {
    spdlog::warn("PersistentVolume {}: {}; not binding it", name, v.error().message);
    volumes_.removeVolume(name);
  } else {
    volumes_.setVolume(std::move(*v));
  }
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeVolume(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  volumes_.removeVolume(name);
  reservationsDirty_ = !reservedByOrder_.empty();
  dirty_ = true;
  cv_.notify_all();
}

json SchedCache::ingestStorageClass(const json& obj) {
  json keep = detail::storeIdentity(obj);
  auto c = alloc::parseStorageClass(obj);
  const std::string name = metaString(keep, "name");
  std::lock_guard<std::mutex> lock(mu_);
  if (!c) {
    spdlog::warn("StorageClass {}: {}; its claims bind as Immediate", name, c.error().message);
    volumes_.removeClass(name);
  } else {
    volumes_.setClass(std::move(*c));
  }
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
  return keep;
}

void SchedCache::removeStorageClass(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  volumes_.removeClass(name);
  dirty_ = true;
  cv_.notify_all();
}

// ---------------------------------------------------------------- Reserve and PreBind

bool SchedCache::planVolumesLocked(PodInfo& pod, const std::string& node, Clock::time_point now,
                                   VolumeWrites& writes) {
  clearVolumeWaitLocked(pod);
  auto state = alloc::prepareVolumeBinding(pod.pod, volumes_);
  auto n = model_.indexOf(node);
  if (!state || !state->rejectAll.empty() || !n) {
    return false;  // no claims (or placement would not have chosen the node)
  }
  const alloc::PodVolumePlan plan = alloc::findPodVolumes(*state, model_.nodes()[*n]);
  if (!plan.reasons.empty() || !plan.needsWrites()) {
    return false;
  }
  for (const alloc::StaticBinding& b : plan.bindings) {
    const alloc::PersistentVolume* pv = volumes_.volume(b.volume);
    const alloc::VolumeClaim* c = volumes_.claim(b.claim);
    writes.bindings.push_back(VolumeBindingWrite{b.volume, pv->resourceVersion, c->ns, c->name,
                                                 c->uid, c->resourceVersion});
  }
  for (const std::string& key : plan.provisions) {
    const alloc::VolumeClaim* c = volumes_.claim(key);
    writes.provisions.push_back(ProvisionWrite{c->ns, c->name, c->resourceVersion});
  }
  // Assumed at once: the next decision sees the PVs taken and the claims promised to node.
  for (const alloc::StaticBinding& b : plan.bindings) {
    volumes_.assumeBound(b.volume, *volumes_.claim(b.claim));
  }
  for (const std::string& key : plan.provisions) {
    volumes_.assumeSelectedNode(key, node);
  }
  pod.volumeWait =
      VolumeWait{node, plan.bindings, plan.provisions, now + opts_.volumeBindTimeout, false};
  spdlog::info("pod {}: binding {} PV(s) and provisioning {} claim(s) for node {}", pod.key,
               plan.bindings.size(), plan.provisions.size(), node);
  return true;
}

void SchedCache::clearVolumeWaitLocked(PodInfo& pod) {
  if (!pod.volumeWait.active()) {
    return;
  }
  std::vector<std::string> pvs;
  for (const auto& b : pod.volumeWait.bindings) {
    pvs.push_back(b.volume);
  }
  volumes_.restore(pvs, pod.volumeWait.provisions);
  pod.volumeWait = VolumeWait{};
}

std::optional<Action> SchedCache::checkVolumesLocked(PodInfo& pod, Clock::time_point now,
                                                     bool& waiting) {
  waiting = false;
  const VolumeWait& w = pod.volumeWait;
  if (!w.active()) {
    return std::nullopt;
  }
  auto cancel = [&](const std::string& why) {
    Action a = baseAction(pod, Action::Kind::kCancel);
    a.node = w.node;
    a.message = preBindFailure(why);
    return a;
  };
  if (now >= w.deadline) {
    return cancel(
        "context deadline exceeded (the pod's PersistentVolumeClaims were not all bound "
        "within " +
        std::to_string(
            std::chrono::duration_cast<std::chrono::seconds>(opts_.volumeBindTimeout).count()) +
        "s); trying again");
  }
  if (!w.written) {
    waiting = true;  // the writes are on their way
    return std::nullopt;
  }
  auto n = model_.indexOf(w.node);
  if (!n) {
    return cancel("failed to get node \"" + w.node + "\"");
  }
  const alloc::SchedNode& node = model_.nodes()[*n];
  // checkBindings: a PV must still name its claim and be reachable from the node; a claim to
  // provision must keep the node (a provisioner that fails removes the annotation).
  for (const alloc::StaticBinding& b : w.bindings) {
    const alloc::PersistentVolume* pv = volumes_.volume(b.volume);
    if (pv == nullptr) {
      return cancel("failed to check binding: persistentvolume \"" + b.volume + "\" not found");
    }
    if (!volumeReachableFrom(*pv, node)) {
      return cancel("pv \"" + b.volume + "\" node affinity doesn't match node \"" + w.node +
                    "\": no matching NodeSelectorTerms");
    }
    if (!pv->claimRef || pv->claimRef->uid.empty()) {
      return cancel("ClaimRef got reset for pv \"" + b.volume + "\"");
    }
    const alloc::VolumeClaim* c = volumes_.claim(b.claim);
    waiting = waiting || c == nullptr || !c->fullyBound();
  }
  for (const std::string& key : w.provisions) {
    const alloc::VolumeClaim* c = volumes_.claim(key);
    if (c == nullptr || !c->selectedNode) {
      return cancel("selectedNode annotation reset for PVC \"" + nameOfKey(key) + "\"");
    }
    if (*c->selectedNode != w.node) {
      return cancel("provisioning failed for PVC \"" + nameOfKey(key) + "\"");
    }
    if (!c->volumeName.empty()) {
      const alloc::PersistentVolume* pv = volumes_.volume(c->volumeName);
      if (pv == nullptr) {
        waiting = true;  // the PV may not have reached the informer yet
        continue;
      }
      if (!volumeReachableFrom(*pv, node)) {
        return cancel("pv \"" + pv->name + "\" node affinity doesn't match node \"" + w.node +
                      "\": no matching NodeSelectorTerms");
      }
    }
    waiting = waiting || !c->fullyBound();
  }
  return std::nullopt;
}

void SchedCache::volumesDone(const std::string& key, bool ok, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  PodInfo* p = findLocked(key);
  if (p == nullptr || !p->volumeWait.active()) {
    return;
  }
  if (ok) {
    p->volumeWait.written = true;
    reservationsDirty_ = true;
  } else {
    // A write was refused (a PV taken meanwhile: 409): the node is let go, the pod tried again.
    setHoldLocked(*p, PodInfo::Hold::kNone);
    backoffLocked(key, now);
  }
  dirty_ = true;
  cv_.notify_all();
}

}  // namespace kc::sched
