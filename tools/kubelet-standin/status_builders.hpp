#pragma once
// Pure builders of what kubelet writes to the API: pod status at each step of a pod's life
// (admitted/ContainerCreating, Running, terminated, rejected), the Node's status (capacity,
// allocatable, conditions with heartbeats, nodeInfo, addresses) and the run duration a pod
// asks for in its annotation. Times are passed in (RFC 3339 strings), never read here.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubelet-standin/admission.hpp"

namespace kc::kubelet {

inline constexpr const char* kRunSecondsAnnotation =
    api::kRunSecondsAnnotation.data();  // a literal: NUL-terminated

// Seconds from the kubecomp.io/run-seconds annotation: nullopt when absent (run until
// deleted); error "invalid" unless a non-negative decimal number ("300", "2.5").
Result<std::optional<double>> runSeconds(const nlohmann::json& pod);

struct PodRunTimes {
  std::string now;         // time of this write (condition transitions)
  std::string startTime;   // status.startTime: when kubelet admitted the pod
  std::string startedAt;   // containers' running.startedAt
  std::string finishedAt;  // containers' terminated.finishedAt (terminated only)
};

// Admitted, containers being created: phase Pending, Initialized True (init containers done
// at once), ContainersReady/Ready False "ContainersNotReady", containers waiting in
// "ContainerCreating".
nlohmann::json creatingStatus(const nlohmann::json& pod, const std::string& hostIp,
                              const std::string& podIp, const PodRunTimes& t);
// Every container running and ready: phase Running, Ready/ContainersReady True.
nlohmann::json runningStatus(const nlohmann::json& pod, const std::string& hostIp,
                             const std::string& podIp, const PodRunTimes& t);
// Every container terminated with `exitCode` / `reason` (0 "Completed" for a job that ran its
// time, 143 "Error" for one stopped by deletion): phase Succeeded when 0, Failed otherwise;
// conditions False with reason "PodCompleted".
nlohmann::json terminatedStatus(const nlohmann::json& pod, const std::string& hostIp,
                                const std::string& podIp, const PodRunTimes& t, int exitCode,
                                const std::string& reason);
// kubelet's rejection: phase Failed, reason, message "Pod was rejected: <message>".
nlohmann::json rejectedStatus(const Rejection& rejection);

// Node conditions as kubelet reports a healthy node: MemoryPressure, DiskPressure,
// PIDPressure False and Ready True, heartbeat `now`, transition times kept from `previous`
// (the Node's current conditions) when the status did not change.
nlohmann::json nodeConditions(const nlohmann::json& previous, const std::string& now);

// {"cpu": "8", "memory": "34359738368", ...} for capacity/allocatable.
nlohmann::json resourceMapJson(const ResourceList& list);

}  // namespace kc::kubelet
