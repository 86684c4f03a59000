#pragma once
// kubecomp-sched's side of preemption (docs/sched.md "Priority and preemption"): what the cache
// keeps for it (the PodDisruptionBudgets as libcore/alloc/preemption.hpp reads them, the node
// each preemptor was nominated to) and what the scheduler writes for a preemption (the victims
// evicted through the Eviction API, the preemptor's status.nominatedNodeName, kube-scheduler's
// condition and Events). The decision is alloc::selectPreemption; this is the adapter.

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/preemption.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/base/result.hpp"

namespace kc::sched {

// The condition kube-scheduler puts on a victim, and its reason (PodDisruptionConditions).
inline constexpr std::string_view kConditionDisruptionTarget = "DisruptionTarget";
inline constexpr std::string_view kReasonPreemptionByScheduler = "PreemptionByScheduler";
// The victim's Event reason.
inline constexpr std::string_view kReasonPreempted = "Preempted";
// kube-scheduler's PodEligibleToPreemptOthers, when victims of an earlier preemption on the
// nominated node are still terminating.
inline constexpr std::string_view kTerminatingVictimMessage =
    "not eligible due to a terminating pod on the nominated node.";

// What a pod with ResourceClaims that fits nowhere is told in place of the PostFilter's text:
// the DRA path does not preempt (docs/sched.md).
inline constexpr std::string_view kDraNoPreemptionMessage =
    "not tried for a pod with ResourceClaims.";

// A pod to evict for a preemption.
struct PreemptVictim {
  std::string key;  // "ns/name"
  std::string ns;
  std::string name;
  std::string uid;
};

// What the cache keeps for preemption; guarded by the cache's mutex.
struct PreemptionState {
  std::map<std::string, alloc::DisruptionBudget> budgets;  // "ns/name" -> budget
  std::unordered_map<std::string, std::string> nominated;  // preemptor "ns/name" -> node
  // The nominated pods counted on their node for the decision under way (holdNominatedLocked).
  std::vector<std::string> holding;
  // Per node, the pods running there: scratch rebuilt by each decision (capacity kept).
  std::vector<std::vector<alloc::ResidentPod>> running;
  alloc::SplitMix64 rng{27};  // where each search for candidates starts
};

// A policy/v1 PodDisruptionBudget as preemption reads it: namespace, spec.selector,
// status.disruptionsAllowed and status.disruptedPods. Errors "invalid" naming the field.
Result<alloc::DisruptionBudget> parseDisruptionBudget(const nlohmann::json& pdb);

// The policy/v1 Eviction body for a victim (its UID as the delete precondition).
nlohmann::json evictionBody(const PreemptVictim& victim);

// kube-scheduler's DisruptionTarget message for a victim of `schedulerName`'s preemption.
std::string preemptionConditionMessage(std::string_view schedulerName);

}  // namespace kc::sched
