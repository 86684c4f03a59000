#pragma once
// The node as the judge of what it has (docs/devplugin.md, "Host view"): the GPUPool status
// says which GPUs the fabric attached to this node; the host view (sysfs and
// /proc/driver/nvidia, libcore/node) says which the host really sees. A GPU is offered to pods
// only when both agree, by UUID. Pure: the host view is read elsewhere.

#include <map>
#include <set>
#include <string>
#include <vector>

#include "libcore/node/host_view.hpp"
#include "services/disaggpu-devplugin/device_state.hpp"

namespace kc::devplugin {

// Marks every GPU of `inventory` with what the host says:
//   seen usable with the same UUID        -> hostVisible, with its BDF, minor and NUMA node
//   on the PCI bus but not usable          -> Unhealthy with the host's reason (driver unbound,
//                                             no /proc/driver/nvidia entry, ...)
//   not on this host at all, and offered    -> Unhealthy "not on this host's PCI bus" (it fell
//   to kubelet before (`advertisedBefore`)    off the bus: kubelet must stop handing it out)
//   not on this host, never offered        -> hidden: not offered (attached at the chassis,
//                                             hot-add or the driver not done yet)
//   no UUID in the GPUPool status          -> hidden (never handed to a pod)
// A GPU the pool already calls unhealthy keeps the pool's reason first.
void applyHostView(NodeInventory& inventory, const node::HostView& view,
                   const std::set<std::string>& advertisedBefore);

// The report fields of the host view: ids seen, ids not seen -> why. Draining GPUs too: a GPU
// in a move is draining until reconfig-mgr has verified it, which needs the destination's word.
struct HostVerdicts {
  std::vector<std::string> visible;
  std::map<std::string, std::string> notVisible;
};
HostVerdicts hostVerdicts(const NodeInventory& inventory);

// The host view for people and scripts (--print-host-view): every GPU function with its BDF,
// UUID, minor, NUMA node, driver, whether usable and why not; and the problems seen.
nlohmann::json hostViewJson(const node::HostView& view);

}  // namespace kc::devplugin
