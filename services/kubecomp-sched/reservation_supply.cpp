#include "services/kubecomp-sched/reservation_supply.hpp"

#include <algorithm>

namespace kc::sched {
namespace {

const ModelPool* poolFor(const ClusterModel& model, const std::string& node, std::string* name) {
  for (const auto& [poolName, pool] : model.pools()) {
    if (pool.nodeSet.count(node) != 0) {
      if (name != nullptr) {
        *name = poolName;
      }
      return &pool;
    }
  }
  return nullptr;
}

}  // namespace

std::string poolOfNode(const ClusterModel& model, const std::string& node) {
  std::string name;
  (void)poolFor(model, node, &name);
  return name;
}

PoolSupply poolSupply(const ClusterModel& model, const std::string& node,
                      const alloc::GpuModelFilter& models) {
  PoolSupply out;
  const ModelPool* pool = poolFor(model, node, &out.pool);
  if (pool == nullptr) {
    return out;
  }
  for (const ModelGpu& g : pool->gpus) {
    const bool inPool = g.node.empty() || pool->nodeSet.count(g.node) != 0;
    if (!inPool || !(g.healthy || g.reportedInUse)) {
      continue;  // quarantined or failed and idle, or on a host outside the pool
    }
    ++(models.accepts(g.model) ? out.accepted : out.otherModels);
  }
  for (const std::string& n : pool->nodes) {
    if (const auto i = model.indexOf(n)) {
      out.held +=
          std::max<std::int64_t>(0, model.usage()[*i].requested.scalarOr0(alloc::kGpuResource));
    }
  }
  return out;
}

std::optional<std::string> unservableReservation(const PoolSupply& supply, const std::string& node,
                                                 std::int64_t gpus, std::int64_t heldByLater,
                                                 const alloc::GpuModelFilter& models) {
  const std::string of = models.acceptsAny() ? std::string() : " of model " + models.toString(',');
  if (supply.pool.empty()) {
    return "node " + node +
           " of the reconfiguration request is in no GPU pool any more; trying "
           "again";
  }
  const std::int64_t earlier = std::max<std::int64_t>(0, supply.held - heldByLater);
  const std::int64_t earlierOnAccepted = std::max<std::int64_t>(0, earlier - supply.otherModels);
  const std::int64_t left = supply.accepted - earlierOnAccepted;
  if (left >= gpus) {
    return std::nullopt;
  }
  return "GPU pool " + supply.pool + " can no longer supply the " + std::to_string(gpus) +
         " kubecomp.io/gpu" + of + " the pod needs on node " + node + ": " +
         std::to_string(supply.accepted) + " usable GPU(s)" + of + " left in the pool, " +
         std::to_string(std::min(earlierOnAccepted, supply.accepted)) +
         " held by pods placed before it (GPUs quarantined or gone); the reservation is cancelled "
         "and the pod scheduled again";
}

}  // namespace kc::sched
