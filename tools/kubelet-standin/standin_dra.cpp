// KubeletStandin's DRA steps (kubelet's kuberuntime SyncPod before the sandbox, and
// SyncTerminatedPod): an admitted pod with ResourceClaims is written Pending with
// PodReadyToStartContainers False until the DRA manager has prepared its claims; a failed
// preparation is a Warning Event FailedPrepareDynamicResources; an ended pod's claims are
// unprepared. The DRA side itself is dra_side.hpp.

#include <spdlog/spdlog.h>

#include <filesystem>

#include "libcore/api/names.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/events.hpp"
#include "tools/kubelet-standin/standin.hpp"
#include "tools/kubelet-standin/status_builders.hpp"

namespace kc::kubelet {

std::unique_ptr<DraSide> KubeletStandin::makeDraSide() {
  DraSideOptions o;
  o.pluginsRegistryDir = opts_.pluginsRegistryDir.empty()
                             ? (std::filesystem::path(opts_.rootDir) / "plugins_registry").string()
                             : opts_.pluginsRegistryDir;
  o.checkpointPath = draCheckpointPath(opts_);
  o.callTimeout = opts_.draCallTimeout;
  o.retryPeriod = opts_.draRetryPeriod;
  DraCallbacks cb;
  cb.getClaim = [this](const std::string& ns, const std::string& name) -> Result<nlohmann::json> {
    auto claim = client_.get(api::gvr::resourceClaims(), ns, name);
    if (!claim) {
      // client-go prints an API error as the Status message alone.
      const auto& e = claim.error();
      return makeError(e.toError().code, e.isTransport() ? e.describe() : e.message);
    }
    return *claim;
  };
  cb.prepared = [this](const std::string& key) { enqueue(key); };
  cb.prepareFailed = [this](const nlohmann::json& pod, const std::string& error) {
    prepareFailed(pod, error);
  };
  return std::make_unique<DraSide>(o, std::move(cb));
}

void KubeletStandin::waitForClaims(const std::string& key, const nlohmann::json& pod) {
  PodRecord r;
  {
    std::lock_guard lock(mu_);
    r = pods_[key];
  }
  PodRunTimes t;
  t.now = r.startTime;
  t.startTime = r.startTime;
  // No sandbox yet: kubelet prepares the claims before it creates one, so no pod IP either.
  nlohmann::json status = creatingStatus(pod, opts_.nodeIp, r.podIp, t);
  status.erase("podIP");
  status.erase("podIPs");
  for (auto& c : status["conditions"]) {
    if (c.value("type", "") == "PodReadyToStartContainers") {
      c["status"] = "False";
    }
  }
  if (auto st = patchPodStatus(pod, status); !st) {
    spdlog::warn("pod {}: cannot write status: {}", key, st.error().message);
  }
  spdlog::info("pod {} admitted; its ResourceClaims are being prepared", key);
  dra_->manager().requestPrepare(pod);
}

void KubeletStandin::syncPreparing(const std::string& key, const nlohmann::json& pod) {
  const std::string uid = pod["metadata"].value("uid", "");
  if (dra_->manager().podPrepared(uid)) {
    startContainers(key, pod);
    return;
  }
  dra_->manager().requestPrepare(pod);  // the newest object for the next try
}

void KubeletStandin::releasePod(const std::string& uid) {
  devices_->release(uid);
  dra_->manager().requestUnprepare(uid);
}

void KubeletStandin::prepareFailed(const nlohmann::json& pod, const std::string& error) {
  // kuberuntime's Event when PrepareDynamicResources fails.
  if (auto ev = events_->record(kube::ObjectReference::of(pod, "Pod", "v1"), "Warning",
                                "FailedPrepareDynamicResources",
                                "Failed to prepare dynamic resources: " + error);
      !ev) {
    spdlog::debug("event not written: {}", ev.error().describe());
  }
}

}  // namespace kc::kubelet
