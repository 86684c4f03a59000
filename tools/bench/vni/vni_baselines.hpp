#pragma once
// Baseline VNI allocators for bench_vni and bench_alloc (not production code). Same contract
// in all three: values of [min, max), the LOWEST free value first (the seed's first-fit),
// immediate reuse, no cooldown and no reserved values.
//  - SeedVniTable: the seed's own acquire (VNI Service, seed 002, initial version): every
//    acquire reads all allocated rows, builds a bool table of the whole range and takes the
//    first free entry. Values outside the range are skipped (the original panicked on them).
//  - OrderedFreeSetVni: what one would write without the seed: a std::set of free values;
//    acquire takes begin(), release inserts (O(log n) both).
//  - PersistentBitsetVni: the seed's first-fit without the per-call rebuild: a bitset kept
//    across calls, scanned 64 values per word from the low end (O(range / 64) worst case).
// The fair comparison for libcore's VniRange is the faster of the last two.

#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/vni_range.hpp"
#include "libcore/base/result.hpp"

namespace kc::bench {

using alloc::Vni;

// One seed acquire over the given allocated values: the first free value of [min, max), or
// nullopt when the range is full.
std::optional<Vni> seedFirstFreeVni(std::span<const Vni> allocated, Vni min, Vni max);

// The seed's allocator state: the allocated values as its table rows, nothing else.
class SeedVniTable {
 public:
  static constexpr const char* kName = "vni-seed-first-fit-rebuild";

  SeedVniTable(Vni min, Vni max) : min_(min), max_(max) {}

  // Rebuilds the bool table and takes the first free value ("exhausted" when full).
  Result<Vni> allocate();
  // Deletes the value's row (O(1), like the seed's indexed DELETE); "not_allocated" if absent.
  Status release(Vni vni);
  std::size_t allocatedCount() const { return rows_.size(); }

 private:
  Vni min_;
  Vni max_;
  std::vector<Vni> rows_;
  std::unordered_map<Vni, std::size_t> rowOf_;  // value -> index in rows_
};

class OrderedFreeSetVni {
 public:
  static constexpr const char* kName = "vni-ordered-free-set";

  OrderedFreeSetVni(Vni min, Vni max);
  Result<Vni> allocate();   // "exhausted" when full
  Status release(Vni vni);  // "not_allocated" when free or outside the range

 private:
  Vni min_;
  Vni max_;
  std::set<Vni> free_;
};

class PersistentBitsetVni {
 public:
  static constexpr const char* kName = "vni-persistent-bitset-first-fit";

  PersistentBitsetVni(Vni min, Vni max);
  Result<Vni> allocate();   // "exhausted" when full
  Status release(Vni vni);  // "not_allocated" when free or outside the range

 private:
  Vni min_;
  Vni max_;
  std::vector<std::uint64_t> used_;  // bit i of word w: value min + 64 w + i is allocated
};

}  // namespace kc::bench
