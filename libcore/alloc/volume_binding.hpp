#pragma once
// kube-scheduler's VolumeBinding plugin (pkg/scheduler/framework/plugins/volumebinding and the
// volume binder it drives, v1.29) as pure functions over the catalog of volume_objects.hpp:
//
// PreFilter (prepareVolumeBinding), over the pod's PVC volumes in spec order:
//   a claim that does not exist       persistentvolumeclaim "<name>" not found
//     (an ephemeral volume's claim:   waiting for ephemeral volume controller to create the
//                                     persistentvolumeclaim "<pod>-<volume>")
//   a claim in phase Lost             persistentvolumeclaim "<name>" bound to non-existent
//                                     persistentvolume "<volume>"
//   a claim being deleted             persistentvolumeclaim "<name>" is being deleted
//   an ephemeral claim not the pod's  PVC <ns>/<name> was not created for pod <ns>/<pod>
//                                     (pod is not owner)
//   then each claim is bound (spec.volumeName and the bind-completed annotation), unbound of a
//   WaitForFirstConsumer class (delayed), or anything else (no class, a class that does not
//   exist or binds Immediate, pre-bound by spec.volumeName only): unbound immediate, and one
//   of those refuses the pod on every node: "pod has unbound immediate PersistentVolumeClaims".
//
// Filter (findPodVolumes, per node), reasons in this order:
//   a bound claim's PV whose spec.nodeAffinity.required the node does not match
//                                     node(s) had volume node affinity conflict
//   a delayed claim without a PV or class that serves the node (a selected-node annotation
//   naming another node included)     node(s) didn't find available persistent volumes to bind
//   a bound claim's PV that does not exist
//                                     node(s) unavailable due to one or more pvc(s) bound to
//                                     non-existent pv(s)
// A delayed claim is served, smallest request first, by the smallest PV of its class that is
// free (no claimRef, or one naming this claim), Available, large enough, of the same volume
// mode, with the claim's access modes, matching the claim's selector and reachable from the
// node (ties by name; a PV pre-bound to the claim wins outright, or fails the node). A claim
// with no such PV is provisioned when its class has a provisioner (not
// kubernetes.io/no-provisioner) and allowedTopologies admits the node. Storage capacity
// tracking (CSIStorageCapacity) is not modelled: a provisioner is taken to have room.
//
// PV node affinity is matched as kube-scheduler matches it (CheckNodeAffinity): against a node
// that has the node's labels and no name, so a matchFields term never matches by name.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/sched_objects.hpp"
#include "libcore/alloc/volume_objects.hpp"

namespace kc::alloc {

inline constexpr std::string_view kReasonVolumeNodeConflict =
    "node(s) had volume node affinity conflict";
inline constexpr std::string_view kReasonVolumeBindConflict =
    "node(s) didn't find available persistent volumes to bind";
inline constexpr std::string_view kReasonVolumePvNotExist =
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)";
inline constexpr std::string_view kReasonUnboundImmediateClaims =
    "pod has unbound immediate PersistentVolumeClaims";

// What PreFilter found for one pod, for the filter of each node. Points into the catalog: valid
// while the catalog is not changed (one decision).
struct VolumeBindingState {
  // Non-empty: the pod fits no node (one of the PreFilter messages above).
  std::string rejectAll{};
  std::vector<const VolumeClaim*> bound{};
  std::vector<const VolumeClaim*> delayed{};  // unbound, WaitForFirstConsumer class
  const VolumeCatalog* catalog = nullptr;
};

// nullopt when the pod has no PVC volumes (the plugin skips it).
std::optional<VolumeBindingState> prepareVolumeBinding(const SchedPod& pod,
                                                       const VolumeCatalog& catalog);

// A delayed claim served by an existing PV: the PV gets the claim in spec.claimRef.
struct StaticBinding {
  std::string claim{};  // "ns/name"
  std::string volume{};

  friend bool operator==(const StaticBinding&, const StaticBinding&) = default;
};

// What the node needs done for the pod's volumes before the pod binds there.
struct PodVolumePlan {
  std::vector<std::string> reasons{};  // empty: the node can serve every claim
  std::vector<StaticBinding> bindings{};
  std::vector<std::string> provisions{};  // claims ("ns/name") to provision for the node

  bool needsWrites() const { return !bindings.empty() || !provisions.empty(); }
};

PodVolumePlan findPodVolumes(const VolumeBindingState& state, const SchedNode& node);
// The filter alone: findPodVolumes' reasons, or {rejectAll}.
std::vector<std::string> volumeBindingFilter(const VolumeBindingState& state,
                                             const SchedNode& node);

// CheckNodeAffinity: no required node affinity, or one of its terms matches the node's labels.
bool volumeReachableFrom(const PersistentVolume& pv, const SchedNode& node);
// MatchTopologySelectorTerms: no terms, or one non-empty term whose every expression has the
// node's label value among its values.
bool topologyAllows(const std::vector<TopologySelectorTerm>& terms, const StringMap& labels);

}  // namespace kc::alloc
