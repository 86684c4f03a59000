#pragma once
// The one order of waiting pods, shared by kubecomp-sched's scheduling queue and reconfig-mgr's
// move planner (issue 24 §6, issue 27): higher `spec.priority` first (kube-scheduler's
// PrioritySort), then earlier `metadata.creationTimestamp` (FCFS within a priority, the paper's
// rule), then namespace, then name. creationTimestamp has one-second resolution, so a burst of
// pods shares it; both daemons must break those ties the same way or a GPU claimed for one pod
// is taken for another a moment later.
//
// Pure: no I/O, threads or clocks.

#include <compare>
#include <cstdint>
#include <string_view>
#include <tuple>

namespace kc::alloc {

struct PodOrderKey {
  std::int32_t priority = 0;  // spec.priority (0 when absent, as the API server defaults it)
  std::int64_t created = 0;   // creationTimestamp, seconds since the epoch
  std::string_view ns;
  std::string_view name;
};

// True when `a` comes before `b` in the queue.
inline bool podBefore(const PodOrderKey& a, const PodOrderKey& b) {
  if (a.priority != b.priority) {
    return a.priority > b.priority;
  }
  return std::tie(a.created, a.ns, a.name) < std::tie(b.created, b.ns, b.name);
}

}  // namespace kc::alloc
