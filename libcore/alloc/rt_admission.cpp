#include "libcore/alloc/rt_admission.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

namespace kc::alloc {
namespace {

__extension__ typedef unsigned __int128 U128;  // GCC/Clang; __extension__ keeps -Wpedantic quiet

std::string str(std::uint64_t v) {
  return std::to_string(v);
}

std::string describe(const RtReservation& r) {
  return "reservation (runtime " + str(r.runtimeUs) + " us, period " + str(r.periodUs) +
         " us, cpus " + str(r.cpus) + ")";
}

constexpr std::array kPackings{
    RtPacking{FirstFitRtPacking::kName, FirstFitRtPacking::kDescription, false},
    RtPacking{WorstFitRtPacking::kName, WorstFitRtPacking::kDescription, true},
};

}  // namespace

Status validateReservation(const RtReservation& r) {
  auto bad = [&](const std::string& why) {
    return makeError(kc::errc::kInvalid, describe(r) + ": " + why);
  };
  if (r.periodUs == 0) {
    return bad("period is zero");
  }
  if (r.runtimeUs == 0) {
    return bad("runtime is zero (no real-time time at all)");
  }
  if (r.runtimeUs > r.periodUs) {
    return bad("runtime exceeds period");
  }
  if (r.cpus == 0) {
    return bad("cpus is zero");
  }
  if (r.periodUs > kMaxRtMicros) {
    return bad("period overflows the kernel's nanosecond arithmetic (max " + str(kMaxRtMicros) +
               " us)");
  }
  if (r.cpus > kMaxRtCpus) {
    return bad("cpus overflows the limit of " + str(kMaxRtCpus));
  }
  return okStatus();
}

std::uint64_t utilizationPpb(const RtReservation& r) {
  const U128 scaled = static_cast<U128>(r.runtimeUs) * kPpbPerUnit;
  return static_cast<std::uint64_t>((scaled + r.periodUs - 1) / r.periodUs);  // ceil, <= 1e9
}

Result<RtBound> rtBoundFromSysctl(std::int64_t runtimeUs, std::int64_t periodUs) {
  const std::string what = "sched_rt_runtime_us=" + std::to_string(runtimeUs) +
                           " sched_rt_period_us=" + std::to_string(periodUs);
  if (periodUs <= 0) {
    return makeError(kc::errc::kInvalid, what + ": period must be positive");
  }
  if (static_cast<std::uint64_t>(periodUs) > kMaxRtMicros) {
    return makeError(kc::errc::kInvalid, what + ": period overflows");
  }
  if (runtimeUs == -1) {  // RUNTIME_INF: RT tasks may use the whole core
    return RtBound{static_cast<std::uint64_t>(periodUs), static_cast<std::uint64_t>(periodUs)};
  }
  if (runtimeUs < 0) {
    return makeError(kc::errc::kInvalid, what + ": runtime must be -1 or non-negative");
  }
  if (runtimeUs > periodUs) {
    return makeError(kc::errc::kInvalid, what + ": runtime exceeds period");
  }
  return RtBound{static_cast<std::uint64_t>(runtimeUs), static_cast<std::uint64_t>(periodUs)};
}

std::uint64_t boundPpb(const RtBound& bound) {
  if (bound.periodUs == 0) {
    return 0;
  }
  const U128 scaled = static_cast<U128>(std::min(bound.runtimeUs, bound.periodUs)) * kPpbPerUnit;
  return static_cast<std::uint64_t>(scaled / bound.periodUs);  // floor
}

RtCoreState::RtCoreState(std::uint64_t bound, std::vector<std::uint32_t> cpuIds)
    : boundPpb_(bound), cpuIds_(std::move(cpuIds)), usedPpb_(cpuIds_.size(), 0) {
  coreOfCpu_.reserve(cpuIds_.size());
  for (std::size_t i = 0; i < cpuIds_.size(); ++i) {
    coreOfCpu_.emplace(cpuIds_[i], i);
  }
}

Result<RtCoreState> RtCoreState::create(RtBound bound, std::vector<std::uint32_t> cpuIds) {
  if (cpuIds.empty()) {
    return makeError(kc::errc::kInvalid, "a real-time node needs at least one RT core");
  }
  if (bound.periodUs == 0 || bound.runtimeUs > bound.periodUs || bound.periodUs > kMaxRtMicros) {
    return makeError(kc::errc::kInvalid, "bad per-core bound: runtime " + str(bound.runtimeUs) +
                                             " us / period " + str(bound.periodUs) + " us");
  }
  std::sort(cpuIds.begin(), cpuIds.end());  // core order = CPU id order
  if (std::adjacent_find(cpuIds.begin(), cpuIds.end()) != cpuIds.end()) {
    return makeError(kc::errc::kInvalid, "duplicate CPU id in the RT core list");
  }
  return RtCoreState(kc::alloc::boundPpb(bound), std::move(cpuIds));
}

Result<std::vector<std::size_t>> RtCoreState::coresOf(const RtReservation& r,
                                                      std::span<const std::uint32_t> cpuIds) const {
  if (auto s = validateReservation(r); !s) {
    return s.error();
  }
  if (cpuIds.size() != r.cpus) {
    return makeError(kc::errc::kInvalid, describe(r) + ": " + str(cpuIds.size()) + " CPUs given");
  }
  std::vector<std::size_t> cores;
  cores.reserve(cpuIds.size());
  for (std::uint32_t cpu : cpuIds) {
    auto it = coreOfCpu_.find(cpu);
    if (it == coreOfCpu_.end()) {
      return makeError(kc::errc::kInvalid, "CPU " + str(cpu) + " is not an RT core of this node");
    }
    if (std::find(cores.begin(), cores.end(), it->second) != cores.end()) {
      return makeError(kc::errc::kInvalid,
                       "CPU " + str(cpu) + " given twice: servers need distinct cores");
    }
    cores.push_back(it->second);
  }
  return cores;
}

Status RtCoreState::admit(const RtReservation& r, std::span<const std::uint32_t> cpuIds) {
  auto cores = coresOf(r, cpuIds);
  if (!cores) {
    return cores.error();
  }
  const std::uint64_t u = utilizationPpb(r);
  for (std::size_t c : *cores) {
    if (u > freePpb(c)) {
      return makeError(kc::errc::kInsufficient, describe(r) + " does not fit on CPU " +
                                                    str(cpuIds_[c]) + ": " + str(usedPpb_[c]) +
                                                    " of " + str(boundPpb_) + " ppb used, needs " +
                                                    str(u));
    }
  }
  for (std::size_t c : *cores) {
    usedPpb_[c] += u;
  }
  totalUsedPpb_ += u * cores->size();
  return okStatus();
}

Status RtCoreState::release(const RtReservation& r, std::span<const std::uint32_t> cpuIds) {
  auto cores = coresOf(r, cpuIds);
  if (!cores) {
    return cores.error();
  }
  const std::uint64_t u = utilizationPpb(r);
  for (std::size_t c : *cores) {
    if (u > usedPpb_[c]) {
      return makeError(kc::errc::kConflict,
                       describe(r) + " is not reserved on CPU " + str(cpuIds_[c]));
    }
  }
  for (std::size_t c : *cores) {
    usedPpb_[c] -= u;
  }
  totalUsedPpb_ -= u * cores->size();
  return okStatus();
}

bool utilizationSumAdmits(const RtCoreState& node, const RtReservation& r, std::uint64_t limitNum,
                          std::uint64_t limitDen) {
  if (!validateReservation(r) || limitDen == 0) {
    return false;
  }
  // total + cpus*u <= num/den * cores * bound, cross-multiplied: no division, no rounding.
  const U128 demand =
      static_cast<U128>(node.totalUsedPpb()) + static_cast<U128>(r.cpus) * utilizationPpb(r);
  const U128 lhs = demand * limitDen;
  const U128 rhs = static_cast<U128>(limitNum) * node.coreCount() * node.boundPpb();
  return lhs <= rhs;
}

std::span<const RtPacking> rtPackings() {
  return kPackings;
}

Result<RtPacking> findRtPacking(std::string_view name) {
  for (const RtPacking& p : kPackings) {
    if (p.name == name) {
      return p;
    }
  }
  return makeError(kc::errc::kNotFound,
                   "unknown RT packing '" + std::string(name) + "' (known: first-fit, worst-fit)");
}

Result<std::vector<std::uint32_t>> placeReservation(const RtCoreState& node, const RtReservation& r,
                                                    const RtPacking& packing) {
  if (auto s = validateReservation(r); !s) {
    return s.error();
  }
  const std::uint64_t u = utilizationPpb(r);
  std::vector<std::size_t> fitting;
  fitting.reserve(node.coreCount());
  for (std::size_t c = 0; c < node.coreCount(); ++c) {
    if (node.freePpb(c) >= u) {
      fitting.push_back(c);
      if (!packing.worstFit && fitting.size() == r.cpus) {
        break;  // first fit: the lowest cores that fit
      }
    }
  }
  if (fitting.size() < r.cpus) {
    return makeError(kc::errc::kInsufficient, describe(r) + " needs " + str(r.cpus) +
                                                  " cores with " + str(u) + " ppb free; " +
                                                  str(fitting.size()) + " of " +
                                                  str(node.coreCount()) + " have room");
  }
  if (packing.worstFit) {
    // Most room first; equal room: lower core first. Only the first cpus matter.
    std::partial_sort(fitting.begin(), fitting.begin() + r.cpus, fitting.end(),
                      [&](std::size_t a, std::size_t b) {
                        if (node.usedPpb(a) != node.usedPpb(b)) {
                          return node.usedPpb(a) < node.usedPpb(b);
                        }
                        return a < b;
                      });
  }
  std::vector<std::uint32_t> cpus;
  cpus.reserve(r.cpus);
  for (std::size_t i = 0; i < r.cpus; ++i) {
    cpus.push_back(node.cpuId(fitting[i]));
  }
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

}  // namespace kc::alloc
