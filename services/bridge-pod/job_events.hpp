#pragma once
// The bridge pod's Events: core/v1 Events about its BridgeJob (`kubectl describe bridgejob`),
// written through the API server with kc::kube::EventRecorder (repeats aggregated). Recording
// is best effort: a refused or failed write is logged and the pod goes on (the pod's Role must
// allow `create` and `patch` on events for them to appear).

#include <string>

#include "libcore/kube/client.hpp"
#include "libcore/kube/events.hpp"
#include "services/bridge-pod/runner.hpp"

namespace kc::bridge::pod {

class KubeJobEvents final : public JobEvents {
 public:
  // instance: the reporting instance (the pod's name).
  KubeJobEvents(kc::kube::KubeClient& kube, std::string instance);
  void warning(const JobContext& job, const std::string& reason,
               const std::string& message) override;

 private:
  kc::kube::EventRecorder recorder_;
};

// The BridgeJob an Event of this pod is about.
kc::kube::ObjectReference bridgeJobReference(const JobContext& job);

}  // namespace kc::bridge::pod
