#pragma once
// The device plugin's decisions, as pure functions over the GPUPool objects it watches: which
// GPUs this node has, what kubelet should see (draining GPUs withdrawn), what Allocate hands a
// container, which devices GetPreferredAllocation proposes, and the usage report the plugin
// publishes on its Node for reconfig-mgr (its shape: libcore/api/usage_report.hpp). No I/O, no
// clocks: the gRPC service, the informer handlers and the tests all call these.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/gpupool.hpp"
#include "libcore/api/usage_report.hpp"
#include "libcore/base/result.hpp"

namespace kc::devplugin {

using api::kMaxDeviceIdLength;
using api::UsageReport;

// One GPU the pool status says is attached to this node.
struct NodeGpu {
  std::string id;       // pool GPU id = device ID
  std::string uuid;     // NVIDIA_VISIBLE_DEVICES value
  std::string pool;     // GPUPool name
  std::string chassis;  // for GetPreferredAllocation locality
  std::string model;
  bool healthy = true;
  bool draining = false;
  std::string detail;  // why unhealthy, for people
  // What the host says (host_check.hpp; all unset when the node does not check its host).
  bool hostChecked = false;
  bool hostVisible = false;  // the host sees it usable with this UUID
  bool hidden = false;       // not offered at all: attached per the pool, never seen here
  std::string bdf;
  std::optional<std::int32_t> minor;  // /dev/nvidia<minor>
  std::int32_t numaNode = -1;         // -1: unknown

  friend bool operator==(const NodeGpu&, const NodeGpu&) = default;
};

// Everything attached to one node across every pool, sorted by id. `problems` lists status
// entries that were malformed or conflicting (logged and counted; never a crash).
struct NodeInventory {
  std::vector<NodeGpu> gpus;
  std::vector<std::string> problems;
  bool hostChecked = false;  // applyHostView judged it (host_check.hpp)

  const NodeGpu* find(std::string_view id) const;
  friend bool operator==(const NodeInventory&, const NodeInventory&) = default;
};

// Which GPUPools a mode serves: spec.allocationPath DevicePlugin (the default) or DRA. A GPU is
// offered on one path only.
enum class PoolPath { kDevicePlugin, kDra };

// Reads `status.gpus` of every GPUPool object of `path` and keeps the GPUs attached to `node`.
// Entries without a usable id are dropped; an entry without a UUID or with an unknown health
// value is kept as Unhealthy (kubelet must not hand it out); the same id in two pools drops
// both (a device ID must be unique on the node).
NodeInventory nodeInventory(const std::vector<nlohmann::json>& pools, std::string_view node,
                            PoolPath path = PoolPath::kDevicePlugin);

// One entry of a ListAndWatch response.
struct Advertised {
  std::string id;
  bool healthy = true;
  std::int32_t numaNode = -1;  // Device.topology for kubelet's Topology Manager; -1 none
  friend bool operator==(const Advertised&, const Advertised&) = default;
};

// What kubelet should see: attached, not draining (a draining GPU is withdrawn first, so
// kubelet stops giving it to new pods before anything detaches it) and not hidden (attached per
// the pool but never seen on this host), sorted by id.
std::vector<Advertised> advertisedDevices(const NodeInventory& inventory);
// Ids of this node's draining GPUs, sorted.
std::vector<std::string> drainingIds(const NodeInventory& inventory);

// How Allocate names the devices to the runtime, as NVIDIA's device plugin's
// --device-list-strategy names it: `envvar` (the env below, read by the NVIDIA container
// toolkit) or `cdi-cri` (also the CDI names of the devices in AllocateResponse.cdi_devices:
// kubelet >= 1.28 passes them in the CRI request and a CDI-enabled runtime injects the device
// nodes from the node's spec).
enum class DeviceListStrategy { kEnvvar, kCdiCri };

// What Allocate returns for one container.
struct ContainerAllocation {
  std::map<std::string, std::string> envs;  // NVIDIA_VISIBLE_DEVICES, KUBECOMP_GPU_IDS
  std::vector<std::string> cdiDevices;      // cdi-cri: "kubecomp.io/gpu=<name>" per device
  friend bool operator==(const ContainerAllocation&, const ContainerAllocation&) = default;
};

// All or nothing: every requested id must be advertised (attached, not draining) and
// healthy, and appear once in the whole request. Error "invalid" (empty request, repeated id)
// or "not_found" (unknown or withdrawn id) naming the id; nothing is allocated then.
Result<std::vector<ContainerAllocation>> planAllocation(
    const NodeInventory& inventory, const std::vector<std::vector<std::string>>& containers,
    DeviceListStrategy strategy = DeviceListStrategy::kEnvvar);
// The CDI device name of a GPU in the node's spec (cdi-cri).
std::string nodeCdiName(std::string_view gpuId);

// GetPreferredAllocation for one container: `size` ids out of `available`, including every id
// of `mustInclude`. Prefers GPUs of one chassis: first the chassis of the must-include GPUs,
// then the smallest chassis group that can supply the rest alone (keeping large groups whole
// for large requests), else the largest groups first. Deterministic. Fewer than `size` ids
// when `available` is short (kubelet then decides).
std::vector<std::string> preferredAllocation(const NodeInventory& inventory,
                                             const std::vector<std::string>& available,
                                             const std::vector<std::string>& mustInclude,
                                             std::int32_t size);

}  // namespace kc::devplugin
