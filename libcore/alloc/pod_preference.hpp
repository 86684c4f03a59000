#pragma once
// kube-scheduler's Score plugins for what a pod prefers (default profile, v1.29+), as pure code:
// each plugin's score for the candidate nodes, normalized to 0..kMaxNodeScore the way that
// plugin normalizes it, and their sum weighted as the default profile weights them.
//
//   InterPodAffinity (weight 2). Per topology pair (key, value): + the weight of each of the
//     pod's preferred podAffinity terms matching a placed pod there, - the weight of each
//     preferred podAntiAffinity term; a placed pod's own terms matching the incoming pod add
//     kHardPodAffinityWeight per required podAffinity term, + weight per preferred affinity
//     term, - weight per preferred anti-affinity term (each term matches by its own namespaces
//     and namespaceSelector, affinityTermMatches). A node's raw score is the sum of the pairs of
//     the keys it carries; normalized 100 * (s - min) / (max - min) truncated, 0 when max == min.
//   PodTopologySpread, whenUnsatisfiable ScheduleAnyway (weight 2). A candidate lacking one of
//     those constraints' topologyKeys is ignored (score 0). Per constraint, the domains are the
//     key's values on the other candidates, the count of a domain the pods of the pod's namespace
//     matching the selector (spreadSelector) on every node carrying all the keys and admitted by
//     the constraint's nodeAffinityPolicy / nodeTaintsPolicy whose value is that domain's
//     (kubernetes.io/hostname: the pods on the candidate itself). Raw score:
//     round(sum over constraints of count * log(domains + 2) + maxSkew - 1), normalized
//     100 * (max + min - s) / max over the candidates not ignored (100 when max is 0).
//     The cluster-level default constraints (which need Services and ReplicaSets) are not
//     applied: a pod without ScheduleAnyway constraints scores 0 here.
//   NodeAffinity, preferredDuringSchedulingIgnoredDuringExecution (weight 2). Raw: the sum of the
//     weights of the preference terms the node matches; normalized s * 100 / max (max 0: all 0).
//   TaintToleration (weight 3). Raw: the node's PreferNoSchedule taints that no toleration of
//     effect PreferNoSchedule or empty tolerates; normalized 100 - s * 100 / max (max 0: 100).
//
// The pod itself (same namespace and name, e.g. its own reservation) is never counted as a
// placed pod, as in the filters. A placed pod on a node not among `nodes` is skipped.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "libcore/alloc/placed_pods.hpp"
#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/sched_objects.hpp"

namespace kc::alloc {

inline constexpr std::int64_t kMaxNodeScore = 100;
// InterPodAffinityArgs.hardPodAffinityWeight, kube-scheduler's default.
inline constexpr std::int64_t kHardPodAffinityWeight = 1;
// The default profile's plugin weights.
inline constexpr std::int64_t kInterPodAffinityScoreWeight = 2;
inline constexpr std::int64_t kTopologySpreadScoreWeight = 2;
inline constexpr std::int64_t kNodeAffinityScoreWeight = 2;
inline constexpr std::int64_t kTaintTolerationScoreWeight = 3;

// Whether anything in this decision can make the scores differ between nodes: the pod has
// preferred node affinity, preferred pod (anti-)affinity or ScheduleAnyway constraints, a node
// has a PreferNoSchedule taint, or a placed pod has terms InterPodAffinity scores by
// (PlacedPods::anyScoredAffinity). Without any, every node scores the same and placePod keeps
// Eq. 1 alone. `preferNoScheduleTaints`: whether a node has that taint, when the caller keeps
// count (FilterOptions); nullopt: O(nodes' taints).
bool hasPreferenceInputs(const SchedPod& pod, std::span<const SchedNode> nodes,
                         const PlacedPods* placed,
                         std::optional<bool> preferNoScheduleTaints = std::nullopt);

// Per candidate, in the order given, each in 0..kMaxNodeScore; total is the weighted sum.
struct PreferenceScores {
  std::vector<std::int64_t> interPodAffinity{};
  std::vector<std::int64_t> topologySpread{};
  std::vector<std::int64_t> nodeAffinity{};
  std::vector<std::int64_t> taintToleration{};
  std::vector<std::int64_t> total{};
};

// The scores of nodes[candidates[i]] (the nodes that passed the filters: the normalizations
// and PodTopologySpread's domains are over them), counting the pods of `placed` on any of
// `nodes` (every node of the cluster: a topology domain spans nodes). `placed` null: no pods;
// `namespaces` null: namespaceSelector labels unknown (affinityTermMatches). Every index in
// `candidates` must be < nodes.size().
PreferenceScores scorePreferences(const SchedPod& pod, std::span<const SchedNode> nodes,
                                  std::span<const std::size_t> candidates, const PlacedPods* placed,
                                  const NamespaceLabels* namespaces);

}  // namespace kc::alloc
