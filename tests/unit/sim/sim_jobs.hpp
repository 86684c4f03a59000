#pragma once
// Shared fixture of the queue-policy engine tests (easy_backfill_test.cpp,
// idle_recompose_test.cpp): a job from seconds.

#include <cstdint>
#include <string>

#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim::test {

inline Job job(std::size_t i, double arrivalS, std::uint32_t gpus, double durationS,
               std::int64_t cpuMilli = 1000) {
  Job j;
  j.id = std::to_string(i);  // (not "j" + ...: GCC 12 reports a false -Wrestrict at -O3)
  j.arrival = static_cast<SimMs>(arrivalS * kMsPerSecond);
  j.duration = static_cast<SimMs>(durationS * kMsPerSecond);
  j.gpus = gpus;
  j.cpuMilli = cpuMilli;
  return j;
}

}  // namespace kc::sim::test
