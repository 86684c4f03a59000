#pragma once
// A DRA driver's node plugin for tests, in-process C++ gRPC on two unix sockets, as the
// upstream kubeletplugin helper lays them out:
// - pluginregistration.Registration on <registryDir>/<driver>-reg.sock (kubelet's plugin
//   watcher finds it there): GetInfo answers the type, name, endpoint and versions the test
//   set (any of them may be wrong on purpose); NotifyRegistrationStatus is recorded;
// - DRAPlugin v1 and/or v1beta1 on <pluginDir>/dra.sock: every NodePrepareResources and
//   NodeUnprepareResources is recorded with the service it came in on; the answer is one
//   device per claim with CDI id "<cdiPrefix><claim name>", or the failure the test set.
// Everything recorded can be waited on (waitFor) instead of slept on.

#include <grpcpp/server_context.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "libcore/grpc/unix_server.hpp"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace kc::kubelet::testing {

namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

class FakeDraPlugin {
 public:
  struct Options {
    std::string registryDir;  // kubelet's plugins_registry
    std::string pluginDir;    // where dra.sock goes (created)
    std::string driver = "gpu.kubecomp.io";
    std::string type = "DRAPlugin";  // GetInfo type
    std::vector<std::string> versions = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};
    bool serveV1 = true;                         // serve DRAPlugin v1 on dra.sock
    bool serveV1beta1 = true;                    // serve DRAPlugin v1beta1 on dra.sock
    std::optional<std::string> endpoint;         // GetInfo endpoint (default: dra.sock)
    std::string registrationSocket;              // default "<driver>-reg.sock"
    std::string cdiPrefix = "kubecomp.io/gpu=";  // CDI id = prefix + claim name
  };
  struct Claim {
    std::string ns;
    std::string uid;
    std::string name;
    friend bool operator==(const Claim&, const Claim&) = default;
  };
  struct Call {
    std::string service;  // "v1" or "v1beta1"
    std::vector<Claim> claims;
  };
  struct Notification {
    bool registered = false;
    std::string error;
  };

  explicit FakeDraPlugin(Options o)
      : opts_(std::move(o)),
        registration_(*this),
        v1_(*this),
        v1beta1_(*this),
        regServer_({registrationPath()}),
        draServer_({draPath()}) {
    regServer_.addService(&registration_);
    if (opts_.serveV1) {
      draServer_.addService(&v1_);
    }
    if (opts_.serveV1beta1) {
      draServer_.addService(&v1beta1_);
    }
  }
  ~FakeDraPlugin() { stop(); }
  FakeDraPlugin(const FakeDraPlugin&) = delete;
  FakeDraPlugin& operator=(const FakeDraPlugin&) = delete;

  std::string registrationPath() const {
    return opts_.registryDir + "/" +
           (opts_.registrationSocket.empty() ? opts_.driver + "-reg.sock"
                                             : opts_.registrationSocket);
  }
  std::string draPath() const { return opts_.pluginDir + "/dra.sock"; }

  // The DRA socket first, then the registration socket (kubelet may call at once).
  Status start() {
    std::filesystem::create_directories(opts_.pluginDir);
    std::filesystem::create_directories(opts_.registryDir);
    if (auto st = draServer_.start(); !st) {
      return st;
    }
    return regServer_.start();
  }
  // The registration socket goes first: kubelet deregisters the driver.
  void stop() {
    regServer_.stop(std::chrono::milliseconds(200));
    draServer_.stop(std::chrono::milliseconds(200));
  }

  // "" = prepare succeeds; otherwise every claim's result carries this error.
  void failPrepare(std::string error) { set(prepareError_, std::move(error)); }
  void failUnprepare(std::string error) { set(unprepareError_, std::move(error)); }
  // While held, NodePrepareResources is recorded and then blocks (up to 10 s) until released:
  // the test looks at the pod while kubelet waits for the plugin.
  void holdPrepare(bool hold) {
    {
      std::lock_guard lock(mu_);
      holdPrepare_ = hold;
    }
    cv_.notify_all();
  }
  // Answer NodePrepareResources without any claim (kubelet: "skipped N ResourceClaims").
  void skipClaims(bool skip) {
    std::lock_guard lock(mu_);
    skipClaims_ = skip;
  }

  std::vector<Notification> notifications() const { return copy(notifications_); }
  std::vector<Call> prepareCalls() const { return copy(prepareCalls_); }
  std::vector<Call> unprepareCalls() const { return copy(unprepareCalls_); }
  int getInfoCalls() const {
    std::lock_guard lock(mu_);
    return getInfoCalls_;
  }

  // Waits until `pred` (run under the plugin's lock, on what it recorded) holds.
  bool waitFor(const std::function<bool(const FakeDraPlugin&)>& pred,
               std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(*this); });
  }
  // For predicates of waitFor (the lock is held there).
  std::size_t preparedLocked() const { return prepareCalls_.size(); }
  std::size_t unpreparedLocked() const { return unprepareCalls_.size(); }
  const std::vector<Notification>& notificationsLocked() const { return notifications_; }

 private:
  class Registration final : public pluginregistration::Registration::Service {
   public:
    explicit Registration(FakeDraPlugin& p) : p_(p) {}
    grpc::Status GetInfo(grpc::ServerContext*, const pluginregistration::InfoRequest*,
                         pluginregistration::PluginInfo* out) override {
      out->set_type(p_.opts_.type);
      out->set_name(p_.opts_.driver);
      out->set_endpoint(p_.opts_.endpoint.value_or(p_.draPath()));
      for (const auto& v : p_.opts_.versions) {
        out->add_supported_versions(v);
      }
      p_.record([&] { ++p_.getInfoCalls_; });
      return grpc::Status::OK;
    }
    grpc::Status NotifyRegistrationStatus(
        grpc::ServerContext*, const pluginregistration::RegistrationStatus* in,
        pluginregistration::RegistrationStatusResponse*) override {
      p_.record([&] { p_.notifications_.push_back({in->plugin_registered(), in->error()}); });
      return grpc::Status::OK;
    }

   private:
    FakeDraPlugin& p_;
  };

  class V1 final : public drav1::DRAPlugin::Service {
   public:
    explicit V1(FakeDraPlugin& p) : p_(p) {}
    grpc::Status NodePrepareResources(grpc::ServerContext*,
                                      const drav1::NodePrepareResourcesRequest* in,
                                      drav1::NodePrepareResourcesResponse* out) override {
      *out = p_.prepare("v1", *in);
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                        const drav1::NodeUnprepareResourcesRequest* in,
                                        drav1::NodeUnprepareResourcesResponse* out) override {
      *out = p_.unprepare("v1", *in);
      return grpc::Status::OK;
    }

   private:
    FakeDraPlugin& p_;
  };

  // v1beta1 messages are v1's on the wire: converted by bytes both ways.
  class V1beta1 final : public drav1beta1::DRAPlugin::Service {
   public:
    explicit V1beta1(FakeDraPlugin& p) : p_(p) {}
    grpc::Status NodePrepareResources(grpc::ServerContext*,
                                      const drav1beta1::NodePrepareResourcesRequest* in,
                                      drav1beta1::NodePrepareResourcesResponse* out) override {
      out->ParseFromString(
          p_.prepare("v1beta1", as<drav1::NodePrepareResourcesRequest>(*in)).SerializeAsString());
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(grpc::ServerContext*,
                                        const drav1beta1::NodeUnprepareResourcesRequest* in,
                                        drav1beta1::NodeUnprepareResourcesResponse* out) override {
      out->ParseFromString(p_.unprepare("v1beta1", as<drav1::NodeUnprepareResourcesRequest>(*in))
                               .SerializeAsString());
      return grpc::Status::OK;
    }

   private:
    template <typename To, typename From>
    static To as(const From& from) {
      To to;
      to.ParseFromString(from.SerializeAsString());
      return to;
    }
    FakeDraPlugin& p_;
  };

  template <typename Request>
  static Call callOf(const std::string& service, const Request& in) {
    Call call{service, {}};
    for (const auto& c : in.claims()) {
      call.claims.push_back({c.namespace_(), c.uid(), c.name()});
    }
    return call;
  }

  drav1::NodePrepareResourcesResponse prepare(const std::string& service,
                                              const drav1::NodePrepareResourcesRequest& in) {
    drav1::NodePrepareResourcesResponse out;
    std::string error;
    bool skip = false;
    record([&] {
      prepareCalls_.push_back(callOf(service, in));
      error = prepareError_;
      skip = skipClaims_;
    });
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::seconds(10), [&] { return !holdPrepare_; });
    }
    for (const auto& c : in.claims()) {
      if (skip) {
        break;
      }
      auto& result = (*out.mutable_claims())[c.uid()];
      if (!error.empty()) {
        result.set_error(error);
        continue;
      }
      auto* d = result.add_devices();
      d->add_request_names("gpu");
      d->set_pool_name("pool-a");
      d->set_device_name("gpu-0");
      d->add_cdi_device_ids(opts_.cdiPrefix + c.name());
    }
    return out;
  }

  drav1::NodeUnprepareResourcesResponse unprepare(const std::string& service,
                                                  const drav1::NodeUnprepareResourcesRequest& in) {
    drav1::NodeUnprepareResourcesResponse out;
    std::string error;
    record([&] {
      unprepareCalls_.push_back(callOf(service, in));
      error = unprepareError_;
    });
    for (const auto& c : in.claims()) {
      (*out.mutable_claims())[c.uid()].set_error(error);
    }
    return out;
  }

  void set(std::string& field, std::string value) {
    std::lock_guard lock(mu_);
    field = std::move(value);
  }
  template <typename T>
  T copy(const T& field) const {
    std::lock_guard lock(mu_);
    return field;
  }
  template <typename F>
  void record(F&& f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }

  Options opts_;
  Registration registration_;
  V1 v1_;
  V1beta1 v1beta1_;
  grpcx::UnixServer regServer_;
  grpcx::UnixServer draServer_;
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::string prepareError_;
  std::string unprepareError_;
  bool skipClaims_ = false;
  bool holdPrepare_ = false;
  int getInfoCalls_ = 0;
  std::vector<Notification> notifications_;
  std::vector<Call> prepareCalls_;
  std::vector<Call> unprepareCalls_;
};

}  // namespace kc::kubelet::testing
