#pragma once
// The `stock-dra` baseline: a Kubernetes 1.36 cluster with DRA and CoHDI's composable DRA
// driver and dynamic-device-scaler, WITHOUT KubeComp, as one named combination of registry
// policies (policy_registry.hpp lists the presets; kubecomp-sim --policy stock-dra). Measured
// against the pool policy in docs/results.md, "DRA path: stock-dra vs the pool policy".
//
//   node     least-allocated      kube-scheduler's default NodeResourcesFit scoring
//   devices  first-fit-local      kube's DRA allocator: the node's own GPUs, then pool devices
//   offer    local-or-unattached  a GPU idle on another node is in that node's slice only
//   queue    backfill             kube-scheduler retries every pending pod, none blocks others
//   idle     idle-timeout 600 s   CoHDI returns a GPU idle for DEVICE_NO_REMOVAL_DURATION
//   recomposition none

#include <cstdint>
#include <string_view>

#include "libcore/alloc/backfill.hpp"
#include "libcore/alloc/device_offer.hpp"
#include "libcore/alloc/idle_recompose.hpp"
#include "libcore/alloc/idle_timeout.hpp"
#include "libcore/alloc/least_allocated.hpp"

namespace kc::alloc {

// A named combination of registry policies, each part by its registry name.
struct PolicyPreset {
  std::string_view name;
  std::string_view description;
  std::string_view nodePolicy;
  std::string_view gpuPolicy;
  std::string_view queuePolicy;
  std::string_view recomposePolicy;
  std::string_view offerPolicy;
  std::string_view returnPolicy;
  std::int64_t idleTimeoutMs;
};

struct StockDraPreset {
  static constexpr PolicyPreset kPreset{
      .name = "stock-dra",
      .description =
          "baseline: Kubernetes 1.36 DRA + CoHDI without KubeComp (least-allocated "
          "nodes, first-fit devices, pool devices attached on demand, idle GPUs "
          "returned after 600 s, kube-scheduler's retrying queue)",
      .nodePolicy = LeastAllocatedNodePolicy::kName,
      .gpuPolicy = FirstFitLocalGpuPolicy::kName,
      .queuePolicy = GreedyBackfillQueuePolicy::kName,
      .recomposePolicy = NoRecomposePolicy::kName,
      .offerPolicy = LocalOrUnattachedOfferPolicy::kName,
      .returnPolicy = IdleTimeoutReturnPolicy::kName,
      .idleTimeoutMs = kDefaultIdleTimeoutMs,
  };
};

}  // namespace kc::alloc
