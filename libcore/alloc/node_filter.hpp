#pragma once
// The scheduler's node filters, as kube-scheduler's default Filter plugins decide them (v1.29),
// as pure functions over the compact models of sched_objects.hpp: kubecomp-sched and the
// simulator call the same code. Each filter returns the reasons a node is rejected, in
// kube-scheduler's wording (empty: the node passes); filterNodes runs them in kube-scheduler's
// order, stops at a node's first failing filter, and words the "0/N nodes are available" message.
//
//   NodeUnschedulable  "node(s) were unschedulable"
//   NodeName           "node(s) didn't match the requested node name"
//   TaintToleration    "node(s) had untolerated taint {key: value}"
//   NodeAffinity       "node(s) didn't match Pod's node affinity/selector"
//   NodePorts          "node(s) didn't have free ports for the requested pod ports"
//                      (node_ports.hpp; needs FilterOptions::placed)
//   NodeResourcesFit   (below)
//   PodTopologySpread  "node(s) didn't match pod topology spread constraints", with
//                      " (missing required label)" (topology_spread.hpp)
//   InterPodAffinity   "node(s) didn't satisfy existing pods anti-affinity rules",
//                      "node(s) didn't match pod affinity rules",
//                      "node(s) didn't match pod anti-affinity rules" (pod_affinity.hpp)
//   NodeResourcesFit   "Too many pods", "Insufficient cpu", "Insufficient memory",
//                      "Insufficient ephemeral-storage", "Insufficient <resource>"
//   VolumeBinding      (after NodeResourcesFit) "node(s) had volume node affinity conflict",
//                      "node(s) didn't find available persistent volumes to bind", ...
//                      (volume_binding.hpp; needs FilterOptions::volumes). Its PreFilter
//                      refusal ("pod has unbound immediate PersistentVolumeClaims", a missing
//                      claim) refuses every node, worded "0/N nodes are available: <why>."
//   then the extra hook (e.g. real-time admission), whose reasons are its own.

#include <cstddef>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/alloc/topology_spread.hpp"
#include "libcore/alloc/volume_binding.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// The reasons one filter rejects a node for; empty: the node passes.
using FilterReasons = std::vector<std::string>;

inline constexpr std::string_view kReasonUnschedulable = "node(s) were unschedulable";
inline constexpr std::string_view kReasonNodeName = "node(s) didn't match the requested node name";
inline constexpr std::string_view kReasonNodeAffinity =
    "node(s) didn't match Pod's node affinity/selector";
inline constexpr std::string_view kReasonTooManyPods = "Too many pods";
// The taint a cordoned node is treated as having (spec.unschedulable), effect NoSchedule.
inline constexpr std::string_view kTaintNodeUnschedulable = "node.kubernetes.io/unschedulable";

// v1.Toleration.ToleratesTaint: effect empty or equal, key empty or equal, then Exists
// matches any value and Equal only the same value.
bool toleratesTaint(const Toleration& toleration, const Taint& taint);

// labels.Requirement.Matches on the node's labels (Gt/Lt compare base-10 int64 label values; a
// missing or non-integer label does not match; NotIn and DoesNotExist match a missing label).
bool matchesLabelRequirement(const SelectorRequirement& r, const StringMap& labels);
// A required node selector: terms ORed, each term's requirements ANDed, a term with no
// requirements matches nothing; matchFields read metadata.name.
bool matchesNodeSelectorTerms(std::span<const NodeSelectorTerm> terms, const SchedNode& node);

FilterReasons nodeUnschedulableFilter(const SchedPod& pod, const SchedNode& node);
FilterReasons nodeNameFilter(const SchedPod& pod, const SchedNode& node);
// Only NoSchedule and NoExecute taints; the first untolerated one in the node's order is named.
FilterReasons taintTolerationFilter(const SchedPod& pod, const SchedNode& node);
// spec.nodeSelector (every label equal) AND the required node affinity.
FilterReasons nodeAffinityFilter(const SchedPod& pod, const SchedNode& node);

// NodeResourcesFitArgs: extended resources this scheduler does not check against allocatable,
// by name or by the prefix before '/'. kubecomp-sched ignores kubecomp.io/gpu here: the pool
// filter decides GPUs, since a node's allocatable shows only the GPUs attached now.
struct FitOptions {
  std::set<std::string, std::less<>> ignoredResources{};
  std::set<std::string, std::less<>> ignoredResourceGroups{};
};

// "Too many pods" when pods + 1 exceeds allocatable pods; then each requested (> 0) resource
// against allocatable minus what the node's pods request: cpu, memory, ephemeral-storage, then
// scalar resources by name (a resource the node does not advertise has 0).
FilterReasons resourcesFitFilter(const Resources& podRequest, const SchedNode& node,
                                 const NodeUsage& usage, const FitOptions& options = {});

// A filter the suite adds after kube-scheduler's (the real-time admission fills it); it gets the
// pod's effective request. An empty std::function is no filter.
using NodeFilterHook = std::function<FilterReasons(const SchedPod& pod, const Resources& request,
                                                   const SchedNode& node, const NodeUsage& usage)>;

struct FilterOptions {
  FitOptions fit{};
  NodeFilterHook rt{};
  // The pods already on each node, for NodePorts and InterPodAffinity (not owned; null: none
  // known), and the namespaces' labels for namespaceSelector (null: not known).
  const PlacedPods* placed = nullptr;
  const NamespaceLabels* namespaces = nullptr;
  // The state of InterPodAffinity and PodTopologySpread for the pod being decided, counted
  // over the whole cluster once per decision (prepareFilters; filterNodes and placePod call it
  // themselves unless `prepared`). Null: that filter has nothing to check.
  const InterPodAffinityState* interPod = nullptr;
  const TopologySpreadState* spread = nullptr;
  // The cluster's PVCs, PVs and StorageClasses (not owned; null: VolumeBinding is off), and the
  // pod's VolumeBinding state prepared from them (prepareFilters).
  const VolumeCatalog* volumes = nullptr;
  const VolumeBindingState* volumeBinding = nullptr;
  bool prepared = false;
  // Whether some node has a PreferNoSchedule taint (TaintToleration's score then ranks the
  // nodes), from a caller that keeps count as nodes come and go; nullopt: placePod looks at
  // every node's taints.
  std::optional<bool> preferNoScheduleTaints{};
};

// The states FilterOptions points at, owned by the caller for one decision.
struct PreparedFilters {
  std::optional<InterPodAffinityState> interPod{};
  std::optional<TopologySpreadState> spread{};
  std::optional<VolumeBindingState> volumeBinding{};
};

// Counts what InterPodAffinity and PodTopologySpread need for `pod` over `nodes` (every node of
// the cluster: a topology domain spans nodes) into `prepared`, and points `options` at it. A pod
// that uses neither (while no placed pod has required anti-affinity) costs two tests.
void prepareFilters(const SchedPod& pod, std::span<const SchedNode> nodes, FilterOptions& options,
                    PreparedFilters& prepared);

struct RejectedNode {
  std::size_t node = 0;  // index into the nodes given
  FilterReasons reasons{};
};

struct NodeFilterResult {
  std::vector<std::size_t> feasible{};  // indices of the nodes that passed, in input order
  std::vector<RejectedNode> rejected{};
  // kube-scheduler's FitError text when nothing passed, "" otherwise.
  std::string message{};
};

// Every filter in filterNodes' order on one node, stopping at the first that fails: its
// reasons (empty: the node passes). `request` is podRequests(pod).
FilterReasons filterNode(const SchedPod& pod, const Resources& request, const SchedNode& node,
                         const NodeUsage& usage, const FilterOptions& options);

// Runs the filters over every node (nodes[i] with usage[i]). Error "invalid" when the spans
// differ in length.
Result<NodeFilterResult> filterNodes(const SchedPod& pod, std::span<const SchedNode> nodes,
                                     std::span<const NodeUsage> usage,
                                     const FilterOptions& options = {});

// "0/N nodes are available: <count> <reason>, ... ." with the "<count> <reason>" strings sorted
// as strings (kube-scheduler's FitError.Error()); a node with several reasons counts in each.
// With no nodes at all: "no nodes available to schedule pods".
std::string unschedulableMessage(std::size_t allNodes, std::span<const RejectedNode> rejected);

}  // namespace kc::alloc
