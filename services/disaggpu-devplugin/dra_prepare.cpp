#include "services/disaggpu-devplugin/dra_prepare.hpp"

#include <algorithm>

#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/error_codes.hpp"

namespace kc::devplugin {

namespace {

Error refuse(const api::ClaimDevice& d, const std::string& why) {
  return makeError(kc::errc::kFailedPrecondition, "device " + d.pool + "/" + d.device + ": " + why);
}

// The GPU of this node that allocated device `d` names, or an error saying why none may serve.
Result<const NodeGpu*> gpuFor(const api::ClaimDevice& d, std::string_view node,
                              const NodeInventory& inventory) {
  // The DRA pool may be another node's: a GPU keeps its device identity while a claim holds it,
  // and kubecomp-sched may give a pod an idle GPU attached to another node, which reconfig-mgr
  // then moves here. Where it is attached now is what counts.
  const api::DraPoolName pool = api::splitDraPool(d.pool);
  auto it = std::find_if(inventory.gpus.begin(), inventory.gpus.end(), [&](const NodeGpu& g) {
    return g.pool == pool.gpuPool && api::draDeviceName(g.id) == d.device;
  });
  if (it == inventory.gpus.end()) {
    return refuse(
        d, "GPUPool " + pool.gpuPool + " shows no such GPU attached to node " + std::string(node));
  }
  const NodeGpu& g = *it;
  if (g.draining) {
    return refuse(d, "GPU " + g.id + " is being withdrawn (draining for a move)");
  }
  if (g.hostChecked && !g.hostVisible) {
    return refuse(d, "GPU " + g.id + " is attached but not verified on this host: " + g.detail);
  }
  if (!g.healthy) {
    return refuse(d, "GPU " + g.id + " is unhealthy" + (g.detail.empty() ? "" : ": " + g.detail));
  }
  if (g.uuid.empty()) {
    return refuse(d, "GPU " + g.id + " has no UUID: it is never handed to a pod");
  }
  if (!g.minor) {
    return refuse(d, "GPU " + g.id + " has no device minor (the host view is off)");
  }
  return &g;
}

}  // namespace

std::string claimCdiName(std::string_view claimUid, std::string_view gpuId) {
  return cdi::cdiDeviceName(std::string(claimUid) + "-" + std::string(gpuId));
}

Result<PreparedClaim> decidePrepare(const api::Claim& claim, std::string_view uid,
                                    std::string_view node, const NodeInventory& inventory) {
  const std::string who = "ResourceClaim " + claim.ns + "/" + claim.name;
  if (claim.uid != uid) {
    return makeError(kc::errc::kNotFound, who + " has UID " + claim.uid + ", kubelet asked for " +
                                              std::string(uid) + " (deleted and created anew?)");
  }
  if (!claim.allocation) {
    return makeError(kc::errc::kFailedPrecondition, who + " is not allocated");
  }
  if (!claim.allocation->nodeName.empty() && claim.allocation->nodeName != node) {
    return makeError(kc::errc::kFailedPrecondition, who + " is allocated for node " +
                                                        claim.allocation->nodeName +
                                                        ", this is node " + std::string(node));
  }
  PreparedClaim out{claim.uid, claim.ns, claim.name, {}};
  for (const api::ClaimDevice& d : claim.allocation->results) {
    if (d.driver != api::kDraDriverName) {
      continue;  // another driver's device: its own plugin prepares it
    }
    auto same = std::find_if(out.devices.begin(), out.devices.end(), [&](const PreparedDevice& p) {
      return p.pool == d.pool && p.device == d.device;
    });
    if (same != out.devices.end()) {
      same->requestNames.push_back(d.request);
      continue;
    }
    auto gpu = gpuFor(d, node, inventory);
    if (!gpu) {
      return makeError(gpu.error().code, who + ": " + gpu.error().message);
    }
    const NodeGpu& g = **gpu;
    out.devices.push_back(PreparedDevice{
        {d.request}, d.pool, d.device, g.id, g.uuid, *g.minor, claimCdiName(claim.uid, g.id)});
  }
  if (out.devices.empty()) {
    return makeError(kc::errc::kFailedPrecondition,
                     who + " allocates no device of driver " + std::string(api::kDraDriverName));
  }
  return out;
}

std::vector<cdi::CdiGpu> cdiGpus(const PreparedClaim& claim) {
  std::vector<cdi::CdiGpu> out;
  for (const PreparedDevice& d : claim.devices) {
    out.push_back(cdi::CdiGpu{d.cdiName, d.gpuId, d.uuid, d.minor});
  }
  return out;
}

}  // namespace kc::devplugin
