#pragma once
// kube-scheduler's InterPodAffinity filter (v1.29+), as pure code: the pod's required pod
// affinity and anti-affinity, and the required anti-affinity of the pods already placed against
// it, over topology domains (nodes sharing the value of a term's topologyKey label).
//
//   existing pods' anti-affinity  "node(s) didn't satisfy existing pods anti-affinity rules"
//     a pod placed on a node of domain D has a required anti-affinity term that matches the
//     incoming pod, and the candidate node is in D (has the same topologyKey value)
//   pod affinity                  "node(s) didn't match pod affinity rules"
//     the node lacks a term's topologyKey label, or a term's domain of the node holds no pod
//     that matches every required affinity term; except the first pod of a series: when no
//     pod anywhere matches them and the incoming pod matches its own terms, any node having
//     every topologyKey passes
//   pod anti-affinity             "node(s) didn't match pod anti-affinity rules"
//     a term's domain of the node holds a pod matching the term (a node without the
//     topologyKey label passes that term)
//
// A term matches a pod when the pod's namespace is one of the term's namespaces (spec
// namespaces, plus those whose labels its namespaceSelector matches; neither given: the term's
// own pod's namespace; namespaceSelector {}: every namespace) and its labelSelector matches the
// pod's labels (a missing labelSelector matches no pod; {} every pod). matchLabelKeys and
// mismatchLabelKeys are merged into labelSelector by the API server (v1.31+) and not read here.
//
// Preferred terms do not filter: pod_preference.hpp scores them (with the required affinity and
// preferred terms of the pods already placed) as kube-scheduler's InterPodAffinity Score does,
// and placePod ranks by that score among the nodes needing the fewest GPU moves
// (pod_placement.hpp).

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

inline constexpr std::string_view kReasonExistingAntiAffinity =
    "node(s) didn't satisfy existing pods anti-affinity rules";
inline constexpr std::string_view kReasonPodAffinity = "node(s) didn't match pod affinity rules";
inline constexpr std::string_view kReasonPodAntiAffinity =
    "node(s) didn't match pod anti-affinity rules";

// metav1.LabelSelector: matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) ANDed.
struct LabelSelector {
  StringMap matchLabels{};
  std::vector<SelectorRequirement> matchExpressions{};
};
bool matchesLabelSelector(const LabelSelector& selector, const StringMap& labels);
// A metav1.LabelSelector (JSON); null gives nullopt. Errors "invalid", naming `field`.
Result<std::optional<LabelSelector>> parseLabelSelector(const nlohmann::json& v,
                                                        const std::string& field);

struct PodAffinityTerm {
  std::optional<LabelSelector> labelSelector{};  // nullopt: matches no pod
  std::vector<std::string> namespaces{};
  std::optional<LabelSelector> namespaceSelector{};  // nullopt: none
  std::string topologyKey{};
};

struct WeightedPodAffinityTerm {
  std::int32_t weight = 0;  // 1..100
  PodAffinityTerm term{};
};

struct PodAffinity {
  std::vector<PodAffinityTerm> required{};      // podAffinity, required
  std::vector<PodAffinityTerm> requiredAnti{};  // podAntiAffinity, required
  std::vector<WeightedPodAffinityTerm> preferred{};
  std::vector<WeightedPodAffinityTerm> preferredAnti{};
};

// spec.affinity.podAffinity and .podAntiAffinity of a PodSpec (JSON); null when the pod has
// neither. Errors "invalid", naming the field.
Result<std::shared_ptr<const PodAffinity>> parsePodAffinity(const nlohmann::json& spec);

// Namespace name -> its labels (for namespaceSelector). Null: not known (a namespaceSelector
// other than {} then matches by the term's namespaces list only).
using NamespaceLabels = std::map<std::string, StringMap, std::less<>>;

// Whether `term`, written in a pod of namespace `ownerNs`, matches a pod of namespace `ns` with
// `labels`.
bool affinityTermMatches(const PodAffinityTerm& term, std::string_view ownerNs, std::string_view ns,
                         const StringMap& labels, const NamespaceLabels* namespaces);

// What the filter needs to know of the cluster for one pod (kube-scheduler's PreFilter state):
// counts per topology pair (key, value).
struct InterPodAffinityState {
  using Counts = std::map<std::pair<std::string, std::string>, std::int64_t>;
  Counts existingAnti{};  // existing pods' required anti-affinity terms matching the pod
  Counts affinity{};      // pods matching all of the pod's required affinity terms, per term
  Counts antiAffinity{};  // pods matching each of the pod's required anti-affinity terms
  bool matchesOwnAffinity = false;
};

// The state for `pod`, or nullopt when the filter has nothing to check (the pod has no required
// (anti-)affinity and no placed pod has required anti-affinity): the common case costs nothing.
// A placed pod on a node not in `nodes` is skipped; the pod itself (same namespace and name,
// its own reservation) is not counted.
std::optional<InterPodAffinityState> prepareInterPodAffinity(const SchedPod& pod,
                                                             std::span<const SchedNode> nodes,
                                                             const PlacedPods* placed,
                                                             const NamespaceLabels* namespaces);

// The filter on one node, with the state prepareInterPodAffinity gave (empty: it passes).
std::vector<std::string> interPodAffinityFilter(const SchedPod& pod,
                                                const InterPodAffinityState& state,
                                                const SchedNode& node);

}  // namespace kc::alloc
