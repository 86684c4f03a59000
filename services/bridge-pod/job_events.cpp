#include "services/bridge-pod/job_events.hpp"

#include <spdlog/spdlog.h>

#include "libcore/api/names.hpp"

namespace kc::bridge::pod {

kc::kube::ObjectReference bridgeJobReference(const JobContext& job) {
  kc::kube::ObjectReference r;
  r.kind = std::string(kc::api::kBridgeJobKind);
  r.apiVersion = std::string(kc::api::kBridgeJobApiVersion);
  r.ns = job.jobNamespace;
  r.name = job.jobName;
  r.uid = job.uid;
  return r;
}

KubeJobEvents::KubeJobEvents(kc::kube::KubeClient& kube, std::string instance)
    : recorder_(kube, "bridge-pod", std::move(instance)) {}

void KubeJobEvents::warning(const JobContext& job, const std::string& reason,
                            const std::string& message) {
  auto written = recorder_.record(bridgeJobReference(job), "Warning", reason, message);
  if (!written) {
    spdlog::warn("could not record Event {} on BridgeJob {}/{}: {}", reason, job.jobNamespace,
                 job.jobName, written.error().message);
  }
}

}  // namespace kc::bridge::pod
