#pragma once
// Whether the GPU pool of a reservation's node can still supply it (issue 24 §6). A reservation
// waits for reconfig-mgr to move GPUs to its node; when the pool shrinks meanwhile (GPUs
// quarantined after a chassis lied about a move, GPUs gone from the inventory), one the pool
// can no longer serve would keep the GPUs it holds until the reservation timeout while pods the
// pool could serve wait behind it. The scheduler re-checks each waiting reservation, oldest
// first, with this count and cancels one the pool cannot serve.
//
// The count is optimistic, so a reservation is never cancelled for a shortage that may not be
// real: every GPU of the pool that could still run a pod counts (healthy ones attached to a node
// of the pool or unattached, draining ones included since a GPU in flight is draining; an
// unhealthy one only while a pod uses it), pods placed earlier (bound, assumed or reserved
// before it) are assumed to use the GPUs of models this pod does not accept first, and the
// reservations made after it are not counted at all.
//
//   servable  <=>  usable(accepted) - max(0, heldEarlier - usable(other models)) >= request

#include <cstdint>
#include <optional>
#include <string>

#include "libcore/alloc/gpu_model.hpp"
#include "services/kubecomp-sched/cluster_model.hpp"

namespace kc::sched {

struct PoolSupply {
  std::string pool;              // the GPUPool whose spec lists the node; "" none
  std::int64_t accepted = 0;     // usable GPUs of a model the pod accepts
  std::int64_t otherModels = 0;  // usable GPUs of the other models
  std::int64_t held = 0;         // kubecomp.io/gpu held on the pool's nodes (every holder)
};

// The pool of `node` as a reservation there sees it. Reads model.usage(): refresh() first.
PoolSupply poolSupply(const ClusterModel& model, const std::string& node,
                      const alloc::GpuModelFilter& models);

// The GPUPool whose spec lists `node` (the first by name, as the model assigns it); "" none.
std::string poolOfNode(const ClusterModel& model, const std::string& node);

// Why the pool can no longer serve a reservation of `gpus` GPUs on `node`, or nullopt when it
// may. `heldByLater`: kubecomp.io/gpu of this pod and of the reservations made after it on
// the pool's nodes (they do not count against it).
std::optional<std::string> unservableReservation(const PoolSupply& supply, const std::string& node,
                                                 std::int64_t gpus, std::int64_t heldByLater,
                                                 const alloc::GpuModelFilter& models);

}  // namespace kc::sched
