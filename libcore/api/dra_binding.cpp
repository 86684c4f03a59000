#include "libcore/api/dra_binding.hpp"

#include <algorithm>

#include "libcore/api/dra_slice.hpp"
#include "libcore/api/names.hpp"

namespace kc::api {

namespace {

bool conditionTrue(const Claim& claim, const ClaimDevice& device, std::string_view type) {
  const ClaimCondition* c = claim.condition(device, type);
  return c != nullptr && c->status == "True" && c->observedGeneration >= claim.generation;
}

AttachStep failed(std::string reason, std::string message) {
  return AttachStep{AttachStep::Kind::kReportFailed, "", "", std::move(reason), std::move(message)};
}

}  // namespace

std::string claimHolder(std::string_view ns, std::string_view name) {
  return "ResourceClaim " + std::string(ns) + "/" + std::string(name);
}

BindingState bindingState(const Claim& claim, const ClaimDevice& device) {
  if (device.bindingConditions.empty()) {
    return BindingState::kNone;
  }
  for (const std::string& f : device.bindingFailureConditions) {
    if (conditionTrue(claim, device, f)) {
      return BindingState::kFailed;
    }
  }
  for (const std::string& b : device.bindingConditions) {
    if (!conditionTrue(claim, device, b)) {
      return BindingState::kWaiting;
    }
  }
  return BindingState::kAttached;
}

AttachStep nextAttachStep(const Claim& claim, const ClaimDevice& device, std::string_view gpuPool,
                          const std::vector<PoolGpu>& gpus) {
  if (device.driver != kDraDriverName || !isDraPoolOf(device.pool, gpuPool) || claim.deleting ||
      !claim.allocation || bindingState(claim, device) != BindingState::kWaiting) {
    return {};
  }
  const std::string& node = claim.allocation->nodeName;
  if (node.empty()) {
    return failed("NoNode", "the allocation names no node (bindsToNode needs one)");
  }
  auto gpu = std::find_if(gpus.begin(), gpus.end(),
                          [&](const PoolGpu& g) { return draDeviceName(g.id) == device.device; });
  if (gpu == gpus.end()) {
    return failed("DeviceGone",
                  "device " + device.device + " is no longer in GPUPool " + std::string(gpuPool));
  }
  if (!gpu->healthy) {
    return failed("Unhealthy", "GPU " + gpu->id + " is unhealthy" +
                                   (gpu->healthDetail.empty() ? "" : ": " + gpu->healthDetail));
  }
  if (gpu->node == node && !gpu->draining) {
    return AttachStep{AttachStep::Kind::kReportAttached, gpu->id, node, "Attached",
                      "GPU " + gpu->id + " is attached to node " + node};
  }
  const std::string self = claimHolder(claim.ns, claim.name);
  const bool usedByOthers = std::any_of(gpu->inUseBy.begin(), gpu->inUseBy.end(),
                                        [&](const std::string& u) { return u != self; });
  if (!gpu->node.empty() && gpu->node != node && usedByOthers) {
    return failed("InUseElsewhere", "GPU " + gpu->id + " is in use on node " + gpu->node);
  }
  return AttachStep{AttachStep::Kind::kAttach, gpu->id, node, "", ""};
}

}  // namespace kc::api
