// What rt-kubelet-shim publishes (shim.hpp): the Node's RT capability, and each RT pod's
// cores in its rt.kubecomp.io/assigned annotation, patched from a publisher thread.

#include <spdlog/spdlog.h>

#include "libcore/kube/client.hpp"
#include "libcore/kube/resource.hpp"
#include "services/rt-kubelet-shim/shim.hpp"

namespace kc::rtshim {

void RtShim::publishNode() {
  if (client_ == nullptr || o_.nodeName.empty()) {
    return;
  }
  nlohmann::json labels, annotations;
  if (support_.capable) {
    labels[std::string(alloc::kRtCapableLabel)] = "true";
    for (const auto& [k, v] : alloc::formatRtNodeAnnotations(support_.info)) {
      annotations[k] = v;
    }
  } else {
    labels[std::string(alloc::kRtCapableLabel)] = nullptr;  // never advertise without support
    for (const auto k :
         {alloc::kRtCoresAnnotation, alloc::kRtBoundAnnotation, alloc::kRtKernelAnnotation}) {
      annotations[std::string(k)] = nullptr;
    }
  }
  const nlohmann::json patch = {{"metadata", {{"labels", labels}, {"annotations", annotations}}}};
  auto r = client_->patch(kube::gvr::nodes(), "", o_.nodeName, kube::PatchType::kMerge, patch);
  if (!r) {
    spdlog::error("publishing RT capability on Node {}: {}", o_.nodeName, r.error().describe());
  } else {
    spdlog::info("Node {}: {}", o_.nodeName,
                 support_.capable ? "advertised RT-capable (" + support_.reason + ")"
                                  : "not advertised RT-capable: " + support_.reason);
  }
}

void RtShim::queuePodPublish(const std::string& pod) {
  if (client_ == nullptr || pod.find('/') == std::string::npos) {
    return;
  }
  {
    std::lock_guard lock(pubMu_);
    pubQueue_.insert(pod);
  }
  pubCv_.notify_all();
}

void RtShim::publisherLoop() {
  std::unique_lock lock(pubMu_);
  while (true) {
    pubCv_.wait(lock, [&] { return pubStop_ || !pubQueue_.empty(); });
    if (pubQueue_.empty()) {
      return;  // stopping
    }
    const std::string pod = *pubQueue_.begin();
    pubQueue_.erase(pubQueue_.begin());
    lock.unlock();
    alloc::RtAssignment a;
    {
      std::lock_guard g(mu_);
      for (const auto& [id, e] : entries_) {
        if (e.pod == pod) {
          a[e.container] = e.cpus;
        }
      }
    }
    const auto slash = pod.find('/');
    nlohmann::json value =
        a.empty() ? nlohmann::json(nullptr) : nlohmann::json(alloc::formatRtAssignment(a));
    const nlohmann::json patch = {
        {"metadata", {{"annotations", {{std::string(alloc::kRtAssignedAnnotation), value}}}}}};
    auto r = client_->patch(kube::gvr::pods(), pod.substr(0, slash), pod.substr(slash + 1),
                            kube::PatchType::kMerge, patch);
    if (!r && !r.error().isNotFound()) {
      spdlog::warn("annotating pod {} with its RT cores: {}", pod, r.error().describe());
    }
    lock.lock();
    if (!r && r.error().isRetryable() && !pubStop_) {
      // The API server is unreachable or busy: try again in a second (the scheduler places the
      // pod's containers first-fit meanwhile, which is where this node put them by default).
      pubCv_.wait_for(lock, std::chrono::seconds(1), [&] { return pubStop_; });
      if (!pubStop_) {
        pubQueue_.insert(pod);
      }
    }
  }
}

}  // namespace kc::rtshim
