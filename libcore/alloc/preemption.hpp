#pragma once
// Preemption as kube-scheduler's DefaultPreemption plugin decides it (docs: "Pod Priority and
// Preemption"; the scheduling framework's PostFilter), as pure code: when a pod fits nowhere,
// even with GPUs moved to it (placePod failed), which running pods of lower priority to evict,
// and on which node.
//
// Per node (victimsOnNode):
//   1. every pod there with a priority below the preemptor's is a potential victim; with all
//      of them removed the preemptor must fit (the kube filters, and the GPUs: see below), else
//      the node is no candidate;
//   2. the potential victims, most important first (higher priority, then earlier start), are
//      split by PodDisruptionBudget: a pod whose eviction would take a budget below zero
//      (budgets counted down in that order) is "violating";
//   3. each is put back if the preemptor still fits with it (reprieved), the violating ones
//      first, then the others; those that cannot be put back are the victims, and the violating
//      ones among them count as PDB violations.
// Candidates are searched from PreemptionInput::startNode on, until enough are found (below).
// Among candidate nodes (preemptsBefore), the first by:
//   fewest PDB violations; lowest priority of the highest-priority victim; smallest sum of the
//   victims' priorities; fewest victims; latest start of the highest-priority victims (the
//   earliest of them counts); then the candidate found first (kube-scheduler takes whichever
//   it met first). A node needing no victim at all wins at once.
// A pod with preemptionPolicy Never preempts nobody.
//
// GPUs: a victim's kubecomp.io/gpu frees GPUs on its node (at most as many accepted-model GPUs
// as are in use there); the preemptor fits the GPU dimension when the node's free accepted GPUs
// plus the freed ones (composable mode: plus the free accepted GPUs elsewhere in the node's
// pool, which can be moved there) cover its request, as the pool filter counts.
//
// Nominated pods (kube-scheduler's addGENominatedPods, which RunFilterPluginsWithNominatedPods
// applies to every filter, in the preemption's victim search too): once a preemption has
// nominated pod P to node N, P counts on N as if it ran there, while its victims terminate,
// whenever a pod Q with priority(Q) <= priority(P) is filtered; a pod of higher priority
// ignores it. So the room P's victims free is not taken by a lower-priority pod. The caller
// puts them in the usage (nominatedCounts, nominatedHold) before it calls placePod or
// selectPreemption.
//
// Not modelled (documented in docs/sched.md): the victims' host ports and pod (anti-)affinity
// stay counted while the node is tried (the filters read the cluster's PlacedPods as it is).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/alloc/pod_affinity.hpp"
#include "libcore/alloc/pod_fit.hpp"
#include "libcore/alloc/pod_placement.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/sched_objects.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// kube-scheduler's per-node statuses in the preemption FitError (a node whose filters failed
// for reasons no eviction changes: not helpful; one where no lower-priority pod runs: no
// victims; one where the pod does not fit even without them: the filters' reasons), and its
// ineligibility message.
inline constexpr std::string_view kReasonNoVictims = "No preemption victims found for incoming pod";
inline constexpr std::string_view kReasonPreemptionNotHelpful =
    "Preemption is not helpful for scheduling";
inline constexpr std::string_view kPreemptNeverMessage =
    "not eligible due to preemptionPolicy=Never.";

// A pod running on a node, as preemption weighs it.
// The strings, request and labels are the caller's records (not owned), valid for the call.
struct ResidentPod {
  std::string_view key{};  // "ns/name"
  std::string_view ns{};
  std::string_view name{};
  std::int32_t priority = 0;
  std::int64_t started = 0;  // when it started (any monotonic unit): earlier is more important
  // Its effective request (podRequests), kubecomp.io/gpu included (not owned; never null).
  const Resources* request = nullptr;
  const StringMap* labels = nullptr;  // metadata.labels (not owned; null: none)
};

// A PodDisruptionBudget as preemption reads it (kube-scheduler's filterPodsWithPDBViolation).
struct DisruptionBudget {
  std::string ns{};
  // spec.selector; nullopt, and an empty selector, select no pod here (kube-scheduler skips
  // a budget whose selector is empty).
  std::optional<LabelSelector> selector{};
  std::int32_t disruptionsAllowed = 0;                 // status.disruptionsAllowed
  std::set<std::string, std::less<>> disruptedPods{};  // status.disruptedPods: names counted
};

struct PreemptionInput {
  std::span<const SchedNode> nodes{};
  std::span<const NodeUsage> usage{};
  const ClusterState* state = nullptr;  // GPUs, same node order
  // running[i]: the pods on nodes[i] (those of lower priority than the preemptor suffice: the
  // others are never victims and count only in usage).
  std::span<const std::vector<ResidentPod>> running{};
  std::span<const DisruptionBudget> budgets{};
  PlacementOptions options{};  // the filters and mode placePod used
  // Per pool (empty: none): GPUs its pods hold beyond the pool's GPUs, which the pool model
  // cannot mark (a nominated pod counted while its victims still hold theirs). GPUs that
  // victims free go to those first: a node's room is that much smaller.
  std::span<const std::uint32_t> poolOwed{};
  // kube-scheduler's DefaultPreemptionArgs: the search stops once it has found at least one
  // candidate without PDB violations and max(minCandidateNodesPercentage% of the nodes,
  // minCandidateNodesAbsolute) candidates in all (at most every node); it starts at node
  // `startNode` (kube-scheduler: a random one) and wraps around.
  std::uint32_t minCandidateNodesPercentage = 10;
  std::uint32_t minCandidateNodesAbsolute = 100;
  std::size_t startNode = 0;
};

struct NodeVictims {
  std::size_t node = 0;
  std::vector<std::size_t> victims{};  // indices into running[node], most important first
  std::int32_t pdbViolations = 0;
};

// The victims on one node, or nullopt when evicting every lower-priority pod there would not
// let the pod fit (or there is none to evict). `request` is podRequests(pod).
std::optional<NodeVictims> victimsOnNode(const SchedPod& pod, const Resources& request,
                                         const PreemptionInput& in, std::size_t node);

// Whether candidate `a` is preferred to `b` (the order above; equal keys: false both ways).
bool preemptsBefore(const NodeVictims& a, const NodeVictims& b,
                    std::span<const std::vector<ResidentPod>> running);

// Whether a pod nominated to a node, of priority `nominee`, counts there when a pod of priority
// `pod` is filtered (kube-scheduler's addGENominatedPods: nominee >= pod; the pod itself never
// counts as its own nominee, which the caller knows by identity).
bool nominatedCounts(std::int32_t nominee, std::int32_t pod);

// What a nominated pod holds on its node meanwhile: its request, less the kubecomp.io/gpu that
// the pods of lower priority being deleted there (its victims) still hold. Those GPUs come to it
// as the victims go, and are in use until then; counted twice, the rest would be taken from the
// pool's free GPUs, which nobody else could then use while the victims terminate. (CPU and
// memory count twice on the node, as in kube-scheduler.)
Resources nominatedHold(const Resources& request, std::int64_t terminatingGpus);

// kube-scheduler's MoreImportantPod: higher priority, then earlier start.
bool moreImportant(const ResidentPod& a, const ResidentPod& b);

// The node and victims for `pod`. Errors: "unschedulable" with the message kube-scheduler's
// PostFilter gives ("preemption: 0/N nodes are available: <count> <reason>, ... ." or
// "preemption: not eligible due to preemptionPolicy=Never."), to be appended to the FitError
// as kube-scheduler does (fitError + " " + message); "invalid" when the spans differ in length.
Result<NodeVictims> selectPreemption(const SchedPod& pod, const PreemptionInput& in);

}  // namespace kc::alloc
