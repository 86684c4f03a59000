#pragma once
// PodDisruptionBudgets (policy/v1) and the pods/eviction decision, as pure functions over
// the stored JSON: the double has no disruption controller, so the store recomputes a
// budget's status with pdbStatus() whenever a pod or budget of its namespace changes, and
// the eviction handler asks decideEviction() before it deletes.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kube-apiserver-double/selectors.hpp"

namespace kc::apiserver {

// An intstr value of minAvailable / maxUnavailable: a count or a percentage ("30%").
struct IntOrPercent {
  std::int32_t value = 0;
  bool percent = false;

  // apimachinery's GetScaledValueFromIntOrPercent: a percentage of `total`, rounded up
  // when `roundUp`, else down.
  std::int32_t scaled(std::int32_t total, bool roundUp) const;
};

struct PdbSpec {
  LabelSelector selector;
  bool selectsNothing = true;  // no spec.selector at all: selects no pod (an empty {} selects all)
  std::optional<IntOrPercent> minAvailable;
  std::optional<IntOrPercent> maxUnavailable;
  std::string unhealthyPodEvictionPolicy;  // "", IfHealthyBudget, AlwaysAllow

  bool selects(const nlohmann::json& pod) const;
};

// Validates and reads spec (the checks of the real policy/v1 validation our clients can
// hit). Errors: code "invalid", message "<field>: <detail>".
Result<PdbSpec> parsePdbSpec(const nlohmann::json& pdb);

// A pod counts as healthy when its Ready condition is True and it is not being deleted.
bool podHealthy(const nlohmann::json& pod);

// The status the disruption controller would write for `pdb`, given the pods its selector
// picks in its namespace. The expected scale is the number of selected pods (the real
// controller reads the scale of the pods' controllers for percentages and maxUnavailable;
// the double runs no controllers). `previous` supplies the condition's lastTransitionTime
// when the condition did not change; `now` is the RFC 3339 time otherwise.
nlohmann::json pdbStatus(const nlohmann::json& pdb, const PdbSpec& spec,
                         const std::vector<const nlohmann::json*>& selectedPods,
                         const nlohmann::json& previous, const std::string& now);

struct EvictionDecision {
  enum class Verdict {
    kAllowed,          // delete the pod
    kBudgetExhausted,  // 429: disruptionsAllowed is 0
    kNotObserved,      // 429 (retry after 10 s): the budget's status is older than its spec
    kNegativeBudget,   // 403: disruptionsAllowed < 0
    kSeveralBudgets,   // 500: more than one budget selects the pod
  };
  Verdict verdict = Verdict::kAllowed;
  std::string pdbName;
  std::string message;  // the Status cause's message (429) or the error text
};

// policy/v1 eviction: terminal, pending or terminating pods and pods without a budget are
// deleted; an unready pod is deleted when its budget is not violated (or the budget says
// AlwaysAllow); otherwise the budget must allow a disruption. `budgets`: the PDBs of the
// pod's namespace that select it.
EvictionDecision decideEviction(const nlohmann::json& pod,
                                const std::vector<const nlohmann::json*>& budgets);

}  // namespace kc::apiserver
