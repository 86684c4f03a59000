#pragma once
// A device plugin for tests: serves v1beta1.DevicePlugin on a unix socket with devices the
// test sets, records every Allocate / GetPreferredAllocation, can be told to fail Allocate,
// and registers itself with a kubelet's Registration socket.

#include <grpcpp/client_context.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/unix_server.hpp"

namespace kc::kubelet::testing {

class FakeDevicePlugin final : public v1beta1::DevicePlugin::Service {
 public:
  FakeDevicePlugin(std::string dir, std::string socketName, bool offersPreferred = false)
      : dir_(std::move(dir)),
        socketName_(std::move(socketName)),
        offersPreferred_(offersPreferred),
        server_(grpcx::UnixServerOptions{(std::filesystem::path(dir_) / socketName_).string()}) {
    server_.addService(this);
  }
  ~FakeDevicePlugin() override { stop(); }

  std::string socketPath() const { return server_.path(); }
  Status start() {
    stopping_ = false;
    return server_.start();
  }
  void stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      sentVersion_ = 0;  // waitListed() after a restart waits for the new stream
    }
    cv_.notify_all();
    server_.stop(std::chrono::milliseconds(200));
  }

  grpc::Status registerWith(const std::string& kubeletSocket, const std::string& resource,
                            const std::string& version = "v1beta1", std::string endpoint = {}) {
    auto channel = grpcx::dialUnix(kubeletSocket);
    auto stub = v1beta1::Registration::NewStub(channel);
    v1beta1::RegisterRequest req;
    req.set_version(version);
    req.set_endpoint(endpoint.empty() ? socketName_ : endpoint);
    req.set_resource_name(resource);
    req.mutable_options()->set_get_preferred_allocation_available(offersPreferred_);
    v1beta1::Empty resp;
    grpc::ClientContext ctx;
    grpcx::setTimeout(ctx, std::chrono::seconds(15));
    ctx.set_wait_for_ready(true);
    return stub->Register(&ctx, req, &resp);
  }

  // (id, healthy) pairs; every open ListAndWatch stream sends the new list.
  void setDevices(std::vector<std::pair<std::string, bool>> devices) {
    {
      std::lock_guard lock(mu_);
      devices_ = std::move(devices);
      ++version_;
    }
    cv_.notify_all();
  }
  void setPreferred(std::vector<std::string> ids) {
    std::lock_guard lock(mu_);
    preferred_ = std::move(ids);
  }
  void failAllocate(bool fail) { failAllocate_ = fail; }
  std::vector<std::vector<std::string>> allocateCalls() const {
    std::lock_guard lock(mu_);
    return allocateCalls_;
  }
  int preferredCalls() const { return preferredCalls_.load(); }
  int streamsOpened() const { return streamsOpened_.load(); }
  // Blocks until a ListAndWatch stream (since the last start()) has handed the current device
  // list to gRPC; the kubelet side may not have read it yet.
  bool waitListed(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return sentVersion_ == version_; });
  }

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions* out) override {
    out->set_get_preferred_allocation_available(offersPreferred_);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* ctx, const v1beta1::Empty*,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    ++streamsOpened_;
    std::uint64_t sent = 0;
    std::unique_lock lock(mu_);
    while (!stopping_ && !ctx->IsCancelled()) {
      if (sent != version_) {
        v1beta1::ListAndWatchResponse resp;
        for (const auto& [id, healthy] : devices_) {
          auto* d = resp.add_devices();
          d->set_id(id);
          d->set_health(healthy ? "Healthy" : "Unhealthy");
        }
        sent = version_;
        lock.unlock();
        const bool ok = writer->Write(resp);
        lock.lock();
        if (!ok) {
          break;
        }
        sentVersion_ = sent;
        cv_.notify_all();
        continue;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    return grpc::Status::OK;
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*,
                                      const v1beta1::PreferredAllocationRequest* req,
                                      v1beta1::PreferredAllocationResponse* out) override {
    ++preferredCalls_;
    std::lock_guard lock(mu_);
    for (const auto& cr : req->container_requests()) {
      auto* r = out->add_container_responses();
      for (const auto& id : preferred_) {
        if (r->deviceids_size() < cr.allocation_size()) {
          r->add_deviceids(id);
        }
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext*, const v1beta1::AllocateRequest* req,
                        v1beta1::AllocateResponse* out) override {
    std::vector<std::string> ids;
    for (const auto& cr : req->container_requests()) {
      std::string joined;
      for (const auto& id : cr.devices_ids()) {
        ids.push_back(id);
        joined += (joined.empty() ? "" : ",") + id;
      }
      (*out->add_container_responses()->mutable_envs())["KUBECOMP_GPU_IDS"] = joined;
    }
    {
      std::lock_guard lock(mu_);
      allocateCalls_.push_back(ids);
    }
    if (failAllocate_) {
      out->Clear();
      return {grpc::StatusCode::INTERNAL, "injected allocate failure"};
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const v1beta1::PreStartContainerRequest*,
                                 v1beta1::PreStartContainerResponse*) override {
    return grpc::Status::OK;
  }

 private:
  std::string dir_;
  std::string socketName_;
  bool offersPreferred_;
  grpcx::UnixServer server_;
  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::pair<std::string, bool>> devices_;
  std::uint64_t version_ = 1;
  std::uint64_t sentVersion_ = 0;
  std::vector<std::string> preferred_;
  std::vector<std::vector<std::string>> allocateCalls_;
  std::atomic<bool> failAllocate_{false};
  std::atomic<int> preferredCalls_{0};
  std::atomic<int> streamsOpened_{0};
};

}  // namespace kc::kubelet::testing
