#pragma once
// The simulator's input vocabulary: a job (one pod) and a trace (jobs in arrival order).
//
// Time is integer milliseconds of simulated time from the trace's origin. Milliseconds keep
// every quantity exact (trace times are whole seconds, move times may be fractional seconds)
// and fit int64 for any trace length we read.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace kc::sim {

using SimMs = std::int64_t;

inline constexpr SimMs kMsPerSecond = 1000;

// Input limits, checked where a value enters (trace readers, flags) with an error naming the
// limit. They keep every quantity the engine derives far from int64 overflow and memory use
// bounded; the engine still checks its own sums (queueing can push an end time past any input).
//   times (arrival, duration): at most 10^12 s (~31,700 years), so at most 10^15 ms
//   jobs in one trace: 10,000,000 (about 1.5 GiB: bench_sim peaks at 143 MiB per million)
//   cluster: 100,000 pools, 1,000,000 nodes, 10,000,000 GPUs
//   simulated time: the engine stops with an error past 2^62 ms
//   one line of a trace file: 1 MiB (kMaxLineBytes)
//   easy-backfill / slack-backfill: 20,000 jobs (kMaxPlanningJobs). Their pass plans for every
//   waiting job at each event, so a run costs up to jobs x events backfill tests: quadratic in
//   the jobs that wait at once (measured: 20,000 random jobs that all queue, about a minute on
//   one core; 200,000 would take about a hundred times that). fcfs and backfill take kMaxJobs.
inline constexpr std::int64_t kMaxTraceSeconds = 1'000'000'000'000;
inline constexpr SimMs kMaxTraceMs = kMaxTraceSeconds * kMsPerSecond;
inline constexpr std::uint64_t kMaxJobs = 10'000'000;
inline constexpr std::uint64_t kMaxPools = 100'000;
inline constexpr std::uint64_t kMaxNodes = 1'000'000;
inline constexpr std::uint64_t kMaxGpus = 10'000'000;
inline constexpr SimMs kMaxSimMs = SimMs{1} << 62;
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
inline constexpr std::uint64_t kMaxPlanningJobs = 20'000;
// Members of one gang (Job::members): at most 1,024, as GPUs per job.
inline constexpr std::uint32_t kMaxMembers = 1024;

// Input text as an error message quotes it: in single quotes, at most kMaxQuotedChars bytes of
// it, then "..." and its full length, so a 20 MB field gives a short message; control bytes are
// written as \xNN (no terminal escapes reach stderr).
inline constexpr std::size_t kMaxQuotedChars = 64;
inline std::string quoteInput(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < kMaxQuotedChars; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (text.size() > kMaxQuotedChars) {
    return out + "...' (" + std::to_string(text.size()) + " bytes)";
  }
  return out + "'";
}

// A job is one pod, or a gang (issue 27): `members` pods that each request `gpus`, `cpuMilli`
// and `memoryMib`, placed all together or not at all and started at the same instant (the
// last member's GPU moves). `priority` orders the queue (libcore/alloc/pod_order.hpp: higher
// first, then arrival), as spec.priority orders kubecomp-sched's queue.
struct Job {
  std::string id;
  SimMs arrival = 0;       // submission time
  SimMs duration = 0;      // run time once started
  std::uint32_t gpus = 0;  // whole GPUs, exclusive (device plugin semantics)
  // Accepted GPU models: an index into Trace::gpuSpecs (0: any GPU). A job runs only on GPUs
  // whose model is listed. An index beside `gpus`, not the text, so a job stays 80 bytes.
  std::uint32_t gpuSpec = 0;
  std::int64_t cpuMilli = 0;   // requested CPU, millicores (per member)
  std::int64_t memoryMib = 0;  // requested memory, MiB (per member)
  std::uint32_t members = 1;   // 1: one pod; more: a gang of that many pods (1..kMaxMembers)
  std::int32_t priority = 0;   // queue priority (spec.priority; 0 when absent)
  // GPUs of all members together.
  std::uint64_t totalGpus() const { return std::uint64_t{gpus} * members; }
};

// Jobs sorted by arrival (stable: equal arrivals keep input order).
struct Trace {
  std::vector<Job> jobs;
  // The distinct gpu_spec texts, model names joined by '|' as in the Alibaba trace
  // ("V100M16|V100M32"); [0] is "" (any GPU).
  std::vector<std::string> gpuSpecs{std::string()};

  // The index of `spec` in gpuSpecs, appended if new. Linear in the distinct specs (a trace
  // has a handful); readers keep their own index.
  std::uint32_t specIndex(std::string_view spec) {
    for (std::size_t i = 0; i < gpuSpecs.size(); ++i) {
      if (gpuSpecs[i] == spec) {
        return static_cast<std::uint32_t>(i);
      }
    }
    gpuSpecs.emplace_back(spec);
    return static_cast<std::uint32_t>(gpuSpecs.size() - 1);
  }
  const std::string& specOf(const Job& job) const { return gpuSpecs[job.gpuSpec]; }
};

}  // namespace kc::sim
