#include "tools/bench/vni/vni_baselines.hpp"

#include <bit>
#include <string>

namespace kc::bench {

namespace {

Error exhausted(Vni min, Vni max) {
  return makeError("exhausted",
                   "no free VNI in [" + std::to_string(min) + ", " + std::to_string(max) + ")");
}

Error notAllocated(Vni vni) {
  return makeError("not_allocated", "VNI " + std::to_string(vni) + " is not allocated");
}

}  // namespace

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
    return exhausted(min_, max_);
  }
  rowOf_[*v] = rows_.size();
  rows_.push_back(*v);
  return *v;
}

Status SeedVniTable::release(Vni vni) {
  auto it = rowOf_.find(vni);
  if (it == rowOf_.end()) {
    return notAllocated(vni);
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

OrderedFreeSetVni::OrderedFreeSetVni(Vni min, Vni max) : min_(min), max_(max) {
  for (Vni v = min; v < max; ++v) {
    free_.insert(free_.end(), v);
  }
}

Result<Vni> OrderedFreeSetVni::allocate() {
  if (free_.empty()) {
    return exhausted(min_, max_);
  }
  const Vni v = *free_.begin();
  free_.erase(free_.begin());
  return v;
}

Status OrderedFreeSetVni::release(Vni vni) {
  if (vni < min_ || vni >= max_ || !free_.insert(vni).second) {
    return notAllocated(vni);
  }
  return okStatus();
}

PersistentBitsetVni::PersistentBitsetVni(Vni min, Vni max)
    : min_(min), max_(max), used_(max > min ? (max - min + 63) / 64 : 0, 0) {
  // Bits past the end of the range count as used, so the scan never returns them.
  if (const Vni tail = (max_ - min_) % 64; max_ > min_ && tail != 0) {
    used_.back() = ~std::uint64_t{0} << tail;
  }
}

Result<Vni> PersistentBitsetVni::allocate() {
  for (std::size_t w = 0; w < used_.size(); ++w) {
    if (used_[w] != ~std::uint64_t{0}) {
      const int bit = std::countr_one(used_[w]);
      used_[w] |= std::uint64_t{1} << bit;
      return static_cast<Vni>(min_ + w * 64 + static_cast<std::size_t>(bit));
    }
  }
  return exhausted(min_, max_);
}

Status PersistentBitsetVni::release(Vni vni) {
  if (vni < min_ || vni >= max_) {
    return notAllocated(vni);
  }
  const std::size_t i = vni - min_;
  const std::uint64_t mask = std::uint64_t{1} << (i % 64);
  if ((used_[i / 64] & mask) == 0) {
    return notAllocated(vni);
  }
  used_[i / 64] &= ~mask;
  return okStatus();
}

}  // namespace kc::bench
