#include "libcore/alloc/device_offer.hpp"

#include <algorithm>

namespace kc::alloc {
namespace {

// Free GPUs of an accepted model attached to `n`, or (n == kNoNode) unattached in `pool`.
std::uint32_t countFree(const ClusterState& state, PoolIndex pool, NodeIndex n,
                        const GpuModelFilter& models) {
  std::uint32_t count = 0;
  for (GpuIndex g : state.poolGpus(pool)) {
    const GpuState& gpu = state.gpu(g);
    if (gpu.free() && gpu.node == n && models.accepts(gpu.model)) {
      ++count;
    }
  }
  return count;
}

}  // namespace

void FirstFitLocalGpuPolicy::rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                                  std::uint32_t, SplitMix64*) {
  // Candidates come in inventory order; a stable partition keeps it within each group.
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](GpuIndex g) { return !state.gpu(g).attached(); });
}

std::uint32_t offeredGpus(const ClusterState& state, NodeIndex n, const GpuModelFilter& models,
                          DeviceOffer offer) {
  const NodeState& node = state.node(n);
  if (node.pool == kNoPool) {
    return 0;  // GPUs attach only to nodes of their pool: a node wired to none has none
  }
  if (models.acceptsAny()) {
    const PoolState& pool = state.pool(node.pool);
    return offer == DeviceOffer::Pool ? pool.freeGpus : node.freeGpus + pool.freeUnattachedGpus;
  }
  const std::uint32_t own = countFree(state, node.pool, n, models);
  if (offer == DeviceOffer::LocalOrUnattached) {
    return own + countFree(state, node.pool, kNoNode, models);
  }
  std::uint32_t all = 0;
  for (GpuIndex g : state.poolGpus(node.pool)) {
    if (state.gpu(g).free() && models.accepts(state.gpu(g).model)) {
      ++all;
    }
  }
  return all;
}

Result<NodeChoice> selectNodeOffered(const ClusterState& state, const PodRequest& pod,
                                     const GpuModelFilter& models, const NodePolicy& policy,
                                     Composability mode, DeviceOffer offer) {
  if (offer == DeviceOffer::Pool || pod.gpus == 0 || mode == Composability::Preconfigured) {
    // Preconfigured: nothing moves, the node's own GPUs must suffice whatever is offered.
    return selectNodeForModels(state, pod, models, policy, mode);
  }
  if (models.acceptsAny()) {
    return selectNodeAdmitted(state, pod, models, policy, mode, [&](NodeIndex n) {
      return offeredGpus(state, n, models, offer) >= pod.gpus;
    });
  }
  // Accepted models only: one pass counts the free GPUs per node and unattached per pool.
  std::vector<std::uint32_t> nodeFree(state.nodeCount(), 0);
  std::vector<std::uint32_t> poolUnattached(state.poolCount(), 0);
  for (GpuIndex g = 0; g < state.gpuCount(); ++g) {
    const GpuState& gpu = state.gpu(g);
    if (!gpu.free() || !models.accepts(gpu.model)) {
      continue;
    }
    ++(gpu.attached() ? nodeFree[gpu.node] : poolUnattached[gpu.pool]);
  }
  return selectNodeAdmitted(state, pod, models, policy, mode, [&](NodeIndex n) {
    const PoolIndex p = state.node(n).pool;
    return p != kNoPool && nodeFree[n] + poolUnattached[p] >= pod.gpus;
  });
}

}  // namespace kc::alloc
