#pragma once
// reconfig-mgr's publisher of the DRA path's ResourceSlices (docs/dra.md "Which device appears
// where"). reconfig-mgr is the only fabric client, so it is the one writer: after each change of
// a GPUPool's status, the pool's slices (label gpu.kubecomp.io/gpupool) are made to match
// api::buildPoolSlices. A change bumps the generation of every slice of the GPUPool; slices of
// the new generation are written first and leftovers deleted last, so a consumer that reads in
// between sees the old or the new pool whole (consumers ignore older generations).

#include <set>
#include <string>
#include <vector>

#include "libcore/api/dra_slice.hpp"
#include "libcore/api/gpupool.hpp"
#include "libcore/base/result.hpp"
#include "libcore/kube/client.hpp"

namespace kc::reconfig {

class SlicePublisher {
 public:
  SlicePublisher(kube::KubeClient& client, std::string gpuPool)
      : client_(client), gpuPool_(std::move(gpuPool)) {}

  // Makes the pool's slices match `gpus` on `nodes` when `dra`, or removes them all when not
  // (the pool serves the device-plugin path, or is gone). Idempotent: nothing is written when
  // the slices match already. Returns whether something was written. `held`: the GPUs a
  // ResourceClaim's allocation holds, and in which DRA pool (api::buildPoolSlices).
  Result<bool> sync(bool dra, const std::vector<std::string>& nodes,
                    const std::vector<api::PoolGpu>& gpus, const api::HeldDevices& held = {});

 private:
  kube::KubeClient& client_;
  std::string gpuPool_;
};

}  // namespace kc::reconfig
