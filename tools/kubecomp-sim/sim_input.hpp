#pragma once
// The engine's input check: a trace and a config it can run (simulate()'s "invalid" errors,
// engine.hpp). Internal to kc_sim.

#include <cstdint>
#include <vector>

#include "libcore/alloc/gpu_model.hpp"
#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

// The queue policies that plan ahead (easy-backfill, slack-backfill) take at most
// kMaxPlanningJobs jobs (job.hpp says why); the others kMaxJobs. Error "invalid" naming the
// queue, the limit and `jobs`.
Status checkPlanningJobs(QueueDiscipline queue, std::uint64_t jobs);

// The trace's gpu_spec texts parsed (one filter per Trace::gpuSpecs entry, [0] accepting any),
// once the jobs (sorted, non-negative, within the limits), the policies, the move time and the
// DRA-path settings are checked (and the job count against the queue, checkPlanningJobs). Error
// "invalid" naming what is wrong.
Result<std::vector<alloc::GpuModelFilter>> checkSimInput(const Trace& trace,
                                                         const SimConfig& config);

}  // namespace kc::sim
