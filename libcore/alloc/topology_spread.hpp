#pragma once
// kube-scheduler's PodTopologySpread filter (v1.29+ defaults), as pure code: the pod's
// topologySpreadConstraints with whenUnsatisfiable DoNotSchedule.
//
// Per constraint, the domains are the values of its topologyKey on the eligible nodes: nodes
// carrying every DoNotSchedule constraint's topologyKey and, per constraint, with
// nodeAffinityPolicy Honor (the default),
// passing the pod's nodeSelector and required node affinity, and with nodeTaintsPolicy Honor
// (default Ignore), tolerating the node's NoSchedule/NoExecute taints. A domain's count is the
// number of pods placed on its eligible nodes, in the pod's namespace, whose labels match the
// constraint's labelSelector (plus, per matchLabelKeys, the pod's own values of those keys). A
// node fails when
//   it lacks the topologyKey   "node(s) didn't match pod topology spread constraints (missing
//                               required label)"
//   count(node's domain) + (1 if the pod matches the selector) - min over domains > maxSkew
//                              "node(s) didn't match pod topology spread constraints"
// where the minimum is 0 when minDomains is set and fewer domains than minDomains exist.
// ScheduleAnyway constraints do not filter: pod_preference.hpp scores them as kube-scheduler's
// PodTopologySpread Score does, and placePod ranks by that score among the nodes needing the
// fewest GPU moves (pod_placement.hpp).

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

inline constexpr std::string_view kReasonSpread =
    "node(s) didn't match pod topology spread constraints";
inline constexpr std::string_view kReasonSpreadMissingLabel =
    "node(s) didn't match pod topology spread constraints (missing required label)";

struct SpreadConstraint {
  std::int32_t maxSkew = 1;
  std::string topologyKey{};
  bool doNotSchedule = true;  // whenUnsatisfiable DoNotSchedule; false: ScheduleAnyway
  std::optional<LabelSelector> labelSelector{};  // nullopt: matches no pod
  std::optional<std::int32_t> minDomains{};      // DoNotSchedule only
  bool honorNodeAffinity = true;                 // nodeAffinityPolicy (default Honor)
  bool honorNodeTaints = false;                  // nodeTaintsPolicy (default Ignore)
  std::vector<std::string> matchLabelKeys{};
};

struct TopologySpread {
  std::vector<SpreadConstraint> constraints{};
};

// spec.topologySpreadConstraints (JSON PodSpec); null when none. Errors "invalid", naming the
// field.
Result<std::shared_ptr<const TopologySpread>> parseTopologySpread(const nlohmann::json& spec);

// The counts one decision reads (kube-scheduler's PreFilter state), per DoNotSchedule
// constraint in the pod's order.
struct TopologySpreadState {
  struct Domains {
    std::map<std::string, std::int64_t, std::less<>> count{};  // topology value -> matching pods
    std::int64_t min = 0;
    bool selfMatch = false;  // the pod matches the constraint's selector
  };
  std::vector<Domains> constraints{};
};

// The constraint's labelSelector with matchLabelKeys added as `key In (the pod's value)` (a key
// the pod does not carry is ignored); nullopt (matches no pod) when it has no labelSelector.
std::optional<LabelSelector> spreadSelector(const SpreadConstraint& c, const SchedPod& pod);

// nullopt when the pod has no DoNotSchedule constraint.
std::optional<TopologySpreadState> prepareTopologySpread(const SchedPod& pod,
                                                         std::span<const SchedNode> nodes,
                                                         const PlacedPods* placed);

std::vector<std::string> topologySpreadFilter(const SchedPod& pod, const TopologySpreadState& state,
                                              const SchedNode& node);

}  // namespace kc::alloc
