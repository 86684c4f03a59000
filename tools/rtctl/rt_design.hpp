#pragma once
// rtctl's analysis: container parameters (runtime, period, cpus) for a set of periodic tasks,
// with a simple sufficient test (docs/rt.md "rtctl" gives the formulas and their sources).
//
// Model. Task i: WCET C_i, period T_i, relative deadline D_i <= T_i (microseconds), fixed
// priority by deadline (deadline-monotonic), run as SCHED_FIFO threads each pinned to one of
// the container's cores. Each core of the container is served by a periodic resource
// Gamma(P, Q): Q us of CPU every P us (the cgroup's rt_runtime_us / rt_period_us on that core).
// Its supply in any interval of length t is at least the linear bound (Shin and Lee, RTSS 2003)
//     lsbf(t) = max(0, (Q / P) * (t - 2 (P - Q))).
// Task i on a core is schedulable if some t in (0, D_i] has
//     rbf_i(t) = C_i + sum_{j higher priority on the core} ceil(t / T_j) * C_j  <=  lsbf(t)
// and it suffices to try t = D_i and every multiple of a higher-priority T_j below D_i (rbf
// is constant between them while lsbf grows).
// Tasks are partitioned first-fit by decreasing utilization over m cores; a core's Q is the
// least integer that passes every task on it; the container's runtime is the largest Q over
// its cores (one value for all cpus), cpus = m. m runs from ceil(U / bound) to the number of
// tasks; the answer minimises m * runtime (then m).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::rtctl {

struct Task {
  std::uint64_t c = 0;  // WCET (us)
  std::uint64_t t = 0;  // period (us)
  std::uint64_t d = 0;  // relative deadline (us), 0 = t
};

// (Q/P) * (t - 2(P - Q)), at least 0, as a real number.
double lsbf(std::uint64_t periodUs, std::uint64_t runtimeUs, std::uint64_t t);

// Whether tasks (any order; priorities by deadline, ties by index) pass on one core served
// by (runtime, period).
bool coreSchedulable(const std::vector<Task>& tasks, std::uint64_t periodUs,
                     std::uint64_t runtimeUs);
// The least runtime in [1, period] that passes, nullopt when even a full core does not.
std::optional<std::uint64_t> minRuntime(const std::vector<Task>& tasks, std::uint64_t periodUs);

struct Design {
  std::uint64_t runtimeUs = 0;
  std::uint64_t periodUs = 0;
  std::uint32_t cpus = 0;
  std::vector<std::uint32_t> coreOfTask;     // the core (0..cpus-1) each task is pinned to
  std::vector<std::uint64_t> coreRuntimeUs;  // the least runtime of each core
};

// Errors: "invalid" (no tasks, C = 0, C > D, D > T, period 0, bound outside (0, 1]),
// "insufficient" (no number of cores up to the task count passes under the bound).
Result<Design> design(const std::vector<Task>& tasks, std::uint64_t periodUs, double bound = 0.95);

// "C,T" or "C,T,D" -> Task. Error "invalid".
Result<Task> parseTask(const std::string& text);

}  // namespace kc::rtctl
