#pragma once
// The device-manager half of kubelet: which device plugins are registered, the devices each
// reported through ListAndWatch (capacity = all, allocatable = healthy), which devices each
// admitted pod's containers hold, and a checkpoint of those assignments so a restart keeps
// them (kubelet's kubelet_internal_checkpoint). Plugins are reached over their unix socket in
// the device-plugin directory.
//
// Behaviour copied from kubelet (pkg/kubelet/cm/devicemanager, v1.29):
// - A plugin whose ListAndWatch stream ends (plugin gone, socket deleted) keeps its devices
//   in capacity but all of them become unhealthy (allocatable 0); after the stop grace period
//   (kubelet: 5 min) the resource is dropped and reported with capacity 0.
// - A new registration for the same resource replaces the old endpoint; the old device list
//   stays until the new plugin's first ListAndWatch answer.
// - Allocation: devices of earlier init containers of the pod first, then the plugin's
//   GetPreferredAllocation when it offers it, then the free healthy devices in ID order;
//   then Allocate for the container. A shortage or a failed call is an error; what the pod
//   got so far is released.
// - After a restart (restore()) every checkpointed resource exists with no devices until its
//   plugin registers again, so its capacity is 0; assignments are kept.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "libcore/base/result.hpp"

namespace v1beta1 {
class RegisterRequest;
}

namespace kc::kubelet {

struct DeviceManagerOptions {
  std::string pluginDir;       // where plugins' sockets are (and kubelet.sock)
  std::string checkpointPath;  // JSON state file; empty = no checkpoint
  std::chrono::milliseconds stopGrace{std::chrono::minutes(5)};
  std::chrono::milliseconds dialTimeout{std::chrono::seconds(10)};
  std::chrono::milliseconds rpcTimeout{std::chrono::seconds(10)};
};

// The devices one container holds of one resource, with what Allocate answered.
struct ContainerDevices {
  std::string container;
  std::string resource;
  std::vector<std::string> ids;
  std::map<std::string, std::string> envs;  // ContainerAllocateResponse.envs
};

struct ResourceCounts {
  std::int64_t capacity = 0;     // every device the plugin listed
  std::int64_t allocatable = 0;  // the healthy ones (0 while the plugin is gone)
};

// "rpc error: code = Unknown desc = boom": how a Go gRPC client prints a failed call; kubelet
// puts that text into its admission and registration messages.
std::string goGrpcErrorText(int code, const std::string& message);

// The checksum of the stand-in's checkpoint files (FNV-1a, 64 bits, of the data's text).
std::uint64_t checkpointChecksum(const std::string& data);
// Writes `body` to `path` so that it appears whole or not at all (temp file, fsync, rename).
Status writeFileAtomically(const std::string& path, const std::string& body);

class DeviceManager {
 public:
  explicit DeviceManager(DeviceManagerOptions options);
  ~DeviceManager();  // stops every plugin stream
  DeviceManager(const DeviceManager&) = delete;
  DeviceManager& operator=(const DeviceManager&) = delete;

  // Reads the checkpoint (missing file = fresh node). Error "invalid" on a corrupt file
  // (kubelet refuses to start then, too).
  Status restore();

  // Registration: version, resource name, endpoint checked; the plugin dialled and asked
  // for its options; its ListAndWatch started. The error text is what kubelet answers.
  Status registerPlugin(const v1beta1::RegisterRequest& request);

  // Simulated kubelet restart: every plugin stream stopped and forgotten; each resource
  // stays known with no devices (as after restore()); assignments kept.
  void forgetPlugins();

  // Resource -> counts for the Node status, incl. 0/0 for resources whose grace expired.
  std::map<std::string, ResourceCounts> counts();
  // Resource -> every device ID the plugin listed (GetAllocatableResources).
  std::map<std::string, std::vector<std::string>> allDevices() const;
  bool isDevicePluginResource(const std::string& resource) const;
  // Names of resources with a connected (not stopped) plugin.
  std::vector<std::string> connectedResources() const;

  // Admission: allocates every device resource of every container of `pod` (its uid keys
  // the assignment). Error message = the reason text kubelet wraps in "Allocate failed due
  // to ..., which is unexpected".
  Result<std::vector<ContainerDevices>> allocate(const nlohmann::json& pod);
  // Frees a pod's devices (terminated, deleted, rejected). No-op for unknown uids.
  void release(const std::string& podUid);
  // Frees the devices of every pod not in `activeUids` (after a restart, pods gone meanwhile).
  void retainOnly(const std::set<std::string>& activeUids);
  std::vector<ContainerDevices> podDevices(const std::string& podUid) const;
  std::set<std::string> podsWithDevices() const;
  // Devices of `resource` held by pods.
  std::int64_t allocatedCount(const std::string& resource) const;

  struct Stats {
    std::uint64_t registrations = 0;
    std::uint64_t registrationsRefused = 0;
    std::uint64_t listUpdates = 0;
    std::uint64_t allocateCalls = 0;
    std::uint64_t allocateFailures = 0;
  };
  Stats stats() const;

 private:
  struct Endpoint;
  struct Resource {
    std::map<std::string, bool> devices;  // id -> healthy
    std::shared_ptr<Endpoint> endpoint;   // null after restore()/forgetPlugins()
    bool stopped = true;
    std::chrono::steady_clock::time_point stopTime{};
  };

  void runListAndWatch(std::shared_ptr<Endpoint> ep);
  void endpointEnded(const std::shared_ptr<Endpoint>& ep);
  void writeCheckpointLocked();
  Result<std::vector<std::string>> devicesToAllocate(const std::string& podUid,
                                                     const std::string& container,
                                                     const std::string& resource,
                                                     std::int64_t needed,
                                                     std::set<std::string>& reusable);

  DeviceManagerOptions opts_;
  mutable std::mutex mu_;  // guards everything below
  std::map<std::string, Resource> resources_;
  std::set<std::string> removed_;  // resources dropped after the grace period (reported as 0)
  // pod uid -> its containers' devices
  std::map<std::string, std::vector<ContainerDevices>> pods_;
  std::vector<std::shared_ptr<Endpoint>>
      retired_;  // stopped endpoints whose thread is joined later
  Stats stats_;
};

}  // namespace kc::kubelet
