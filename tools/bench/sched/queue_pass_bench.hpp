#pragma once
// The decision cost of kubecomp-sched's queue policies at scale (bench_sched, issue 17): one
// pass of the shared pure pass (libcore/alloc/queue_pass.hpp) over a realistic queue, for
// easy-backfill and slack-backfill, side by side with the default greedy backfill over the same
// queue and cluster. No processes: the pass's time is the scheduler's own work per pass.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>

namespace kc::bench {

struct QueuePassScenario {
  std::uint32_t nodes = 5'000;  // 4 GPUs each, 100 nodes a pool
  std::uint32_t waiting = 300;  // behind the head, an 8-GPU pod that does not fit now
  int passes = 5;               // measured passes per policy (the median is reported)
  std::uint64_t seed = 1;
};

// One policy's figures: median pass time and what the pass did (the same every pass).
struct QueuePassFigures {
  double passMs = 0;
  double minPassMs = 0;
  std::uint64_t tested = 0;  // backfill tests (easy/slack); placement attempts (backfill)
  std::uint64_t started = 0;
  std::uint64_t waiting = 0;  // pods the pass decided on (the head included)
  double msPerTested() const { return tested == 0 ? 0 : passMs / static_cast<double>(tested); }
  double decisionsPerS() const {
    return passMs <= 0 ? 0 : static_cast<double>(waiting) * 1000 / passMs;
  }
};

struct QueuePassResults {
  QueuePassScenario scenario;
  std::uint64_t running = 0;   // running pods with expected ends
  std::uint64_t freeGpus = 0;  // free when the pass starts
  QueuePassFigures backfill;
  QueuePassFigures easy;
  QueuePassFigures slack;
  void print(std::ostream& out) const;
  // Keys with the node count as suffix, e.g. easy_pass_ms_5000_nodes.
  void addTo(nlohmann::json& out) const;
};

// Builds the scenario (seeded) and measures every policy on it. Throws std::runtime_error on a
// pass error, or when the scenario is not what it claims (the head fits now, nothing tested).
QueuePassResults measureQueuePasses(const QueuePassScenario& scenario);

}  // namespace kc::bench
