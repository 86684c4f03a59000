#pragma once
// The DRA path's ResourceSlices (resource.k8s.io/v1; docs/dra.md "Which device appears where"):
// reconfig-mgr publishes every GPU of every GPUPool in exactly one slice, kube-scheduler or
// kubecomp-sched allocate from them. One builder decides where a GPU appears (buildPoolSlices,
// pure), one serialiser writes a slice (toJson) and one parser reads our own slices back
// (parseResourceSlice), the way the GPUPool status has one writer and one reader.
//
//   attached to node n, healthy, not draining -> pool "<gpupool>/<n>", slice nodeName n, no
//                                                 binding conditions: usable now, preferred
//   unattached, healthy, not draining         -> pool "<gpupool>", slice nodeSelector over the
//                                                 GPUPool's nodes, bindsToNode with the binding
//                                                 condition gpu.kubecomp.io/attached and the
//                                                 failure condition gpu.kubecomp.io/attach-failed
//   unhealthy or draining, or attached to a    -> withheld (published again once usable)
//   host no node of the pool has
//   allocated to a claim                       -> stays in the DRA pool the allocation names
//                                                 (fabric or a node's), attached or not,
//                                                 healthy or not, until the claim lets it go
// The last rule keeps a device's identity (driver, pool, device) stable while a claim holds
// it: the scheduler tracks allocated devices by that identity, so a GPU republished in its
// node's pool right after the attach would look free there and could be allocated twice.

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/gpupool.hpp"
#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"

namespace kc::api {

// KEP-5007 condition types on a claim's status.devices[] entry, written by reconfig-mgr's
// attach controller.
inline constexpr std::string_view kAttachedCondition = "gpu.kubecomp.io/attached";
inline constexpr std::string_view kAttachFailedCondition = "gpu.kubecomp.io/attach-failed";
// resource.k8s.io/v1 ResourceSliceMaxDevices (no device here uses the features that lower it).
inline constexpr std::size_t kMaxDevicesPerSlice = 128;
// The label our slices carry with their GPUPool's name, so reconfig-mgr lists its own.
inline constexpr std::string_view kSlicePoolLabel = "gpu.kubecomp.io/gpupool";

// One GPU as a DRA device.
struct SliceDevice {
  std::string name;  // DNS label, unique in its DRA pool (draDeviceName of the GPU id)
  // Attributes (qualified by the driver name, device.attributes["gpu.kubecomp.io"].<name>).
  std::string id;       // the pool GPU id
  std::string uuid;     // "" when the chassis cannot read it (attribute omitted)
  std::string model;    // "" when unknown (attribute omitted)
  std::string gpuPool;  // the GPUPool
  std::string chassis;
  // A fabric device: attached on demand to the node the allocation chose (binding conditions).
  bool bindsToNode = false;

  friend bool operator==(const SliceDevice&, const SliceDevice&) = default;
};

// One ResourceSlice of driver gpu.kubecomp.io.
struct ResourceSlice {
  std::string name;      // metadata.name
  std::string gpuPool;   // the GPUPool it publishes (label kSlicePoolLabel)
  std::string poolName;  // spec.pool.name
  std::int64_t generation = 0;
  std::int64_t sliceCount = 1;
  std::string nodeName;            // node-local slice: spec.nodeName
  std::vector<std::string> nodes;  // fabric slice: spec.nodeSelector, hostname In nodes
  std::vector<SliceDevice> devices;

  friend bool operator==(const ResourceSlice&, const ResourceSlice&) = default;
};

// A DRA device name (DNS label) for a pool GPU id: the id itself when it is one, else the id
// lowercased with other characters as '-' and a hash of the id appended, so two ids never share
// a name and a GPU keeps its name whatever else is in the pool.
std::string draDeviceName(std::string_view gpuId);

// What a DRA pool name of our driver stands for: the GPUPool's fabric pool "<gpuPool>" (node
// "") or its pool on one node "<gpuPool>/<node>". GPUPool and node names never hold '/'.
struct DraPoolName {
  std::string gpuPool;
  std::string node;
  friend bool operator==(const DraPoolName&, const DraPoolName&) = default;
};
DraPoolName splitDraPool(std::string_view pool);
// True when `pool` is one of GPUPool `gpuPool`'s DRA pools (its fabric pool or a node's). The
// one rule every reader uses to tell which GPUPool an allocated device belongs to.
bool isDraPoolOf(std::string_view pool, std::string_view gpuPool);

// Where every GPU of one GPUPool appears (the table above), as slices of at most
// kMaxDevicesPerSlice devices, every slice of one DRA pool with the same `generation` and
// resourceSliceCount. Node-local pools in node order, then the fabric pool; devices in GPU
// order. `nodes` are the GPUPool's nodes (spec.nodes). A pool with nothing to offer in its
// fabric part still publishes an empty fabric slice, so that an update that empties it replaces
// what was there.
// `held`: GPU id -> the DRA pool some ResourceClaim's allocation names it in ("<gpuPool>" or
// "<gpuPool>/<node>"); it stays there, healthy or not, attached or not (a node pool of a node
// the GPUPool no longer has: the fabric pool).
using HeldDevices = std::map<std::string, std::string>;
std::vector<ResourceSlice> buildPoolSlices(std::string_view gpuPool,
                                           const std::vector<std::string>& nodes,
                                           const std::vector<PoolGpu>& gpus,
                                           std::int64_t generation, const HeldDevices& held = {});

// The ResourceSlice object (apiVersion resource.k8s.io/v1, kind ResourceSlice).
nlohmann::json toJson(const ResourceSlice& slice);
// One of our own slices read back (driver gpu.kubecomp.io). Error "invalid" naming the field on
// anything the writer would not have written. Never throws.
Result<ResourceSlice> parseResourceSlice(const nlohmann::json& object);

}  // namespace kc::api
