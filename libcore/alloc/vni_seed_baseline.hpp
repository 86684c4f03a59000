#pragma once
// The seed's VNI acquire (VNI Service, seed 002, initial version), kept only as a baseline for
// benchmarks: every acquire reads all allocated VNIs, builds a bool table of the whole range
// [min, max), and takes the FIRST free entry (first-fit, immediate reuse, no cooldown, no
// reserved values). Values outside the range are skipped here (the original panicked on them).

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "libcore/alloc/vni_range.hpp"

namespace kc::alloc {

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

}  // namespace kc::alloc
