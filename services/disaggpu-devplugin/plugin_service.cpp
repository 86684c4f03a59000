#include "services/disaggpu-devplugin/plugin_service.hpp"

#include <algorithm>
#include <utility>

#include "libcore/grpc/status.hpp"

namespace kc::devplugin {

// One kubelet ListAndWatch stream. Owned by gRPC from creation until OnDone, where it removes
// itself from the service and is deleted. At most one write is in flight; a list offered while
// one is being written replaces any older pending list (kubelet only needs the newest).
class DevicePluginService::Stream final
    : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  explicit Stream(DevicePluginService& service) : service_(service) {}

  // Called with the service's streamsMu_ held. A snapshot not newer than one already offered
  // is dropped unless `again` (kubelet is to get the current list once more).
  void offer(std::shared_ptr<const Snapshot> snapshot, bool again = false) {
    {
      std::lock_guard lock(mu_);
      if (finishing_ || (!again && snapshot->version <= offeredVersion_ && offeredAny_)) {
        return;
      }
      offeredVersion_ = std::max(offeredVersion_, snapshot->version);
      offeredAny_ = true;
      pending_ = std::move(snapshot);
      if (writing_) {
        return;
      }
      startNextLocked();
    }
  }

  // Called with the service's streamsMu_ held.
  void finish(grpc::Status status) {
    std::lock_guard lock(mu_);
    if (finishing_) {
      return;
    }
    finishing_ = true;
    if (writing_) {
      finishStatus_ = std::move(status);
      finishPending_ = true;
      return;
    }
    Finish(std::move(status));
  }

  std::uint64_t delivered() const { return delivered_.load(); }

  void OnWriteDone(bool ok) override {
    bool wrote = false;
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok) {
        // The peer went away. The stream must still be finished once, or OnDone never comes
        // and the server's shutdown waits for it forever: that includes a finish that
        // OnCancel or finish() left pending behind this very write (kubelet cancelling while
        // a list is in flight).
        if (!finishing_ || finishPending_) {
          grpc::Status status = finishPending_
                                    ? std::move(finishStatus_)
                                    : grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed");
          finishing_ = true;
          finishPending_ = false;
          Finish(std::move(status));
        }
        return;
      }
      delivered_.store(writingVersion_);
      wrote = true;
      if (finishPending_) {
        finishPending_ = false;
        Finish(std::move(finishStatus_));
      } else if (!finishing_ && pending_) {
        startNextLocked();
      }
    }
    if (wrote) {
      if (service_.hooks_.onListSent) {
        service_.hooks_.onListSent();
      }
      service_.bump();
    }
  }

  void OnCancel() override {
    std::lock_guard lock(mu_);
    if (!finishing_) {
      finishing_ = true;
      if (writing_) {
        finishStatus_ = grpc::Status::CANCELLED;
        finishPending_ = true;
      } else {
        Finish(grpc::Status::CANCELLED);
      }
    }
  }

  void OnDone() override {
    service_.removeStream(this);
    delete this;
  }

 private:
  void startNextLocked() {
    std::shared_ptr<const Snapshot> next = std::move(pending_);
    pending_.reset();
    message_.Clear();
    for (const Advertised& d : next->devices) {
      auto* dev = message_.add_devices();
      dev->set_id(d.id);
      dev->set_health(std::string(d.healthy ? api::kHealthy : api::kUnhealthy));
      if (d.numaNode >= 0) {
        dev->mutable_topology()->add_nodes()->set_id(d.numaNode);
      }
    }
    writingVersion_ = next->version;
    writing_ = true;
    StartWrite(&message_);
  }

  DevicePluginService& service_;
  std::mutex mu_;  // guards everything below but delivered_
  std::shared_ptr<const Snapshot> pending_;
  v1beta1::ListAndWatchResponse message_;  // alive while its write is in flight
  std::uint64_t writingVersion_ = 0;
  std::uint64_t offeredVersion_ = 0;
  bool offeredAny_ = false;
  bool writing_ = false;
  bool finishing_ = false;
  bool finishPending_ = false;
  grpc::Status finishStatus_;
  std::atomic<std::uint64_t> delivered_{0};
};

DevicePluginService::DevicePluginService(ServiceHooks hooks, DeviceListStrategy strategy)
    : hooks_(std::move(hooks)),
      strategy_(strategy),
      snapshot_(std::make_shared<const Snapshot>()) {}

DevicePluginService::~DevicePluginService() = default;

v1beta1::DevicePluginOptions DevicePluginService::pluginOptions() {
  v1beta1::DevicePluginOptions o;
  // PreStartContainer has nothing to do (the chassis already attached the GPU): kubelet need
  // not call it. GetPreferredAllocation groups GPUs by chassis.
  o.set_pre_start_required(false);
  o.set_get_preferred_allocation_available(true);
  return o;
}

void DevicePluginService::bump() {
  {
    std::lock_guard lock(tickMu_);
    ++tick_;
  }
  tickCv_.notify_all();
  std::lock_guard lock(listenerMu_);
  if (changeListener_) {
    changeListener_();
  }
}

void DevicePluginService::setChangeListener(std::function<void()> listener) {
  std::lock_guard lock(listenerMu_);
  changeListener_ = std::move(listener);
}

std::uint64_t DevicePluginService::changeTick() const {
  std::lock_guard lock(tickMu_);
  return tick_;
}

bool DevicePluginService::waitForChange(std::uint64_t seen,
                                        std::chrono::milliseconds timeout) const {
  std::unique_lock lock(tickMu_);
  return tickCv_.wait_for(lock, timeout, [&] { return tick_ != seen; });
}

std::uint64_t DevicePluginService::setInventory(NodeInventory inventory) {
  std::shared_ptr<const Snapshot> publish;
  std::uint64_t version = 0;
  {
    std::lock_guard lock(stateMu_);
    std::vector<Advertised> devices = advertisedDevices(inventory);
    inventory_ = std::move(inventory);
    if (devices != snapshot_->devices) {
      auto next = std::make_shared<Snapshot>();
      next->version = snapshot_->version + 1;
      next->devices = std::move(devices);
      snapshot_ = std::move(next);
      publish = snapshot_;
    }
    version = snapshot_->version;
  }
  if (publish) {
    std::lock_guard lock(streamsMu_);
    for (Stream* s : streams_) {
      s->offer(publish);
    }
  }
  bump();
  return version;
}

NodeInventory DevicePluginService::inventory() const {
  std::lock_guard lock(stateMu_);
  return inventory_;
}

std::vector<Advertised> DevicePluginService::advertised() const {
  std::lock_guard lock(stateMu_);
  return snapshot_->devices;
}

DevicePluginService::State DevicePluginService::state() const {
  std::lock_guard lock(stateMu_);
  return State{inventory_, snapshot_->devices, snapshot_->version, allocSeq_};
}

std::uint64_t DevicePluginService::listVersion() const {
  std::lock_guard lock(stateMu_);
  return snapshot_->version;
}

bool DevicePluginService::deliveredToAll(std::uint64_t version) const {
  std::lock_guard lock(streamsMu_);
  for (const Stream* s : streams_) {
    if (s->delivered() < version) {
      return false;
    }
  }
  return true;
}

std::size_t DevicePluginService::openStreams() const {
  std::lock_guard lock(streamsMu_);
  return streams_.size();
}

std::uint64_t DevicePluginService::allocationSeq() const {
  std::lock_guard lock(stateMu_);
  return allocSeq_;
}

std::set<std::string> DevicePluginService::allocatedSince(std::uint64_t after) const {
  std::lock_guard lock(stateMu_);
  std::set<std::string> out;
  for (const auto& [seq, ids] : allocations_) {
    if (seq > after) {
      out.insert(ids.begin(), ids.end());
    }
  }
  return out;
}

void DevicePluginService::finishAll() {
  std::lock_guard lock(streamsMu_);
  closed_ = true;
  for (Stream* s : streams_) {
    s->finish(grpc::Status::OK);
  }
}

void DevicePluginService::removeStream(Stream* stream) {
  {
    std::lock_guard lock(streamsMu_);
    streams_.erase(stream);
  }
  if (hooks_.onStreamClosed) {
    hooks_.onStreamClosed();
  }
  bump();
}

grpc::ServerUnaryReactor* DevicePluginService::GetDevicePluginOptions(
    grpc::CallbackServerContext* ctx, const v1beta1::Empty* /*request*/,
    v1beta1::DevicePluginOptions* reply) {
  *reply = pluginOptions();
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* DevicePluginService::ListAndWatch(
    grpc::CallbackServerContext* /*ctx*/, const v1beta1::Empty* /*request*/) {
  auto* stream = new Stream(*this);  // deletes itself in OnDone
  {
    // The snapshot is read with streamsMu_ held, so a setInventory() racing with this call
    // either published before (we read its snapshot) or offers after we are in streams_.
    std::lock_guard lock(streamsMu_);
    std::shared_ptr<const Snapshot> current;
    {
      std::lock_guard state(stateMu_);
      current = snapshot_;
    }
    if (closed_) {
      stream->finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "device plugin is stopping"));
    } else {
      streams_.insert(stream);
      stream->offer(current);  // the full list at once, as kubelet expects
    }
  }
  if (hooks_.onStreamOpened) {
    hooks_.onStreamOpened();
  }
  bump();
  return stream;
}

grpc::ServerUnaryReactor* DevicePluginService::GetPreferredAllocation(
    grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* reply) {
  const NodeInventory inv = inventory();
  for (const auto& c : request->container_requests()) {
    const std::vector<std::string> available(c.available_deviceids().begin(),
                                             c.available_deviceids().end());
    const std::vector<std::string> must(c.must_include_deviceids().begin(),
                                        c.must_include_deviceids().end());
    auto* out = reply->add_container_responses();
    for (std::string& id : preferredAllocation(inv, available, must, c.allocation_size())) {
      out->add_deviceids(std::move(id));
    }
  }
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* DevicePluginService::Allocate(grpc::CallbackServerContext* ctx,
                                                        const v1beta1::AllocateRequest* request,
                                                        v1beta1::AllocateResponse* reply) {
  std::vector<std::vector<std::string>> containers;
  for (const auto& c : request->container_requests()) {
    containers.emplace_back(c.devices_ids().begin(), c.devices_ids().end());
  }
  grpc::Status status = grpc::Status::OK;
  {
    // Decide and record under one lock: a withdrawal cannot slip between the check and the
    // record that the usage report reads.
    std::lock_guard lock(stateMu_);
    auto plan = planAllocation(inventory_, containers, strategy_);
    if (!plan) {
      status = grpcx::toStatus(plan.error());
    } else {
      for (const ContainerAllocation& a : *plan) {
        auto* out = reply->add_container_responses();
        for (const auto& [k, v] : a.envs) {
          (*out->mutable_envs())[k] = v;
        }
        for (const std::string& name : a.cdiDevices) {
          out->add_cdi_devices()->set_name(name);
        }
      }
      std::vector<std::string> ids;
      for (const auto& c : containers) {
        ids.insert(ids.end(), c.begin(), c.end());
      }
      allocations_.emplace_back(++allocSeq_, std::move(ids));
      while (allocations_.size() > 4096) {
        allocations_.pop_front();
      }
    }
  }
  if (!status.ok()) {
    reply->Clear();
    // The proto's rule: on a failed allocation send kubelet the list again, so its view of
    // our devices is current before it retries.
    std::shared_ptr<const Snapshot> current;
    {
      std::lock_guard lock(stateMu_);
      current = snapshot_;
    }
    std::lock_guard lock(streamsMu_);
    for (Stream* s : streams_) {
      s->offer(current, /*again=*/true);
    }
  }
  if (hooks_.onAllocate) {
    hooks_.onAllocate(status.ok());
  }
  bump();
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* DevicePluginService::PreStartContainer(
    grpc::CallbackServerContext* ctx, const v1beta1::PreStartContainerRequest* /*request*/,
    v1beta1::PreStartContainerResponse* /*reply*/) {
  // We register with pre_start_required = false; answer OK if a kubelet calls anyway.
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kc::devplugin
