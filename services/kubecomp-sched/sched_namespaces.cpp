// kubecomp-sched's Namespaces (docs/sched.md "kubecomp-sched beside kube-scheduler",
// InterPodAffinity): the labels of every Namespace, which a pod affinity term's namespaceSelector
// is matched against (the placement's FilterOptions::namespaces points at the cache's map). A label
// change sends the pods waiting for a decision round again at once and re-checks the reservations,
// as kube-scheduler requeues on a Namespace update for InterPodAffinity.
//
// The informer is started only when the API lets this scheduler list Namespaces: a ClusterRole
// from before the scheduler watched them (403) is warned about once and scheduling goes on
// without the labels (a namespaceSelector other than {} then matches the term's namespaces list
// only, as before). Any other answer starts the informer, which retries like the others, and
// the first decision waits for its first LIST (a selector read against no labels would ignore
// an anti-affinity term).

#include <spdlog/spdlog.h>

#include "services/kubecomp-sched/scheduler.hpp"

namespace kc::sched {

using nlohmann::json;

namespace {

// metadata.labels of a Namespace; a label whose value is not a string is skipped (the API
// server allows none).
alloc::StringMap namespaceLabels(const json& obj) {
  alloc::StringMap labels;
  auto m = obj.find("metadata");
  if (m == obj.end() || !m->is_object()) {
    return labels;
  }
  auto l = m->find("labels");
  if (l == m->end() || !l->is_object()) {
    return labels;
  }
  for (const auto& [k, v] : l->items()) {
    if (v.is_string()) {
      labels.emplace(k, v.get<std::string>());
    }
  }
  return labels;
}

}  // namespace

json SchedCache::ingestNamespace(const json& obj) {
  json keep = detail::storeIdentity(obj);
  const std::string name = keep["metadata"].value("name", std::string());
  if (name.empty()) {
    return keep;
  }
  alloc::StringMap labels = namespaceLabels(obj);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = namespaces_.find(name);
  if (it != namespaces_.end() && it->second == labels) {
    return keep;  // a status or annotation change: nothing a decision reads
  }
  namespaces_[name] = std::move(labels);
  namespacesChangedLocked();
  return keep;
}

void SchedCache::removeNamespace(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (namespaces_.erase(name) > 0) {
    namespacesChangedLocked();
  }
}

void SchedCache::namespacesChangedLocked() {
  // A pod refused for (anti-)affinity may fit now, and a reserved node may no longer pass.
  reservationsDirty_ = !reservedByOrder_.empty();
  released_ = true;
  dirty_ = true;
  cv_.notify_all();
}

void Scheduler::makeNamespaceInformer() {
  namespaces_ = compactInformer(
      client_, kube::gvr::namespaces(), [this](json&& obj) { return cache_.ingestNamespace(obj); },
      [this](const json& obj) { cache_.removeNamespace(nameOf(obj)); });
}

void Scheduler::startNamespaces() {
  kube::ListOptions probe;
  probe.limit = 1;
  auto r = client_.list(kube::gvr::namespaces(), "", probe);
  if (!r && r.error().isForbidden()) {
    spdlog::warn(
        "Namespaces may not be listed ({}): a pod affinity term's namespaceSelector matches only "
        "the namespaces it lists; grant list and watch on namespaces to kubecomp-sched",
        r.error().toError().message);
    return;
  }
  namespacesWatched_ = true;
  namespaces_->start();
}

}  // namespace kc::sched
