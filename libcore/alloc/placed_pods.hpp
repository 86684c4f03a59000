#pragma once
// The pods already placed on each node, as the filters that look at other pods read them
// (kube-scheduler keeps them in NodeInfo.Pods and NodeInfo.UsedPorts): namespace, name, labels
// and host ports. kubecomp-sched keeps one PlacedPods next to its cluster model (every pod that
// holds a node: bound, assumed bound, or reserved there); a test or the simulator builds one
// directly. A decision reads it through FilterOptions::placed; null means no pods are known.
//
// Not thread-safe: the owner's lock guards it, as it guards the rest of the model.

#include <cstddef>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/sched_objects.hpp"

namespace kc::alloc {

// What the filters read of a pod on a node.
struct PlacedPod {
  std::string ns{};
  std::string name{};
  StringMap labels{};
  std::vector<HostPort> hostPorts{};
  std::shared_ptr<const PodAffinity> affinity{};  // its pod (anti-)affinity, if any
};

// PlacedPod of a SchedPod.
std::shared_ptr<const PlacedPod> placedPodOf(const SchedPod& pod);

class PlacedPods {
 public:
  using Entry = std::shared_ptr<const PlacedPod>;

  // Pod `key` now sits on `node` as `pod`; an empty node or a null pod: on no node.
  void place(const std::string& key, const std::string& node, Entry pod);
  // The same for a SchedPod: nothing is allocated when the pod already sits there unchanged
  // (the scheduler refreshes a pod's place on every update of it).
  void place(const std::string& key, const std::string& node, const SchedPod& pod);
  void remove(const std::string& key);

  // The pods on a node, in no particular order (empty for an unknown node).
  std::span<const Entry> onNode(std::string_view node) const;
  // Whether any placed pod has a host port (NodePorts has nothing to check otherwise).
  bool anyHostPorts() const { return withHostPorts_ > 0; }
  // Every placed pod, with its node: f(node, entry).
  template <typename F>
  void forEach(F&& f) const {
    for (const auto& [node, entries] : byNode_) {
      for (const auto& e : entries) {
        f(node, e);
      }
    }
  }
  // The placed pods with required pod anti-affinity: f(node, entry). InterPodAffinity checks
  // them against every incoming pod, and only them.
  template <typename F>
  void forEachWithRequiredAntiAffinity(F&& f) const {
    for (const auto& key : withAnti_) {
      const Where& w = byKey_.at(key);
      f(w.node, w.pod);
    }
  }
  bool anyRequiredAntiAffinity() const { return !withAnti_.empty(); }
  // The placed pods whose own terms InterPodAffinity scores an incoming pod by (required pod
  // affinity, preferred affinity or anti-affinity; pod_preference.hpp): f(node, entry).
  template <typename F>
  void forEachWithScoredAffinity(F&& f) const {
    for (const auto& key : withScored_) {
      const Where& w = byKey_.at(key);
      f(w.node, w.pod);
    }
  }
  bool anyScoredAffinity() const { return !withScored_.empty(); }
  std::size_t size() const { return byKey_.size(); }

 private:
  struct Where {
    std::string node;
    Entry pod;
  };
  std::unordered_map<std::string, Where> byKey_;
  std::map<std::string, std::vector<Entry>, std::less<>> byNode_;
  std::size_t withHostPorts_ = 0;
  std::vector<std::string> withAnti_;    // keys of pods with required anti-affinity
  std::vector<std::string> withScored_;  // keys of pods forEachWithScoredAffinity visits
};

}  // namespace kc::alloc
