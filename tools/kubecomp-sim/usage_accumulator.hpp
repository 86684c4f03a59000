#pragma once
// The engine's time-weighted record of how many GPUs run jobs (UsageRecord, engine.hpp), kept
// as simulated time advances. Internal to kc_sim.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "libcore/base/result.hpp"
#include "tools/kubecomp-sim/engine.hpp"

namespace kc::sim {

// Accumulates UsageRecord as simulated time advances.
class UsageAccumulator {
 public:
  explicit UsageAccumulator(std::uint64_t totalGpus) { rec_.histogramMs.assign(totalGpus + 1, 0); }

  void start(SimMs origin) {
    rec_.origin = origin;
    last_ = origin;
    started_ = true;
  }
  bool started() const { return started_; }

  // Accounts [last, t) at the current level, then moves to t. Times are at most kMaxSimMs
  // (the engine checks), so spans fit; the GPU-ms products are checked.
  Status advance(SimMs t) {
    if (!started_ || t <= last_) {
      return okStatus();
    }
    rec_.histogramMs[used_] += t - last_;
    if (used_ > 0) {
      fitBuckets(t);
      SimMs from = last_;
      while (from < t) {
        const auto b = static_cast<std::size_t>((from - rec_.origin) / rec_.bucketMs);
        const SimMs bucketEnd = rec_.origin + static_cast<SimMs>(b + 1) * rec_.bucketMs;
        const SimMs to = std::min(t, bucketEnd);
        if (rec_.bucketGpuMs.size() <= b) {
          rec_.bucketGpuMs.resize(b + 1, 0);
        }
        SimMs gpuMs = 0;
        if (__builtin_mul_overflow(to - from, static_cast<SimMs>(used_), &gpuMs) ||
            __builtin_add_overflow(rec_.bucketGpuMs[b], gpuMs, &rec_.bucketGpuMs[b])) {
          return makeError(kc::errc::kInvalid,
                           "GPU-time of the utilisation series overflows int64 ms "
                           "(the trace spans too long for this many GPUs)");
        }
        from = to;
      }
    }
    last_ = t;
    return okStatus();
  }
  void add(std::uint32_t gpus) { used_ += gpus; }
  void remove(std::uint32_t gpus) { used_ -= gpus; }

  Result<UsageRecord> finish(SimMs end) {
    if (auto st = advance(end); !st) {
      return st.error();
    }
    if (!started_) {
      return std::move(rec_);
    }
    // An idle tail (no GPU in use) was not coarsened by advance(): keep the bucket bound.
    fitBuckets(end);
    const SimMs span = std::max(end, rec_.origin) - rec_.origin;
    const auto buckets =
        static_cast<std::size_t>(span / rec_.bucketMs + (span % rec_.bucketMs != 0 ? 1 : 0));
    rec_.bucketGpuMs.resize(std::max(rec_.bucketGpuMs.size(), buckets), 0);
    return std::move(rec_);
  }

 private:
  // Coarsens until [origin, t) fits kMaxBuckets buckets. Written without multiplying, so it
  // cannot overflow and ends: bucketMs only grows to ceil(span / kMaxBuckets).
  void fitBuckets(SimMs t) {
    const SimMs span = t - rec_.origin;
    const auto max = static_cast<SimMs>(UsageRecord::kMaxBuckets);
    const SimMs needed = span / max + (span % max != 0 ? 1 : 0);
    while (rec_.bucketMs < needed) {
      coarsen();
    }
  }

  void coarsen() {
    std::vector<SimMs>& b = rec_.bucketGpuMs;
    for (std::size_t i = 0; i < b.size(); i += 2) {
      b[i / 2] = b[i] + (i + 1 < b.size() ? b[i + 1] : 0);
    }
    b.resize((b.size() + 1) / 2);
    rec_.bucketMs *= 2;
  }

  UsageRecord rec_;
  SimMs last_ = 0;
  std::uint64_t used_ = 0;
  bool started_ = false;
};

}  // namespace kc::sim
