#pragma once
// GPUPool status.gpus: one entry per GPU of the pool, written by reconfig-mgr (the only fabric
// client, pool_view.cpp) and read by kubecomp-sched (its pool model) and disaggpu-devplugin (what
// its node has). One serialiser, one parser; the parser never throws and reports every entry it
// could not read in `problems`, so a reader logs them and goes on with the rest.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/api/names.hpp"

namespace kc::api {

// kubelet: a device ID is at most 63 characters.
inline constexpr std::size_t kMaxDeviceIdLength = 63;
// 1-63 characters of [A-Za-z0-9._:-]: usable as a kubelet device ID and a DRA device name part.
bool isValidGpuId(std::string_view id);

// One element of status.gpus.
struct PoolGpu {
  std::string id;       // pool GPU id ("<chassis>.<gid>"), the device ID
  std::string uuid;     // NVIDIA_VISIBLE_DEVICES value; "" when the chassis cannot read it
  std::string model;    // GPU model name; "" when unknown
  std::string chassis;  // the chassis it sits in
  std::string node;     // the node it is attached to; "" when unattached (or to a host no node has)
  std::string hostPort;  // pool-form host "<chassis>/<host>" it is attached to; "" when unattached
  bool healthy = true;   // health: Healthy | Unhealthy
  std::string healthDetail;  // why unhealthy, for people
  bool draining = false;     // being withdrawn from its node before a detach
  std::vector<std::string>
      inUseBy;  // "namespace/pod" (or "(allocating)"), from the node's usage report

  friend bool operator==(const PoolGpu&, const PoolGpu&) = default;
};

nlohmann::json toJson(const PoolGpu& gpu);

// The GPUs of one GPUPool object, in status order.
struct PoolGpus {
  std::string pool;  // metadata.name
  std::vector<PoolGpu> gpus;
  // Entries that were dropped or read with a default, one sentence each naming the pool and the
  // entry ("GPUPool p: status.gpus[3].id ..."). Empty for a well-formed status.
  std::vector<std::string> problems;
};

// Reads status.gpus of a GPUPool object. No status or no gpus yet: no GPUs, no problem.
// Per entry: not an object, an id that is not a GPU id, or an id seen before in the same pool:
// dropped (every entry of a repeated id, since no reader can tell which is true). A field of the
// wrong type reads as its default with a problem; a health other than Healthy / Unhealthy reads
// as unhealthy ("unknown health value") with a problem; a missing health reads as Healthy (the
// writer always sets it). Never throws.
PoolGpus parsePoolGpus(const nlohmann::json& pool);

// Whether a GPUPool object offers its GPUs through the device-plugin path: spec.allocationPath
// absent or anything but "DRA" (reconfig-mgr refuses other values and then publishes no
// ResourceSlices, so a GPU is offered on one path only, whatever the spec says).
bool servesDevicePlugin(const nlohmann::json& pool);

}  // namespace kc::api
