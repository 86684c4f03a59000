#pragma once
// Real-time admission (seed 003, RT-Kubernetes): may a pod's CPU reservation run on a node?
//
// A reservation is (runtime_us, period_us, cpus): `cpus` servers, each guaranteed runtime_us
// every period_us on its own core (the paper's rt_runtime, rt_period, rt_cpu). Each RT core
// may carry servers up to the node's per-core bound, sched_rt_runtime_us/sched_rt_period_us
// (0.95 by default). Servers are pinned to cores, so the exact test is per core: partitioned
// EDF, schedulable iff on every core the sum of runtime/period <= bound.
//
// Two tests live here:
//   (a) utilizationSumAdmits: the paper's scheduler test, sum over the node of
//       cpus*runtime/period <= limit * cores * bound. Kept only as a baseline: it is not
//       sound, e.g. three 0.51 servers on 2 cores of bound 1 sum to 1.53 <= 2 and pass, but no
//       core can hold two of them.
//   (b) placeReservation: per-core packing that returns the cores, first-fit (lowest cores
//       that fit; what the scheduler uses, so it agrees with the node) or worst-fit (the cores
//       with the most room; spreads load, as the original RT-Kubelet did).
//
// Arithmetic is exact and shared: a utilisation is an integer in parts per billion, rounded
// UP for a reservation and DOWN for the bound, computed in 128 bits. The scheduler and the
// node call these same functions on the same integers, so they can never disagree by
// rounding, and rounding can only make the test stricter than the real-number one.

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::alloc {

inline constexpr std::uint64_t kPpbPerUnit = 1'000'000'000;
// The kernel converts microseconds to nanoseconds in 64 bits: larger values overflow there.
inline constexpr std::uint64_t kMaxRtMicros = UINT64_MAX / 1000;
// More servers than this in one reservation is a typo, not a machine.
inline constexpr std::uint32_t kMaxRtCpus = 65'536;

struct RtReservation {
  std::uint64_t runtimeUs = 0;
  std::uint64_t periodUs = 0;
  std::uint32_t cpus = 0;
  friend bool operator==(const RtReservation&, const RtReservation&) = default;
};

// Errors ("invalid", message gives the reason): zero period, zero runtime, runtime > period,
// cpus = 0, a value beyond kMaxRtMicros / kMaxRtCpus (overflow).
Status validateReservation(const RtReservation& r);

// runtime/period in parts per billion, rounded up. Precondition: validateReservation(r) ok.
std::uint64_t utilizationPpb(const RtReservation& r);

// The per-core bound from the node's sysctls. sched_rt_runtime_us = -1 means "no limit"
// (bound 1). Errors ("invalid"): period <= 0, runtime < -1, runtime > period, values
// beyond kMaxRtMicros.
struct RtBound {
  std::uint64_t runtimeUs = 950'000;
  std::uint64_t periodUs = 1'000'000;
};
Result<RtBound> rtBoundFromSysctl(std::int64_t schedRtRuntimeUs, std::int64_t schedRtPeriodUs);
// runtime/period in parts per billion, rounded down.
std::uint64_t boundPpb(const RtBound& bound);

// Per-core RT load of one node, as the node publishes it: its RT cores (CPU ids) and the
// parts per billion already reserved on each.
class RtCoreState {
 public:
  // Cores are kept in ascending CPU id order (first-fit's order). Errors ("invalid"): no
  // cores, duplicate CPU ids, bad bound.
  static Result<RtCoreState> create(RtBound bound, std::vector<std::uint32_t> cpuIds);

  std::uint64_t boundPpb() const { return boundPpb_; }
  std::size_t coreCount() const { return cpuIds_.size(); }
  std::uint32_t cpuId(std::size_t core) const { return cpuIds_[core]; }
  std::uint64_t usedPpb(std::size_t core) const { return usedPpb_[core]; }
  std::uint64_t freePpb(std::size_t core) const { return boundPpb_ - usedPpb_[core]; }
  // Sum over cores (what the paper's sum test looks at).
  std::uint64_t totalUsedPpb() const { return totalUsedPpb_; }

  // Puts the reservation's servers on the given CPUs (cpus distinct ids of this node). All or
  // nothing. Errors: "invalid" (bad reservation, wrong count, unknown or repeated CPU),
  // "insufficient" (a core would exceed the bound).
  Status admit(const RtReservation& r, std::span<const std::uint32_t> cpuIds);
  // Takes them off again. Errors: "invalid" as above, "conflict" (more than is reserved there).
  Status release(const RtReservation& r, std::span<const std::uint32_t> cpuIds);

 private:
  RtCoreState(std::uint64_t boundPpb, std::vector<std::uint32_t> cpuIds);
  Result<std::vector<std::size_t>> coresOf(const RtReservation& r,
                                           std::span<const std::uint32_t> cpuIds) const;

  std::uint64_t boundPpb_;
  std::vector<std::uint32_t> cpuIds_;
  std::vector<std::uint64_t> usedPpb_;
  std::uint64_t totalUsedPpb_ = 0;
  std::unordered_map<std::uint32_t, std::size_t> coreOfCpu_;
};

// (a) The paper's utilization-sum test (unsound baseline): admitted iff
// totalUsed + cpus*u <= limitNum/limitDen * cores * bound. The original used limit 0.8
// (RTSafetyUtilizationFactor); 1/1 is the plain test. limitDen = 0 never admits.
bool utilizationSumAdmits(const RtCoreState& node, const RtReservation& r,
                          std::uint64_t limitNum = 1, std::uint64_t limitDen = 1);

// (b) Per-core packing. The policies, by registry name:
struct RtPacking {
  std::string_view name;
  std::string_view description;
  bool worstFit;
};
struct FirstFitRtPacking {
  static constexpr std::string_view kName = "first-fit";
  static constexpr std::string_view kDescription =
      "lowest-numbered cores that still fit (scheduler and node agree)";
};
struct WorstFitRtPacking {
  static constexpr std::string_view kName = "worst-fit";
  static constexpr std::string_view kDescription = "cores with the most room left (spreads load)";
};
std::span<const RtPacking> rtPackings();
// Error "not_found" listing the known names.
Result<RtPacking> findRtPacking(std::string_view name);

// The CPU ids (ascending) on which the reservation's servers go, or an error: "invalid"
// (bad reservation), "insufficient" (fewer than cpus cores have room; message says how many).
// Nothing is changed; call admit() with the result to commit it.
Result<std::vector<std::uint32_t>> placeReservation(const RtCoreState& node, const RtReservation& r,
                                                    const RtPacking& packing);

}  // namespace kc::alloc
