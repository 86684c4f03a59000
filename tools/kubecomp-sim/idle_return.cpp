#include "tools/kubecomp-sim/idle_return.hpp"

#include <algorithm>

#include "libcore/alloc/idle_timeout.hpp"

namespace kc::sim {

std::optional<SimMs> IdleReturns::idleFrom(alloc::GpuIndex g, SimMs since) {
  if (!enabled()) {
    return std::nullopt;
  }
  since_[g] = since;
  SimMs due = 0;
  if (__builtin_add_overflow(since, timeout_, &due) || due > kMaxSimMs) {
    return std::nullopt;
  }
  return due;
}

bool IdleReturns::expired(const alloc::ClusterState& state, alloc::GpuIndex g, SimMs now) const {
  return alloc::idleExpired(state, g, since_[g], now, timeout_);
}

std::uint32_t IdleReturns::start(bool waiting) {
  const auto id = static_cast<std::uint32_t>(waited_.size());
  waited_.push_back(waiting);
  active_.push_back(id);
  return id;
}

void IdleReturns::podsWaiting() {
  for (std::uint32_t id : active_) {
    waited_[id] = true;
  }
}

bool IdleReturns::land(std::uint32_t id) {
  if (auto it = std::find(active_.begin(), active_.end(), id); it != active_.end()) {
    *it = active_.back();
    active_.pop_back();
  }
  return waited_[id];
}

}  // namespace kc::sim
