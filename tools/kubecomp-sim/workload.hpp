#pragma once
// The paper's synthetic workloads (paper 001, section VI-A-3): job types A-E of Table I, the
// mixes of Table II, the Job A / Job E mixes of Fig. 11 and the equal A-E mix of Fig. 13.
//
// Arrivals follow the authors' scripts: the INTERVAL between successive jobs is itself a
// Poisson-distributed integer (numpy `poisson(lam=60)` style), not an exponential gap. We draw it
// with std::poisson_distribution over a seeded std::mt19937_64, so a seed gives the same trace on
// every run of this program, but numpy's exact random stream is NOT reproduced (different
// generator and sampling algorithm): only the distribution matches.

#include <array>
#include <cstdint>
#include <string>

#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

struct JobType {
  char name = 'A';
  std::int64_t cpuMilli = 0;
  std::uint32_t gpus = 0;
};

inline constexpr std::size_t kJobTypeCount = 5;

// Table I: A = 80 CPUs + 1 GPU, B = 40 + 1, C = 40 + 2, D = 40 + 4, E = 40 + 8.
inline constexpr std::array<JobType, kJobTypeCount> kPaperJobTypes{{
    {'A', 80'000, 1},
    {'B', 40'000, 1},
    {'C', 40'000, 2},
    {'D', 40'000, 4},
    {'E', 40'000, 8},
}};

// "Each job runs for five minutes" (section VI-A-3).
inline constexpr SimMs kPaperJobDuration = 300 * kMsPerSecond;

// Fractions of job types A..E (sum 1).
struct Mix {
  std::string name;
  std::array<double, kJobTypeCount> fractions{};
};

// Named mixes: "w1".."w4" (Table II), "fig13" (equal A-E), "ae:<p>" with p the fraction of
// Job A in percent 0..100 and the rest Job E (Fig. 11), or "custom:a,b,c,d,e" with five
// non-negative weights (normalised). Error "invalid" otherwise.
Result<Mix> mixByName(const std::string& name);

struct WorkloadSpec {
  Mix mix;
  std::uint64_t jobs = 50;
  double lambda = 60.0;               // mean of the Poisson interval, in interval units
  SimMs intervalUnit = kMsPerSecond;  // one interval unit (1 s like the paper's scripts)
  SimMs duration = kPaperJobDuration;
  std::uint64_t seed = 1;
  // Gangs (issue 27): this share of the jobs (0..1, rounded to whole jobs) become gangs of
  // gangMembers (2..kMaxMembers) members, each member with its type's request (a 4-member gang
  // of Job A asks 4 x (80 CPUs + 1 GPU)). Chosen with a generator of their own, so the rest of
  // the trace is the one the seed gives without gangs.
  double gangShare = 0;
  std::uint32_t gangMembers = 4;
  // Priorities: each job gets a priority drawn uniformly from 0..priorityLevels-1 (1: all 0),
  // again from a generator of its own.
  std::uint32_t priorityLevels = 1;
};

// Per-type job counts: exactly `jobs` in total, by largest remainder over the fractions
// (ties to the earlier type), so a 50-job Workload 4 has 12/12/12/12/2 jobs.
std::array<std::uint64_t, kJobTypeCount> mixCounts(const Mix& mix, std::uint64_t jobs);

inline constexpr double kMaxLambda = 1e9;

// The jobs in a seeded random order, first arrival at 0, then Poisson(lambda) gaps.
// Error "invalid": lambda outside (0, kMaxLambda] or NaN, interval unit < 1, duration outside
// 0..kMaxTraceMs, jobs outside 1..kMaxJobs, an arrival past kMaxTraceMs, gangShare outside
// 0..1, gangMembers outside 2..kMaxMembers, priorityLevels outside 1..1000.
Result<Trace> generateWorkload(const WorkloadSpec& spec);

// The Alibaba mapping of multi-GPU jobs to gangs (docs/results.md, "Gangs and priorities"):
// every job of one pod asking g > 1 GPUs becomes a gang of g one-GPU members, its CPU and memory
// split evenly (rounded up). Returns how many jobs became gangs.
std::uint64_t gangsFromMultiGpu(Trace& trace);

}  // namespace kc::sim
