#pragma once
// The simulator's input vocabulary: a job (one pod) and a trace (jobs in arrival order).
//
// Time is integer milliseconds of simulated time from the trace's origin. Milliseconds keep
// every quantity exact (trace times are whole seconds, move times may be fractional seconds)
// and fit int64 for any trace length we read.

#include <cstdint>
#include <string>
#include <vector>

namespace kc::sim {

using SimMs = std::int64_t;

inline constexpr SimMs kMsPerSecond = 1000;

struct Job {
  std::string id;
  SimMs arrival = 0;           // submission time
  SimMs duration = 0;          // run time once started
  std::uint32_t gpus = 0;      // whole GPUs, exclusive (device plugin semantics)
  std::int64_t cpuMilli = 0;   // requested CPU, millicores
  std::int64_t memoryMib = 0;  // requested memory, MiB
};

// Jobs sorted by arrival (stable: equal arrivals keep input order).
struct Trace {
  std::vector<Job> jobs;
};

}  // namespace kc::sim
