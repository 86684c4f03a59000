#include "libcore/alloc/placed_pods.hpp"

#include <algorithm>

#include "libcore/alloc/pod_affinity.hpp"

namespace kc::alloc {
namespace {

bool scoredAffinity(const PlacedPod& pod) {
  const PodAffinity* a = pod.affinity.get();
  return a != nullptr &&
         (!a->required.empty() || !a->preferred.empty() || !a->preferredAnti.empty());
}

}  // namespace

std::shared_ptr<const PlacedPod> placedPodOf(const SchedPod& pod) {
  auto out = std::make_shared<PlacedPod>();
  out->ns = pod.ns;
  out->name = pod.name;
  out->labels = pod.labels;
  out->hostPorts = pod.hostPorts;
  out->affinity = pod.podAffinity;
  return out;
}

void PlacedPods::place(const std::string& key, const std::string& node, Entry pod) {
  remove(key);
  if (node.empty() || pod == nullptr) {
    return;
  }
  withHostPorts_ += pod->hostPorts.empty() ? 0 : 1;
  if (pod->affinity != nullptr && !pod->affinity->requiredAnti.empty()) {
    withAnti_.push_back(key);
  }
  if (scoredAffinity(*pod)) {
    withScored_.push_back(key);
  }
  byNode_[node].push_back(pod);
  byKey_.emplace(key, Where{node, std::move(pod)});
}

void PlacedPods::place(const std::string& key, const std::string& node, const SchedPod& pod) {
  if (auto it = byKey_.find(key); it != byKey_.end() && !node.empty()) {
    const PlacedPod& was = *it->second.pod;
    if (it->second.node == node && was.ns == pod.ns && was.name == pod.name &&
        was.labels == pod.labels && was.hostPorts == pod.hostPorts &&
        was.affinity == pod.podAffinity) {
      return;
    }
  }
  place(key, node, node.empty() ? nullptr : placedPodOf(pod));
}

void PlacedPods::remove(const std::string& key) {
  auto it = byKey_.find(key);
  if (it == byKey_.end()) {
    return;
  }
  const Where& w = it->second;
  withHostPorts_ -= w.pod->hostPorts.empty() ? 0 : 1;
  if (w.pod->affinity != nullptr && !w.pod->affinity->requiredAnti.empty()) {
    std::erase(withAnti_, key);
  }
  if (scoredAffinity(*w.pod)) {
    std::erase(withScored_, key);
  }
  auto n = byNode_.find(w.node);
  if (n != byNode_.end()) {
    std::erase(n->second, w.pod);
    if (n->second.empty()) {
      byNode_.erase(n);
    }
  }
  byKey_.erase(it);
}

std::span<const PlacedPods::Entry> PlacedPods::onNode(std::string_view node) const {
  auto it = byNode_.find(node);
  if (it == byNode_.end()) {
    return {};
  }
  return it->second;
}

}  // namespace kc::alloc
