#pragma once
// The v1beta1.DevicePlugin gRPC service (callback API) over the pure decisions of
// device_state.hpp. The daemon feeds it the node's inventory (from the GPUPool informer);
// every open ListAndWatch stream gets the new device list as soon as it changes: no polling.
//
// It also keeps what the usage report needs to confirm a withdrawal: the version of the
// advertised list each stream has had delivered (a write kubelet's side has accepted), and the
// devices handed out by Allocate since a given point.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "services/disaggpu-devplugin/device_state.hpp"

namespace kc::devplugin {

// Counters the service reports; all optional (tests pass none).
struct ServiceHooks {
  std::function<void()> onListSent;         // one ListAndWatch response written
  std::function<void(bool ok)> onAllocate;  // Allocate answered (ok or refused)
  std::function<void()> onStreamOpened;
  std::function<void()> onStreamClosed;
};

class DevicePluginService final : public v1beta1::DevicePlugin::CallbackService {
 public:
  explicit DevicePluginService(ServiceHooks hooks = {},
                               DeviceListStrategy strategy = DeviceListStrategy::kEnvvar);
  ~DevicePluginService() override;
  DevicePluginService(const DevicePluginService&) = delete;
  DevicePluginService& operator=(const DevicePluginService&) = delete;

  // Replaces the node's inventory. When the advertised list (ids, health) changes, its version
  // goes up and every open stream is sent the new list. Returns the current list version.
  std::uint64_t setInventory(NodeInventory inventory);
  NodeInventory inventory() const;
  std::vector<Advertised> advertised() const;
  std::uint64_t listVersion() const;

  // One consistent reading of the above and of allocationSeq() (for the usage report).
  struct State {
    NodeInventory inventory;
    std::vector<Advertised> advertised;
    std::uint64_t listVersion = 0;
    std::uint64_t allocationSeq = 0;
  };
  State state() const;

  // True when every open ListAndWatch stream has had list version >= `version` written (or no
  // stream is open: kubelet then learns the list when it next connects).
  bool deliveredToAll(std::uint64_t version) const;
  std::size_t openStreams() const;

  // Allocate bookkeeping: a sequence number that grows with every successful Allocate, and
  // the devices allocated after sequence number `after`.
  std::uint64_t allocationSeq() const;
  std::set<std::string> allocatedSince(std::uint64_t after) const;

  // Monotonic change counter (inventory, delivery, allocation, stream open/close) and a wait
  // for it to pass `seen` (real time; for callers that own no condition variable).
  std::uint64_t changeTick() const;
  bool waitForChange(std::uint64_t seen, std::chrono::milliseconds timeout) const;
  // Called on the changing thread after every changeTick() increment, with no lock of the
  // service held: the usage reporter notifies the condition variable it waits on through its
  // kc::Clock, so a change wakes it without polling. One listener; setting another (or null)
  // returns only once no call of the previous one is running, so its owner may then go away.
  void setChangeListener(std::function<void()> listener);

  // Ends every open stream with OK (the server is stopping). New streams are refused after.
  void finishAll();

  // --- gRPC methods -------------------------------------------------------------------------
  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::Empty* request,
                                                   v1beta1::DevicePluginOptions* reply) override;
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(
      grpc::CallbackServerContext* ctx, const v1beta1::Empty* request) override;
  grpc::ServerUnaryReactor* GetPreferredAllocation(
      grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* reply) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx,
                                     const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* reply) override;
  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* ctx,
                                              const v1beta1::PreStartContainerRequest* request,
                                              v1beta1::PreStartContainerResponse* reply) override;

  // The options we register with and answer GetDevicePluginOptions with.
  static v1beta1::DevicePluginOptions pluginOptions();

  struct Snapshot {
    std::uint64_t version = 0;
    std::vector<Advertised> devices;
  };
  class Stream;

 private:
  void bump();
  void removeStream(Stream* stream);

  ServiceHooks hooks_;
  DeviceListStrategy strategy_;

  mutable std::mutex stateMu_;  // guards inventory_, snapshot_, allocations_, allocSeq_
  NodeInventory inventory_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::deque<std::pair<std::uint64_t, std::vector<std::string>>> allocations_;
  std::uint64_t allocSeq_ = 0;

  // Guards streams_, closed_. Lock order: streamsMu_, then stateMu_, then a Stream's own lock.
  mutable std::mutex streamsMu_;
  std::set<Stream*> streams_;
  bool closed_ = false;

  mutable std::mutex tickMu_;  // guards tick_ (with tickCv_)
  mutable std::condition_variable tickCv_;
  std::uint64_t tick_ = 0;

  std::mutex listenerMu_;  // guards changeListener_, held while it runs
  std::function<void()> changeListener_;
};

}  // namespace kc::devplugin
