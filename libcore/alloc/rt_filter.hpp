#pragma once
// Real-time admission for the scheduler (seed 003): the NodeFilterHook that kube-scheduler's
// filters leave to the suite (node_filter.hpp, FilterOptions::rt), over per-node RT state kept
// exactly as the nodes' rt-kubelet-shim keeps it.
//
// A node is feasible for an RT pod only if it advertises RT capability (SchedNode::rt) and
// placeRtPod places every RT container of the pod on it: the same RtNodeState::place the shim
// runs at CreateContainer, on the same per-core state. That state holds every pod the scheduler
// knows on the node (bound or assumed): at the cores the node published for it
// (rt.kubecomp.io/assigned) when it did, else where first-fit put it when the pod was added
// (what the shim does by default, on the same state). So the scheduler admits nothing the node
// refuses.
//
// Reasons (aggregated by filterNodes into "0/N nodes are available: ..."):
//   "pod's real-time annotations are invalid: <what>"  (every node)
//   "node(s) are not real-time capable"
//   "node(s) had malformed real-time annotations"
//   "node(s) had too few real-time cores"
//   "node(s) had insufficient real-time bandwidth"

#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "libcore/alloc/node_filter.hpp"
#include "libcore/alloc/rt_pod.hpp"
#include "libcore/alloc/sched_objects.hpp"

namespace kc::alloc {

inline constexpr std::string_view kReasonRtNotCapable = "node(s) are not real-time capable";
inline constexpr std::string_view kReasonRtMalformed =
    "node(s) had malformed real-time annotations";
inline constexpr std::string_view kReasonRtTooFewCores = "node(s) had too few real-time cores";
inline constexpr std::string_view kReasonRtInsufficient =
    "node(s) had insufficient real-time bandwidth";
inline constexpr std::string_view kReasonRtInvalidPodPrefix =
    "pod's real-time annotations are invalid: ";

// Thread-safe. Pods are identified by "namespace/name".
class RtAdmission {
 public:
  explicit RtAdmission(RtPacking packing = rtPackings()[0]) : packing_(packing) {}

  // A node appeared or changed: its state is rebuilt from the node and the pods it holds.
  void setNode(const SchedNode& node);
  void removeNode(const std::string& name);
  // A pod holds (or no longer holds) its reservations on `pod.nodeName` (bound or assumed). A
  // pod added again (its assignment arrived, or it moved) replaces its previous entry.
  void addPod(const SchedPod& pod);
  void removePod(const std::string& ns, const std::string& name);

  // The filter for one node (empty: feasible). Non-RT pods pass everywhere; a pod already held
  // on the node is judged without its own cores (a reservation checked again).
  FilterReasons filter(const SchedPod& pod, const SchedNode& node) const;
  // As a NodeFilterHook for FilterOptions::rt; the RtAdmission must outlive it.
  NodeFilterHook hook() const;

  // The cores the pod's containers would get on the node now (for tests and logs).
  Result<RtAssignment> plan(const SchedPod& pod, const std::string& nodeName) const;

 private:
  struct NodeEntry {
    std::optional<RtNodeInfo> info;
    std::optional<RtNodeState> state;
  };
  struct PodEntry {
    std::string node;
    RtPodSpec spec;
    RtAssignment held;  // the cores admitted on the node's state
  };
  void rebuildLocked(const std::string& node);
  void admitLocked(PodEntry& p);

  RtPacking packing_;
  mutable std::mutex mu_;
  std::map<std::string, NodeEntry, std::less<>> nodes_;
  std::map<std::string, PodEntry, std::less<>> pods_;  // "ns/name"
  std::uint64_t order_ = 0;
  std::map<std::string, std::uint64_t> added_;  // pod -> the order it was added (rebuild order)
};

}  // namespace kc::alloc
