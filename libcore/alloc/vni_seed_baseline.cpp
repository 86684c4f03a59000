#include "libcore/alloc/vni_seed_baseline.hpp"

#include <algorithm>
#include <string>

namespace kc::alloc {

std::optional<Vni> seedFirstFreeVni(std::span<const Vni> allocated, Vni min, Vni max) {
  if (min >= max) {
    return std::nullopt;
  }
  // The seed allocates a fresh table of max-min entries on every call.
  std::vector<bool> table(max - min, false);
  for (Vni v : allocated) {
    if (v >= min && v < max) {
      table[v - min] = true;
    }
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (!table[i]) {
      return static_cast<Vni>(min + i);
    }
  }
  return std::nullopt;
}

Result<Vni> SeedVniTable::allocate() {
  const std::optional<Vni> v = seedFirstFreeVni(rows_, min_, max_);
  if (!v) {
    return makeError(kc::errc::kExhausted, "no free VNI in [" + std::to_string(min_) + ", " +
                                      std::to_string(max_) + ")");
  }
  rowOf_[*v] = rows_.size();
  rows_.push_back(*v);
  return *v;
}

Status SeedVniTable::release(Vni vni) {
  auto it = rowOf_.find(vni);
  if (it == rowOf_.end()) {
    return makeError(kc::errc::kNotAllocated, "VNI " + std::to_string(vni) + " is not allocated");
  }
  const std::size_t i = it->second;
  rowOf_.erase(it);
  if (i + 1 != rows_.size()) {
    rows_[i] = rows_.back();
    rowOf_[rows_[i]] = i;
  }
  rows_.pop_back();
  return okStatus();
}

}  // namespace kc::alloc
