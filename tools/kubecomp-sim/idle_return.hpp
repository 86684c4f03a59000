#pragma once
// The engine's side of the idle-timeout return (alloc::IdleTimeoutReturnPolicy,
// libcore/alloc/idle_timeout.hpp): when each GPU last became idle where it is, and the returns
// (detaches back to the pool) in flight, with whether some pod waited during each. The decision
// itself is alloc::idleExpired; the engine schedules the checks and the fabric. Internal to
// kc_sim.

#include <cstdint>
#include <optional>
#include <vector>

#include "libcore/alloc/pool_model.hpp"
#include "tools/kubecomp-sim/job.hpp"

namespace kc::sim {

class IdleReturns {
 public:
  // `gpus`: the cluster's GPUs, 0 when idle returns are off (the engine then asks nothing).
  IdleReturns(std::size_t gpus, SimMs timeout) : since_(gpus, 0), timeout_(timeout) {}
  bool enabled() const { return !since_.empty(); }

  // GPU g is free where it is from `since` on. Returns when to check it (since + timeout), or
  // nothing when returns are off or that is past the simulated-time limit (it stays attached).
  std::optional<SimMs> idleFrom(alloc::GpuIndex g, SimMs since);
  // Whether g, checked now, goes back to the pool (it may have been used since).
  bool expired(const alloc::ClusterState& state, alloc::GpuIndex g, SimMs now) const;

  // A return starts now; `waiting`: some pod waits now. Returns its id (for land()).
  std::uint32_t start(bool waiting);
  // Some pod waits now: every return in flight is paid while a pod waited.
  void podsWaiting();
  // Return `id` landed; whether some pod waited during its flight.
  bool land(std::uint32_t id);

 private:
  std::vector<SimMs> since_;  // per GPU: when it last became idle where it is
  SimMs timeout_;
  std::vector<bool> waited_;           // per return id
  std::vector<std::uint32_t> active_;  // ids in flight (queued on a pool's fabric or moving)
};

}  // namespace kc::sim
