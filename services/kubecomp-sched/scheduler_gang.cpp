// kubecomp-sched's PodGroup informer (docs/sched.md "Gangs"): scheduler-plugins' PodGroups
// (scheduling.x-k8s.io/v1alpha1) parsed into the cache's gang index. The CRD belongs to
// scheduler-plugins (or to whoever runs Kubeflow's training operators); where the API does not
// serve it, pods naming a PodGroup wait, and Kueue's pod groups (labels only) still work.

#include <spdlog/spdlog.h>

#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

namespace {

kube::GroupVersionResource podGroupsResource() {
  return kube::GroupVersionResource{"scheduling.x-k8s.io", "v1alpha1", "podgroups", true};
}

}  // namespace

void Scheduler::startGangs() {
  kube::ListOptions probe;
  probe.limit = 1;
  auto r = client_.list(podGroupsResource(), "", probe);
  if (!r) {
    spdlog::info(
        "scheduling.x-k8s.io/v1alpha1 PodGroups not served ({}): pods labelled {} wait; Kueue "
        "pod groups are still gangs",
        r.error().toError().message, kPodGroupLabel);
    return;
  }
  kube::InformerOptions io;
  io.resource = podGroupsResource();
  io.transform = [this](nlohmann::json&& obj) { return cache_.ingestPodGroup(obj); };
  podGroups_ = std::make_unique<kube::Informer>(client_, io);
  kube::ResourceEventHandler h;
  h.onDelete = [this](const kube::ObjectPtr& obj) {
    const auto& m = obj->at("metadata");
    cache_.removePodGroup(m.value("namespace", std::string()) + "/" +
                          m.value("name", std::string()));
  };
  podGroups_->addHandler(std::move(h));
  podGroups_->start();
}

}  // namespace kc::sched
