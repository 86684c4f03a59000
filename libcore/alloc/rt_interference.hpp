#pragma once
// Sharing a core between RT groups on a kernel without per-core servers (docs/rt.md, "Two RT
// groups on one core").
//
// Mainline cgroup v1 RT throttling is not a server per core: a group may run whenever its
// highest-priority runnable task outranks the other groups' (a SCHED_FIFO 99 task in one
// group preempts every lower priority in the others), until it has used its runtime in the
// current period of its own timer. So a group on a shared core sees the other groups as
// higher-priority work, bounded only by their budgets. A group with budget (Q, P) behaves like
// a deferrable server (Strosnider, Lehoczky, Sha, IEEE TC 1995): it may spend Q at the very end
// of one of its periods and Q again at the start of the next, so in ANY interval of length t it
// runs at most
//     W(t) = min(t, ceil((t + P - Q) / P) * Q)
// (a periodic task of cost Q and period P with release jitter P - Q; Audsley et al. 1993).
//
// The admission test (sufficient): every group g on the core still receives its budget in every
// one of its periods when each other group h takes the most it can,
//     Q_g + sum_{h != g} W_h(P_g) <= P_g.
// Why that is what the tasks need: then in each period window of g, whenever g's tasks are
// backlogged they lose at most sum W_h(P_g) <= P_g - Q_g to the others, so g gets its Q_g
// before the window closes, or (backlogged from mid-window on) at least what the periodic
// resource model Gamma(P_g, Q_g) of Shin and Lee (RTSS 2003) promises in the rest of the window.
// The supply of g is then at least that of Gamma(P_g, Q_g), and a task set that passes rtctl's
// test for (Q_g, P_g) (docs/rt.md, "rtctl") keeps meeting its deadlines: the per-core-server
// promise of the reservation holds again. The test runs for every group on the core, the new
// one and the ones already there, since the new group interferes with them too.
//
// Not modelled (docs/rt.md lists them): enforcement granularity (the kernel notices an exhausted
// budget at the next tick or scheduling event, so a group may overrun by up to a tick), and
// RT_RUNTIME_SHARE (a group borrowing runtime from its idle CPUs; must be off, as it is by
// default on current kernels). Pure integer arithmetic in 128 bits; no floating point.

#include <cstdint>
#include <span>

#include "libcore/alloc/rt_admission.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

// One group's budget on a core: runtime_us every period_us (one server of an RtReservation).
struct RtBudget {
  std::uint64_t runtimeUs = 0;
  std::uint64_t periodUs = 0;
  friend bool operator==(const RtBudget&, const RtBudget&) = default;
};
inline RtBudget budgetOf(const RtReservation& r) {
  return RtBudget{r.runtimeUs, r.periodUs};
}

// W(t) above: the most a group with budget b runs in any interval of length t (us). Total:
// a zero period or runtime gives 0, runtime > period is taken as period.
std::uint64_t rtInterferenceUs(const RtBudget& b, std::uint64_t t);

// Q_g + sum_{h != g} W_h(P_g): the time group `g` may need, in one of its own periods, to get
// its budget (saturates at UINT64_MAX; g out of range gives 0).
std::uint64_t rtWindowDemandUs(std::span<const RtBudget> groups, std::size_t g);

// Whether every group on one core keeps its budget in each of its periods (the test above).
// Error "insufficient" naming the first group that would not and the numbers; "invalid" for a
// budget with zero period, zero runtime or runtime > period. One group alone always passes.
Status rtSharedCoreAdmits(std::span<const RtBudget> groups);

}  // namespace kc::alloc
