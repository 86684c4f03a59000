#pragma once
// Simulator outputs: the per-job CSV and the summary (JSON).

#include <nlohmann/json.hpp>
#include <ostream>

#include "libcore/alloc/pool_model.hpp"
#include "tools/kubecomp-sim/engine.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

// One row per job in trace order: id,arrival,start,end,wait,node,gpus_moved (times in seconds
// with millisecond precision; a rejected job has empty start/end/wait/node and status
// "rejected", otherwise "done").
void writeJobOutcomes(std::ostream& out, const Trace& trace, const SimResult& result,
                      const alloc::ClusterState& cluster);

struct Distribution {
  double mean = 0;
  double p50 = 0;
  double p95 = 0;
  double max = 0;
};

struct Summary {
  std::uint64_t jobs = 0;
  std::uint64_t completed = 0;
  std::uint64_t rejected = 0;
  Distribution waitS;
  Distribution jctS;
  double makespanS = 0;       // first arrival to last end
  double gpuUtilisation = 0;  // GPU-time used / (all GPUs x makespan)
  std::uint64_t gpusMoved = 0;
  std::uint64_t jobsWithMoves = 0;
  std::uint64_t gpusMovedWhileWaiting = 0;  // moves paid while a pod waited (SimResult)
  std::uint64_t idleMoves = 0;              // background moves (idle-time recomposition)
};

Summary summarise(const Trace& trace, const SimResult& result);

// The summary plus the usage series ({"bucket_s", "used_gpus_avg": [...]}) and the CDF of
// used GPUs (time-weighted: cdf[k] = share of time with at most k GPUs running jobs).
nlohmann::json summaryJson(const Trace& trace, const SimResult& result);

}  // namespace kc::sim
