#pragma once
// VniRange: the Slingshot VNI allocator of the VNI service (seed 002), pure and deterministic.
//
// The range is half-open [min, max) with max <= 65536 (a VNI is 16 bits, see the CXI driver's
// is_vni_valid). 0 is never issued (invalid on the NIC) and neither is any value in the reserved
// set (by default 1 and 10, the VNIs of the default CXI service).
//
// Allocation is next-fit (round-robin from the last value handed out, as Slurm's hpe_slingshot
// plugin does) over a two-level bitmap, so one allocation inspects at most a few dozen machine
// words whatever the fill level: O(1) for the 16-bit VNI space, instead of the seed's rebuild of
// a bool table of the whole range on every acquire. A released value is not handed out again
// until a cooldown has passed (stale CXI services may still hold it). Time is a parameter: the
// caller passes its clock's reading, this unit never reads one.

#include <array>
#include <chrono>
#include <cstdint>
#include <queue>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "libcore/base/result.hpp"

namespace kc::alloc {

using Vni = std::uint32_t;
// A reading of the caller's clock (any epoch, e.g. Unix milliseconds). Only differences matter.
using VniTime = std::chrono::milliseconds;

inline constexpr Vni kVniLimit = 65536;  // exclusive upper bound of the 16-bit VNI space
inline constexpr Vni kDefaultVniMin = 1024;
inline constexpr Vni kDefaultVniMax = 65535;  // exclusive, as the seed's [vniMin, vniMax)
// 0 is invalid on the NIC; 1 and 10 belong to the default CXI service.
inline constexpr std::array<Vni, 3> kDefaultReservedVnis{0, 1, 10};
inline constexpr VniTime kDefaultVniCooldown{60'000};

struct VniRangeOptions {
  Vni min = kDefaultVniMin;
  Vni max = kDefaultVniMax;  // exclusive
  std::vector<Vni> reserved{kDefaultReservedVnis.begin(), kDefaultReservedVnis.end()};
  VniTime cooldown = kDefaultVniCooldown;  // 0: a released value is free at once
};

// Where a value stands. Values outside [min, max) are OutOfRange.
enum class VniState : std::uint8_t { Free, Allocated, CoolingDown, Reserved, OutOfRange };

struct VniCounts {
  std::uint32_t capacity = 0;   // values in [min, max) that may ever be issued (excludes reserved)
  std::uint32_t allocated = 0;  // held by an owner
  std::uint32_t cooling = 0;    // released, waiting for the cooldown to pass
  std::uint32_t free = 0;       // capacity - allocated - cooling
};

class VniRange {
 public:
  static constexpr const char* kName = "vni-next-fit-cooldown";

  // Errors ("invalid"): min >= max, max > 65536, negative cooldown, empty issuable set.
  static Result<VniRange> create(const VniRangeOptions& options);

  // Next free value after the last one handed out (wrapping), whose cooldown has passed at
  // `now`. Error "exhausted" (message names the range and how many are held/cooling) when
  // none is; nothing changes then.
  Result<Vni> allocate(VniTime now);

  // Gives `vni` back; it becomes issuable again at now + cooldown. Errors: "out_of_range",
  // "not_allocated" (state unchanged: a double release is harmless but reported).
  Status release(Vni vni, VniTime now);

  // Marks `vni` as allocated, for recovery from durable state. A value that is cooling down is
  // taken out of cooldown (the durable record wins). Errors: "out_of_range", "reserved",
  // "conflict" (already allocated).
  Status reserve(Vni vni);

  // Recovery of a value released at `releasedAt` (e.g. before a restart): it cools down until
  // releasedAt + cooldown. Errors as reserve; a value already cooling keeps the later deadline.
  Status restoreCooldown(Vni vni, VniTime releasedAt);

  // Where the next-fit search starts (the value after `last`); for recovery across restarts.
  void setLastAllocated(Vni last);
  Vni lastAllocated() const { return last_; }

  // Makes every value whose cooldown has passed at `now` issuable (allocate does this itself;
  // call it before counts() or state() to see current figures).
  void advanceTo(VniTime now);

  bool isAllocated(Vni vni) const { return state(vni) == VniState::Allocated; }
  // State without applying expired cooldowns: a CoolingDown value may already be issuable
  // at a later `now`; see cooldownEnds.
  VniState state(Vni vni) const;
  // When a cooling value becomes issuable (only meaningful if state() is CoolingDown).
  VniTime cooldownEnds(Vni vni) const;

  VniCounts counts() const;
  Vni min() const { return min_; }
  Vni max() const { return max_; }
  VniTime cooldown() const { return cooldown_; }

 private:
  VniRange(Vni min, Vni max, VniTime cooldown);

  std::uint32_t index(Vni vni) const { return vni - min_; }
  bool inRange(Vni vni) const { return vni >= min_ && vni < max_; }
  void markFree(std::uint32_t i);
  void markTaken(std::uint32_t i);
  bool isFreeBit(std::uint32_t i) const;
  // First free index at or after `from`, wrapping once; -1 if none.
  std::int64_t findFreeFrom(std::uint32_t from) const;

  struct CoolingEntry {
    VniTime readyAt;
    Vni vni;
    bool operator>(const CoolingEntry& other) const { return readyAt > other.readyAt; }
  };

  Vni min_;
  Vni max_;
  VniTime cooldown_;
  Vni last_;  // last value handed out; the search starts after it
  std::uint32_t size_;
  // Level 0: bit i set <=> min_+i is free (issuable now). Level 1: bit w set <=> word w of
  // level 0 has a set bit. 65536 values = 1024 + 16 words.
  std::vector<std::uint64_t> free0_;
  std::vector<std::uint64_t> free1_;
  std::vector<VniState> states_;
  std::uint32_t reservedInRange_ = 0;
  std::uint32_t allocated_ = 0;
  // Cooling values: deadline per value, plus a min-heap of deadlines. A heap entry whose
  // deadline no longer matches the map (value re-reserved or re-released) is stale and skipped.
  std::unordered_map<Vni, VniTime> coolingUntil_;
  std::priority_queue<CoolingEntry, std::vector<CoolingEntry>, std::greater<>> coolingHeap_;
};

}  // namespace kc::alloc
