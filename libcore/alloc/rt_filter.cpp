#include "libcore/alloc/rt_filter.hpp"

#include <algorithm>
#include <vector>

namespace kc::alloc {
namespace {

std::string key(const std::string& ns, const std::string& name) {
  return ns + "/" + name;
}

}  // namespace

void RtAdmission::setNode(const SchedNode& node) {
  std::lock_guard lock(mu_);
  NodeEntry& e = nodes_[node.name];
  e.info = node.rt;
  e.state.reset();
  if (node.rt) {
    if (auto s = RtNodeState::create(*node.rt); s) {
      e.state = std::move(*s);
    }
  }
  rebuildLocked(node.name);
}

void RtAdmission::removeNode(const std::string& name) {
  std::lock_guard lock(mu_);
  nodes_.erase(name);
  for (auto& [k, p] : pods_) {
    if (p.node == name) {
      p.held.clear();
    }
  }
}

void RtAdmission::admitLocked(PodEntry& p) {
  // Where the scheduler placed a pod before the node published its cores stays its guess (the
  // node placed it then, on the same state): re-placing it after other pods left would differ.
  const RtAssignment guess = std::move(p.held);
  p.held.clear();
  const auto n = nodes_.find(p.node);
  if (n == nodes_.end() || !n->second.state || p.spec.containers.empty()) {
    return;
  }
  RtNodeState& st = *n->second.state;
  for (const auto& c : p.spec.containers) {
    std::vector<std::uint32_t> cpus;
    if (auto a = p.spec.assigned.find(c.container); a != p.spec.assigned.end()) {
      cpus = a->second;
    } else if (auto g = guess.find(c.container); g != guess.end()) {
      cpus = g->second;
    } else if (auto placed = st.place(c.reservation, packing_); placed) {
      cpus = std::move(*placed);
    } else {
      continue;  // the node would refuse it too; it holds nothing there
    }
    if (st.admit(c.reservation, cpus)) {
      p.held[c.container] = std::move(cpus);
    }
  }
}

void RtAdmission::rebuildLocked(const std::string& node) {
  auto n = nodes_.find(node);
  if (n == nodes_.end()) {
    return;
  }
  if (n->second.info) {
    if (auto s = RtNodeState::create(*n->second.info); s) {
      n->second.state = std::move(*s);
    }
  }
  // Pods with a published assignment first (their cores are facts), then the others in the
  // order they were added.
  std::vector<std::pair<std::uint64_t, std::string>> order;
  for (const auto& [k, p] : pods_) {
    if (p.node == node) {
      order.emplace_back(p.spec.assigned.empty() ? added_[k] + (1ull << 62) : added_[k], k);
    }
  }
  std::sort(order.begin(), order.end());
  for (const auto& [o, k] : order) {
    admitLocked(pods_[k]);
  }
}

void RtAdmission::addPod(const SchedPod& pod) {
  if (!pod.rt.realTime() || pod.nodeName.empty()) {
    removePod(pod.ns, pod.name);
    return;
  }
  std::lock_guard lock(mu_);
  const std::string k = key(pod.ns, pod.name);
  auto it = pods_.find(k);
  const bool same =
      it != pods_.end() && it->second.node == pod.nodeName && it->second.spec == pod.rt;
  if (same) {
    return;
  }
  std::string oldNode;
  if (it != pods_.end()) {
    oldNode = it->second.node;
  } else {
    added_[k] = order_++;
  }
  pods_[k] = PodEntry{pod.nodeName, pod.rt, {}};
  if (!oldNode.empty() && oldNode != pod.nodeName) {
    rebuildLocked(oldNode);
  }
  rebuildLocked(pod.nodeName);
}

void RtAdmission::removePod(const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  const std::string k = key(ns, name);
  auto it = pods_.find(k);
  if (it == pods_.end()) {
    return;
  }
  const std::string node = it->second.node;
  pods_.erase(it);
  added_.erase(k);
  rebuildLocked(node);
}

Result<RtAssignment> RtAdmission::plan(const SchedPod& pod, const std::string& nodeName) const {
  std::lock_guard lock(mu_);
  const auto n = nodes_.find(nodeName);
  if (n == nodes_.end() || !n->second.state) {
    return makeError(kc::errc::kNotFound, "node " + nodeName + " is not real-time capable");
  }
  return placeRtPod(*n->second.state, pod.rt.containers, packing_);
}

FilterReasons RtAdmission::filter(const SchedPod& pod, const SchedNode& node) const {
  if (!pod.rt.realTime()) {
    return {};
  }
  if (!pod.rt.error.empty()) {
    return {std::string(kReasonRtInvalidPodPrefix) + pod.rt.error};
  }
  if (!node.rtError.empty()) {
    return {std::string(kReasonRtMalformed)};
  }
  if (!node.rt) {
    return {std::string(kReasonRtNotCapable)};
  }
  for (const auto& c : pod.rt.containers) {
    if (c.reservation.cpus > node.rt->cores.size()) {
      return {std::string(kReasonRtTooFewCores)};
    }
  }
  std::lock_guard lock(mu_);
  const auto n = nodes_.find(node.name);
  if (n == nodes_.end() || !n->second.state) {
    // Not seen through setNode yet: judge against the empty node.
    auto fresh = RtNodeState::create(*node.rt);
    if (!fresh || !placeRtPod(*fresh, pod.rt.containers, packing_)) {
      return {std::string(kReasonRtInsufficient)};
    }
    return {};
  }
  // A pod already held here (a reservation re-checked) is judged without its own cores.
  if (auto self = pods_.find(key(pod.ns, pod.name));
      self != pods_.end() && self->second.node == node.name && !self->second.held.empty()) {
    RtNodeState trial = *n->second.state;
    for (const auto& c : self->second.spec.containers) {
      if (auto h = self->second.held.find(c.container); h != self->second.held.end()) {
        (void)trial.release(c.reservation, h->second);
      }
    }
    if (!placeRtPod(trial, pod.rt.containers, packing_)) {
      return {std::string(kReasonRtInsufficient)};
    }
    return {};
  }
  if (!placeRtPod(*n->second.state, pod.rt.containers, packing_)) {
    return {std::string(kReasonRtInsufficient)};
  }
  return {};
}

NodeFilterHook RtAdmission::hook() const {
  return [this](const SchedPod& pod, const Resources&, const SchedNode& node, const NodeUsage&) {
    return filter(pod, node);
  };
}

}  // namespace kc::alloc
