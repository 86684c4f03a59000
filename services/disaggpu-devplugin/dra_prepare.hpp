#pragma once
// The kubelet DRA plugin's decision for one claim (docs/devplugin.md, "DRA mode"): which of this
// node's GPUs the claim's allocation names, and whether each may be handed to the pod. Pure: the
// claim comes from the API server, the inventory from the GPUPool status judged by the host
// view; the gRPC service, the checkpoint and the CDI spec are elsewhere.

#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/dra_claim.hpp"
#include "libcore/base/result.hpp"
#include "libcore/cdi/cdi_spec.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"

namespace kc::devplugin {

// One allocated device of our driver, prepared on this node.
struct PreparedDevice {
  std::vector<std::string> requestNames;  // the claim's requests it satisfies, in result order
  std::string pool;                       // DRA pool, as allocated
  std::string device;                     // DRA device name, as allocated
  std::string gpuId;
  std::string uuid;
  std::int32_t minor = 0;  // /dev/nvidia<minor>, from the host view
  std::string cdiName;     // the device's name in the claim's CDI spec

  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

struct PreparedClaim {
  std::string uid;
  std::string ns;
  std::string name;
  std::vector<PreparedDevice> devices;

  friend bool operator==(const PreparedClaim&, const PreparedClaim&) = default;
};

// Prepares claim (ns, name, uid) as kubelet asked on node `node`. Every device the allocation
// names of driver gpu.kubecomp.io must be a GPU the GPUPool status shows attached here, in the
// DRA pool the allocation names, not draining, healthy, and (when the node checks its host)
// seen by the host with the same UUID. Error "failed_precondition" saying which device and why
// otherwise ("not_found" when the claim has another UID: deleted and made anew); nothing is
// prepared then. Devices are in allocation order; one GPU named by several requests is one
// device listing each request.
Result<PreparedClaim> decidePrepare(const api::Claim& claim, std::string_view uid,
                                    std::string_view node, const NodeInventory& inventory);

// The claim's CDI spec: one device per GPU, the env of all of them (a container gets them all).
std::vector<cdi::CdiGpu> cdiGpus(const PreparedClaim& claim);
// The CDI device name of a prepared device: unique across the node's claims (a runtime refuses
// one name defined by two spec files).
std::string claimCdiName(std::string_view claimUid, std::string_view gpuId);

}  // namespace kc::devplugin
