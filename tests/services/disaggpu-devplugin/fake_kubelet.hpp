#pragma once
// The kubelet side of the device-plugin API, in-process, for the plugin's unit tests: a
// Registration server on <dir>/kubelet.sock that records what it was asked (and can refuse),
// a PodResources server answering with a settable list, and a helper that dials a plugin and
// reads its ListAndWatch stream. The whole-kubelet test double is tools/kubelet-standin.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "podresources/v1/api.grpc.pb.h"

namespace kc::testing {

class FakeRegistration final : public v1beta1::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* req,
                        v1beta1::Empty*) override {
    std::lock_guard lock(mu_);
    requests_.push_back(*req);
    cv_.notify_all();
    if (!refuse_.empty()) {
      return {grpc::StatusCode::INVALID_ARGUMENT, refuse_};
    }
    return grpc::Status::OK;
  }
  void refuse(std::string why) {
    std::lock_guard lock(mu_);
    refuse_ = std::move(why);
  }
  std::size_t count() const {
    std::lock_guard lock(mu_);
    return requests_.size();
  }
  v1beta1::RegisterRequest last() const {
    std::lock_guard lock(mu_);
    return requests_.back();
  }
  // Waits until more than `n` requests arrived.
  bool waitForMoreThan(std::size_t n, std::chrono::milliseconds timeout) const {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return requests_.size() > n; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<v1beta1::RegisterRequest> requests_;
  std::string refuse_;
};

class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* resp) override {
    std::lock_guard lock(mu_);
    ++calls_;
    if (fail_) {
      return {grpc::StatusCode::UNAVAILABLE, "kubelet is busy"};
    }
    *resp = answer_;
    return grpc::Status::OK;
  }
  // Sets the answer: (namespace, pod, container, resource, ids).
  void setPods(const std::vector<std::tuple<std::string, std::string, std::string, std::string,
                                            std::vector<std::string>>>& rows) {
    std::lock_guard lock(mu_);
    answer_.Clear();
    for (const auto& [ns, pod, container, resource, ids] : rows) {
      auto* p = answer_.add_pod_resources();
      p->set_namespace_(ns);
      p->set_name(pod);
      auto* c = p->add_containers();
      c->set_name(container);
      auto* d = c->add_devices();
      d->set_resource_name(resource);
      for (const auto& id : ids) {
        d->add_device_ids(id);
      }
    }
  }
  void fail(bool f) {
    std::lock_guard lock(mu_);
    fail_ = f;
  }
  int calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  mutable std::mutex mu_;
  v1::ListPodResourcesResponse answer_;
  bool fail_ = false;
  int calls_ = 0;
};

// Reads a plugin's ListAndWatch stream on a thread; the lists arrive in `lists()`.
class ListAndWatchReader {
 public:
  explicit ListAndWatchReader(const std::string& socket) {
    channel_ = grpcx::dialUnix(socket);
    stub_ = v1beta1::DevicePlugin::NewStub(channel_);
    reader_ = stub_->ListAndWatch(&ctx_, v1beta1::Empty());
    thread_ = std::thread([this] {
      v1beta1::ListAndWatchResponse r;
      while (reader_->Read(&r)) {
        std::vector<std::pair<std::string, std::string>> list;
        for (const auto& d : r.devices()) {
          list.emplace_back(d.id(), d.health());
        }
        std::lock_guard lock(mu_);
        lists_.push_back({std::chrono::steady_clock::now(), std::move(list)});
        cv_.notify_all();
      }
      std::lock_guard lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~ListAndWatchReader() {
    ctx_.TryCancel();
    thread_.join();
  }
  using List = std::vector<std::pair<std::string, std::string>>;  // (id, health)
  struct Received {
    std::chrono::steady_clock::time_point at;
    List devices;
  };
  // Waits until more than `n` lists arrived; returns the (n+1)-th.
  std::optional<Received> waitForList(std::size_t n, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return lists_.size() > n || ended_; }) ||
        lists_.size() <= n) {
      return std::nullopt;
    }
    return lists_[n];
  }
  // Waits until a list satisfying `pred` arrived.
  std::optional<Received> waitFor(const std::function<bool(const List&)>& pred,
                                  std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    std::optional<Received> hit;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& l : lists_) {
        if (pred(l.devices)) {
          hit = l;
          return true;
        }
      }
      return ended_;
    });
    return hit;
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return lists_.size();
  }
  bool waitEnded(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return ended_; });
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Received> lists_;
  bool ended_ = false;
};

}  // namespace kc::testing
