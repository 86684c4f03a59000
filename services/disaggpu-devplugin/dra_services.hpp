#pragma once
// The kubelet-facing gRPC of the DRA mode: DRAPlugin v1 and v1beta1 (kubelet 1.34+ speaks v1,
// 1.32-1.33 v1beta1; both answer through one DraDriver) on the plugin's socket, and the plugin
// watcher's Registration on <plugins_registry>/gpu.kubecomp.io-reg.sock.
// The handlers do their work on the calling gRPC thread: a prepare is one GET of the claim and
// two small file writes, and kubelet calls one at a time per driver.

#include <atomic>
#include <mutex>
#include <string>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "services/disaggpu-devplugin/dra_driver.hpp"

namespace kc::devplugin {

namespace drav1 = k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

// The versions we register: "v1.DRAPlugin", "v1beta1.DRAPlugin" (kubelet picks the newest).
inline constexpr std::string_view kDraServiceV1 = "v1.DRAPlugin";
inline constexpr std::string_view kDraServiceV1beta1 = "v1beta1.DRAPlugin";
// PluginInfo.type of a DRA driver.
inline constexpr std::string_view kDraPluginType = "DRAPlugin";

class DraServiceV1 final : public drav1::DRAPlugin::CallbackService {
 public:
  explicit DraServiceV1(DraDriver& driver) : driver_(driver) {}
  grpc::ServerUnaryReactor* NodePrepareResources(
      grpc::CallbackServerContext* ctx, const drav1::NodePrepareResourcesRequest* request,
      drav1::NodePrepareResourcesResponse* reply) override;
  grpc::ServerUnaryReactor* NodeUnprepareResources(
      grpc::CallbackServerContext* ctx, const drav1::NodeUnprepareResourcesRequest* request,
      drav1::NodeUnprepareResourcesResponse* reply) override;

 private:
  DraDriver& driver_;
};

class DraServiceV1beta1 final : public drav1beta1::DRAPlugin::CallbackService {
 public:
  explicit DraServiceV1beta1(DraDriver& driver) : driver_(driver) {}
  grpc::ServerUnaryReactor* NodePrepareResources(
      grpc::CallbackServerContext* ctx, const drav1beta1::NodePrepareResourcesRequest* request,
      drav1beta1::NodePrepareResourcesResponse* reply) override;
  grpc::ServerUnaryReactor* NodeUnprepareResources(
      grpc::CallbackServerContext* ctx, const drav1beta1::NodeUnprepareResourcesRequest* request,
      drav1beta1::NodeUnprepareResourcesResponse* reply) override;

 private:
  DraDriver& driver_;
};

// What kubelet's plugin watcher asks and tells us.
class DraRegistrationService final : public pluginregistration::Registration::CallbackService {
 public:
  // `endpoint`: the absolute path of the socket serving DRAPlugin.
  DraRegistrationService(std::string driverName, std::string endpoint);
  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* ctx,
                                    const pluginregistration::InfoRequest* request,
                                    pluginregistration::PluginInfo* reply) override;
  grpc::ServerUnaryReactor* NotifyRegistrationStatus(
      grpc::CallbackServerContext* ctx, const pluginregistration::RegistrationStatus* request,
      pluginregistration::RegistrationStatusResponse* reply) override;

  bool registered() const { return registered_.load(); }
  std::string lastError() const;
  // Forget kubelet's last word (our socket was served anew: kubelet will ask again).
  void reset();

 private:
  std::string driver_;
  std::string endpoint_;
  std::atomic<bool> registered_{false};
  mutable std::mutex mu_;  // guards error_
  std::string error_;
};

}  // namespace kc::devplugin
