#pragma once
// Which free GPUs a node is offered on the DRA path, and the stock DRA allocator's GPU choice.
//
// On our DRA path (docs/dra.md) the pool policy may hand a node any free GPU of its pool: one
// attached to the node is used where it is, any other (unattached, or idle on another node) is
// moved by the attach controller. That is the pool model as node_score.hpp filters it
// ("pool").
//
// A stock cluster (Kubernetes 1.36 DRA + CoHDI, no KubeComp) offers less. A GPU attached to a
// node is listed in that node's own ResourceSlice, so only pods on that node can get it; the
// composable DRA driver offers the unattached GPUs of the pool to every node of the pool, with
// binding conditions, and they are attached on demand. An idle GPU on another node comes back
// to the pool only when the idle timeout returns it (idle_timeout.hpp). So a node can run a pod
// only if its own free GPUs plus its pool's free unattached GPUs cover the request
// ("local-or-unattached"). kube's DRA allocator prefers devices without binding conditions, so
// the node's own GPUs go first and pool devices after, in slice (inventory) order:
// FirstFitLocalGpuPolicy. BASELINE pieces: they model a cluster without KubeComp.

#include <cstdint>
#include <string_view>
#include <vector>

#include "libcore/alloc/gpu_candidate.hpp"
#include "libcore/alloc/gpu_model.hpp"
#include "libcore/alloc/node_score.hpp"
#include "libcore/alloc/pool_model.hpp"
#include "libcore/alloc/rng.hpp"
#include "libcore/base/result.hpp"

namespace kc::alloc {

enum class DeviceOffer : std::uint8_t {
  Pool,               // ours: every free GPU of the node's pool
  LocalOrUnattached,  // stock DRA: the node's own free GPUs and the pool's free unattached ones
};

// A registry entry (policy_registry.hpp lists them).
struct OfferPolicy {
  std::string_view name;
  std::string_view description;
  DeviceOffer offer;
};

struct PoolOfferPolicy {
  static constexpr std::string_view kName = "pool";
  static constexpr std::string_view kDescription =
      "ours: a node is offered every free GPU of its pool (one idle on another node moves "
      "directly)";
  static constexpr DeviceOffer kOffer = DeviceOffer::Pool;
};
struct LocalOrUnattachedOfferPolicy {
  static constexpr std::string_view kName = "local-or-unattached";
  static constexpr std::string_view kDescription =
      "baseline (stock DRA + CoHDI): a node is offered its own free GPUs and its pool's "
      "unattached ones; a GPU idle on another node only after the idle timeout returns it";
  static constexpr DeviceOffer kOffer = DeviceOffer::LocalOrUnattached;
};

// First fit as kube's DRA allocator takes devices: among the candidates (free GPUs of the pool
// not on the target; the target's own free GPUs are used before any move), unattached ones first
// (the pool's slice) and then those attached elsewhere, each in inventory order. Under
// local-or-unattached the node selection admits a node only when the unattached ones suffice,
// so none attached elsewhere is taken.
struct FirstFitLocalGpuPolicy {
  static constexpr std::string_view kName = "first-fit-local";
  static constexpr std::string_view kDescription =
      "baseline (stock DRA allocator): the node's own GPUs, then unattached pool GPUs, then "
      "GPUs attached elsewhere, each in inventory order";
  static void rank(const ClusterState& state, std::vector<GpuIndex>& candidates,
                   std::uint32_t count, SplitMix64* rng);
};

// The free GPUs of an accepted model that node `n` is offered under `offer` (its own free ones
// plus, composable, the pool's others or the pool's unattached ones). O(1) for an unconstrained
// filter, O(GPUs of the pool) otherwise.
std::uint32_t offeredGpus(const ClusterState& state, NodeIndex n, const GpuModelFilter& models,
                          DeviceOffer offer);

// selectNodeForModels (node_score.hpp) among the nodes whose offer covers the pod's GPUs: the
// same filter, policy and name tie-break, so under "pool" it is selectNodeForModels itself.
// The deficit is the GPUs to attach (all from the pool's unattached ones under
// local-or-unattached). Error "unschedulable" when no node qualifies.
Result<NodeChoice> selectNodeOffered(const ClusterState& state, const PodRequest& pod,
                                     const GpuModelFilter& models, const NodePolicy& policy,
                                     Composability mode, DeviceOffer offer);

}  // namespace kc::alloc
