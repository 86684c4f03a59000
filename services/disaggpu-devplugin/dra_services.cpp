#include "services/disaggpu-devplugin/dra_services.hpp"

#include <spdlog/spdlog.h>

namespace kc::devplugin {

namespace {

template <typename Request>
std::vector<ClaimRef> claimRefs(const Request& request) {
  std::vector<ClaimRef> out;
  for (const auto& c : request.claims()) {
    out.push_back(ClaimRef{c.namespace_(), c.uid(), c.name()});
  }
  return out;
}

template <typename Request, typename Reply>
void prepareInto(DraDriver& driver, const Request& request, Reply* reply) {
  for (auto& [uid, answer] : driver.prepare(claimRefs(request))) {
    auto& entry = (*reply->mutable_claims())[uid];
    if (!answer.error.empty()) {
      entry.set_error(answer.error);
      continue;
    }
    for (const PrepareAnswer::Device& d : answer.devices) {
      auto* dev = entry.add_devices();
      for (const std::string& r : d.requestNames) {
        dev->add_request_names(r);
      }
      dev->set_pool_name(d.pool);
      dev->set_device_name(d.device);
      for (const std::string& id : d.cdiIds) {
        dev->add_cdi_device_ids(id);
      }
    }
  }
}

template <typename Request, typename Reply>
void unprepareInto(DraDriver& driver, const Request& request, Reply* reply) {
  for (auto& [uid, error] : driver.unprepare(claimRefs(request))) {
    (*reply->mutable_claims())[uid].set_error(error);
  }
}

grpc::ServerUnaryReactor* finishOk(grpc::CallbackServerContext* ctx) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* DraServiceV1::NodePrepareResources(
    grpc::CallbackServerContext* ctx, const drav1::NodePrepareResourcesRequest* request,
    drav1::NodePrepareResourcesResponse* reply) {
  prepareInto(driver_, *request, reply);
  return finishOk(ctx);
}

grpc::ServerUnaryReactor* DraServiceV1::NodeUnprepareResources(
    grpc::CallbackServerContext* ctx, const drav1::NodeUnprepareResourcesRequest* request,
    drav1::NodeUnprepareResourcesResponse* reply) {
  unprepareInto(driver_, *request, reply);
  return finishOk(ctx);
}

grpc::ServerUnaryReactor* DraServiceV1beta1::NodePrepareResources(
    grpc::CallbackServerContext* ctx, const drav1beta1::NodePrepareResourcesRequest* request,
    drav1beta1::NodePrepareResourcesResponse* reply) {
  prepareInto(driver_, *request, reply);
  return finishOk(ctx);
}

grpc::ServerUnaryReactor* DraServiceV1beta1::NodeUnprepareResources(
    grpc::CallbackServerContext* ctx, const drav1beta1::NodeUnprepareResourcesRequest* request,
    drav1beta1::NodeUnprepareResourcesResponse* reply) {
  unprepareInto(driver_, *request, reply);
  return finishOk(ctx);
}

DraRegistrationService::DraRegistrationService(std::string driverName, std::string endpoint)
    : driver_(std::move(driverName)), endpoint_(std::move(endpoint)) {}

grpc::ServerUnaryReactor* DraRegistrationService::GetInfo(
    grpc::CallbackServerContext* ctx, const pluginregistration::InfoRequest* /*request*/,
    pluginregistration::PluginInfo* reply) {
  reply->set_type(std::string(kDraPluginType));
  reply->set_name(driver_);
  reply->set_endpoint(endpoint_);
  reply->add_supported_versions(std::string(kDraServiceV1));
  reply->add_supported_versions(std::string(kDraServiceV1beta1));
  return finishOk(ctx);
}

grpc::ServerUnaryReactor* DraRegistrationService::NotifyRegistrationStatus(
    grpc::CallbackServerContext* ctx, const pluginregistration::RegistrationStatus* request,
    pluginregistration::RegistrationStatusResponse* /*reply*/) {
  {
    std::lock_guard lock(mu_);
    error_ = request->plugin_registered() ? "" : request->error();
  }
  registered_.store(request->plugin_registered());
  if (request->plugin_registered()) {
    spdlog::info("kubelet registered DRA driver {}", driver_);
  } else {
    spdlog::error("kubelet refused DRA driver {}: {}", driver_, request->error());
  }
  return finishOk(ctx);
}

std::string DraRegistrationService::lastError() const {
  std::lock_guard lock(mu_);
  return error_;
}

void DraRegistrationService::reset() {
  registered_.store(false);
  std::lock_guard lock(mu_);
  error_.clear();
}

}  // namespace kc::devplugin
