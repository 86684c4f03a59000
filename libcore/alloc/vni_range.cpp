#include "libcore/alloc/vni_range.hpp"

#include <bit>
#include <string>

namespace kc::alloc {

namespace {

constexpr std::uint32_t kWordBits = 64;

std::string rangeText(Vni min, Vni max) {
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string.
  std::string text("[");
  text.append(std::to_string(min)).append(", ").append(std::to_string(max)).append(")");
  return text;
}

}  // namespace

Result<VniRange> VniRange::create(const VniRangeOptions& options) {
  if (options.min >= options.max) {
    return makeError(kc::errc::kInvalid, "VNI range " + rangeText(options.min, options.max) +
                                             " is empty: min must be below max");
  }
  if (options.max > kVniLimit) {
    return makeError(kc::errc::kInvalid, "VNI range " + rangeText(options.min, options.max) +
                                             " exceeds the 16-bit VNI space (max <= 65536)");
  }
  if (options.cooldown.count() < 0) {
    return makeError(kc::errc::kInvalid, "VNI cooldown must not be negative");
  }
  VniRange range(options.min, options.max, options.cooldown);
  auto reserve = [&range](Vni v) {
    if (range.inRange(v) && range.states_[range.index(v)] != VniState::Reserved) {
      range.markTaken(range.index(v));
      range.states_[range.index(v)] = VniState::Reserved;
      ++range.reservedInRange_;
    }
  };
  reserve(0);  // invalid on every NIC, whatever the caller's reserved set says
  for (Vni v : options.reserved) {
    reserve(v);
  }
  if (range.reservedInRange_ == range.size_) {
    return makeError(kc::errc::kInvalid, "VNI range " + rangeText(options.min, options.max) +
                                             " holds only reserved values");
  }
  return range;
}

VniRange::VniRange(Vni min, Vni max, VniTime cooldown)
    : min_(min),
      max_(max),
      cooldown_(cooldown),
      last_(max - 1),  // so the first search starts at min
      size_(max - min),
      free0_((size_ + kWordBits - 1) / kWordBits, 0),
      free1_((free0_.size() + kWordBits - 1) / kWordBits, 0),
      states_(size_, VniState::Free) {
  for (std::uint32_t i = 0; i < size_; ++i) {
    markFree(i);
  }
}

void VniRange::markFree(std::uint32_t i) {
  const std::uint32_t w = i / kWordBits;
  free0_[w] |= std::uint64_t{1} << (i % kWordBits);
  free1_[w / kWordBits] |= std::uint64_t{1} << (w % kWordBits);
}

void VniRange::markTaken(std::uint32_t i) {
  const std::uint32_t w = i / kWordBits;
  free0_[w] &= ~(std::uint64_t{1} << (i % kWordBits));
  if (free0_[w] == 0) {
    free1_[w / kWordBits] &= ~(std::uint64_t{1} << (w % kWordBits));
  }
}

bool VniRange::isFreeBit(std::uint32_t i) const {
  return (free0_[i / kWordBits] >> (i % kWordBits)) & 1U;
}

std::int64_t VniRange::findFreeFrom(std::uint32_t from) const {
  // 1) the rest of from's word; 2) later words via the summary; 3) wrap to the start.
  auto searchWords = [this](std::uint32_t firstWord, std::uint32_t endWord) -> std::int64_t {
    // Words in [firstWord, endWord) with a free bit, found through level 1.
    for (std::uint32_t s = firstWord / kWordBits; s * kWordBits < endWord; ++s) {
      std::uint64_t summary = free1_[s];
      const std::uint32_t base = s * kWordBits;
      if (firstWord > base) {
        summary &= ~std::uint64_t{0} << (firstWord - base);
      }
      if (endWord < base + kWordBits) {
        summary &= (std::uint64_t{1} << (endWord - base)) - 1;
      }
      if (summary != 0) {
        const std::uint32_t w = base + static_cast<std::uint32_t>(std::countr_zero(summary));
        return static_cast<std::int64_t>(w) * kWordBits + std::countr_zero(free0_[w]);
      }
    }
    return -1;
  };
  const std::uint32_t words = static_cast<std::uint32_t>(free0_.size());
  const std::uint32_t w = from / kWordBits;
  const std::uint64_t rest = free0_[w] & (~std::uint64_t{0} << (from % kWordBits));
  if (rest != 0) {
    return static_cast<std::int64_t>(w) * kWordBits + std::countr_zero(rest);
  }
  if (std::int64_t found = searchWords(w + 1, words); found >= 0) {
    return found;
  }
  // Wrap: words [0, w], whose bits below `from` in word w are the only ones not yet seen.
  return searchWords(0, w + 1);
}

void VniRange::advanceTo(VniTime now) {
  while (!coolingHeap_.empty() && coolingHeap_.top().readyAt <= now) {
    const CoolingEntry entry = coolingHeap_.top();
    coolingHeap_.pop();
    auto it = coolingUntil_.find(entry.vni);
    if (it == coolingUntil_.end() || it->second != entry.readyAt) {
      continue;  // stale: the value was reserved or re-released since
    }
    coolingUntil_.erase(it);
    states_[index(entry.vni)] = VniState::Free;
    markFree(index(entry.vni));
  }
}

Result<Vni> VniRange::allocate(VniTime now) {
  advanceTo(now);
  std::uint32_t from = (last_ >= min_ && last_ + 1 < max_) ? index(last_ + 1) : 0;
  const std::int64_t found = findFreeFrom(from);
  if (found < 0) {
    const VniCounts c = counts();
    return makeError(kc::errc::kExhausted, "VNI range " + rangeText(min_, max_) + " exhausted: " +
                                               std::to_string(c.allocated) + " allocated, " +
                                               std::to_string(c.cooling) + " cooling down, " +
                                               std::to_string(reservedInRange_) + " reserved");
  }
  const auto i = static_cast<std::uint32_t>(found);
  markTaken(i);
  states_[i] = VniState::Allocated;
  ++allocated_;
  last_ = min_ + i;
  return last_;
}

Status VniRange::release(Vni vni, VniTime now) {
  if (!inRange(vni)) {
    return makeError(kc::errc::kOutOfRange,
                     "VNI " + std::to_string(vni) + " is outside " + rangeText(min_, max_));
  }
  const std::uint32_t i = index(vni);
  if (states_[i] != VniState::Allocated) {
    return makeError(kc::errc::kNotAllocated, "VNI " + std::to_string(vni) + " is not allocated");
  }
  --allocated_;
  if (cooldown_.count() == 0) {
    states_[i] = VniState::Free;
    markFree(i);
    return okStatus();
  }
  states_[i] = VniState::CoolingDown;
  const VniTime readyAt = now + cooldown_;
  coolingUntil_[vni] = readyAt;
  coolingHeap_.push(CoolingEntry{readyAt, vni});
  return okStatus();
}

Status VniRange::reserve(Vni vni) {
  if (!inRange(vni)) {
    return makeError(kc::errc::kOutOfRange,
                     "VNI " + std::to_string(vni) + " is outside " + rangeText(min_, max_));
  }
  const std::uint32_t i = index(vni);
  switch (states_[i]) {
    case VniState::Reserved:
      return makeError(kc::errc::kReserved,
                       "VNI " + std::to_string(vni) + " is reserved and never issued");
    case VniState::Allocated:
      return makeError(kc::errc::kConflict, "VNI " + std::to_string(vni) + " is already allocated");
    case VniState::CoolingDown:
      coolingUntil_.erase(vni);  // its heap entry becomes stale
      break;
    case VniState::Free:
      markTaken(i);
      break;
    case VniState::OutOfRange:
      break;
  }
  states_[i] = VniState::Allocated;
  ++allocated_;
  return okStatus();
}

Status VniRange::restoreCooldown(Vni vni, VniTime releasedAt) {
  if (!inRange(vni)) {
    return makeError(kc::errc::kOutOfRange,
                     "VNI " + std::to_string(vni) + " is outside " + rangeText(min_, max_));
  }
  const std::uint32_t i = index(vni);
  const VniTime readyAt = releasedAt + cooldown_;
  switch (states_[i]) {
    case VniState::Reserved:
      return makeError(kc::errc::kReserved,
                       "VNI " + std::to_string(vni) + " is reserved and never issued");
    case VniState::Allocated:
      return makeError(kc::errc::kConflict, "VNI " + std::to_string(vni) + " is allocated");
    case VniState::CoolingDown:
      if (coolingUntil_[vni] >= readyAt) {
        return okStatus();
      }
      break;
    case VniState::Free:
      if (cooldown_.count() == 0) {
        return okStatus();
      }
      markTaken(i);
      break;
    case VniState::OutOfRange:
      break;
  }
  states_[i] = VniState::CoolingDown;
  coolingUntil_[vni] = readyAt;
  coolingHeap_.push(CoolingEntry{readyAt, vni});
  return okStatus();
}

void VniRange::setLastAllocated(Vni last) {
  // A value outside the range (e.g. read back after the range changed) restarts the search at
  // min, as after construction.
  last_ = inRange(last) ? last : max_ - 1;
}

VniState VniRange::state(Vni vni) const {
  return inRange(vni) ? states_[index(vni)] : VniState::OutOfRange;
}

VniTime VniRange::cooldownEnds(Vni vni) const {
  auto it = coolingUntil_.find(vni);
  return it == coolingUntil_.end() ? VniTime{0} : it->second;
}

VniCounts VniRange::counts() const {
  VniCounts c;
  c.capacity = size_ - reservedInRange_;
  c.allocated = allocated_;
  c.cooling = static_cast<std::uint32_t>(coolingUntil_.size());
  c.free = c.capacity - c.allocated - c.cooling;
  return c;
}

}  // namespace kc::alloc
