#pragma once
// KEP-5007 binding conditions between the scheduler and reconfig-mgr's attach controller, as a
// pure state machine over one allocated device of a ResourceClaim (docs/dra.md "Attach"):
// - the scheduler (kube-scheduler's PreBind, or kubecomp-sched) reads bindingState(): bind when
//   kAttached, clear the allocation and requeue when kFailed, wait otherwise;
// - the attach controller reads nextAttachStep(): what it does next for the device, given the
//   GPUPool's GPUs as status.gpus shows them now.
// Conditions written for an older generation of the claim do not count.

#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/dra_claim.hpp"
#include "libcore/api/gpupool.hpp"

namespace kc::api {

enum class BindingState {
  kNone,      // not a device with binding conditions: nothing to wait for
  kWaiting,   // some binding condition is not True yet
  kAttached,  // every binding condition is True
  kFailed,    // a binding failure condition is True
};
BindingState bindingState(const Claim& claim, const ClaimDevice& device);

struct AttachStep {
  enum class Kind {
    kNothing,         // not ours, not allocated, being deleted, or decided already
    kAttach,          // move `gpuId` to `node` (the journaled move: drain, detach, attach, verify)
    kReportAttached,  // set gpu.kubecomp.io/attached=True
    kReportFailed,    // set gpu.kubecomp.io/attach-failed=True with `reason` and `message`
  };
  Kind kind = Kind::kNothing;
  std::string gpuId;
  std::string node;
  std::string reason;  // CamelCase condition reason
  std::string message;

  friend bool operator==(const AttachStep&, const AttachStep&) = default;
};

// How a GPUPool's status.gpus[].inUseBy names a ResourceClaim that holds the GPU (reconfig-mgr
// lists claim holders beside the pods the node reports).
std::string claimHolder(std::string_view ns, std::string_view name);

// For one allocation result of `claim` in a DRA pool of GPUPool `gpuPool` (its fabric pool, or
// a node's pool when the allocator took a GPU idle on one node for another), whose GPUs are
// `gpus` (status.gpus now):
//   ours with binding conditions, allocated for a node, not deleted, not decided yet, and
//   the GPU  healthy and attached to that node, not draining   -> kReportAttached
//            unattached, or attached elsewhere and idle          -> kAttach to the node
//            unhealthy, gone, or in use on another node          -> kReportFailed (why)
//            (in use: by anything but the claim itself, claimHolder)
//   an allocation without a node for a bindsToNode device        -> kReportFailed
AttachStep nextAttachStep(const Claim& claim, const ClaimDevice& device, std::string_view gpuPool,
                          const std::vector<PoolGpu>& gpus);

}  // namespace kc::api
