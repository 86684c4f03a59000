#pragma once
// The API server's Priority admission plugin, as the double applies it: a new Pod's
// spec.priority (and spec.preemptionPolicy) computed from its spec.priorityClassName, or from
// the PriorityClass marked globalDefault when it names none (priority 0 without one); and the
// checks on a new PriorityClass (one global default; user values up to one billion, the
// "system-" prefix reserved). The two built-in classes system-cluster-critical and
// system-node-critical are known without being stored, as the real server creates them at
// start.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kc::apiserver {

// The highest value a PriorityClass not named "system-..." may have.
inline constexpr std::int64_t kHighestUserDefinablePriority = 1'000'000'000;

// Fills spec.priority, spec.priorityClassName (the global default's name) and
// spec.preemptionPolicy (the class's) of a Pod being created. `classes`: every stored
// PriorityClass. Throws the 403 Forbidden the real plugin answers: an unknown class, or a
// spec.priority / spec.preemptionPolicy given that differs from the class's.
void admitPodPriority(const std::string& podName, nlohmann::json& pod,
                      const std::vector<const nlohmann::json*>& classes);

// A PriorityClass being created: 422 Invalid for a value above kHighestUserDefinablePriority
// or a reserved name, a bad preemptionPolicy; 403 Forbidden for a second globalDefault.
void admitPriorityClass(const std::string& name, const nlohmann::json& pc,
                        const std::vector<const nlohmann::json*>& classes);

}  // namespace kc::apiserver
