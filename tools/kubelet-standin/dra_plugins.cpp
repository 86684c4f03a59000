#include "tools/kubelet-standin/dra_plugins.hpp"

#include <grpcpp/client_context.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "libcore/grpc/channel.hpp"
#include "tools/kubelet-standin/device_manager.hpp"

namespace kc::kubelet {

namespace drav1beta1 = k8s::io::kubelet::pkg::apis::dra::v1beta1;

struct DraPlugins::Plugin {
  std::string driver;
  std::string endpoint;
  DraService service = DraService::kV1;
  std::unique_ptr<drav1::DRAPlugin::Stub> v1;
  std::unique_ptr<drav1beta1::DRAPlugin::Stub> v1beta1;
};

namespace {

// v1 and v1beta1 messages are the same on the wire (same fields and numbers; v1's Device adds
// share_id, which v1beta1 plugins never send), so one converts into the other by bytes.
template <typename To, typename From>
To convert(const From& from) {
  To to;
  to.ParseFromString(from.SerializeAsString());
  return to;
}

Error callError(const grpc::Status& st) {
  return makeError(errc::kUnavailable, goGrpcErrorText(st.error_code(), st.error_message()));
}

}  // namespace

DraPlugins::DraPlugins(std::chrono::milliseconds callTimeout) : callTimeout_(callTimeout) {}

DraPlugins::~DraPlugins() = default;

Status DraPlugins::validatePlugin(const PluginInfo& info) {
  if (auto st = validateDraPlugin(info.name, info.endpoint, info.versions); !st) {
    return st;
  }
  struct stat st {};
  if (::stat(info.endpoint.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    // Stricter than kubelet, which finds out at the first call.
    return makeError(errc::kInvalid, "endpoint " + info.endpoint + " of DRA driver plugin " +
                                         info.name + " is not a socket");
  }
  return okStatus();
}

Status DraPlugins::registerPlugin(const PluginInfo& info) {
  auto service = chooseDraService(info.versions);
  if (!service) {
    return makeError(errc::kInvalid, "invalid supported gRPC versions of DRA driver plugin " +
                                         info.name + " at endpoint " + info.endpoint + ": " +
                                         service.error().message);
  }
  auto p = std::make_shared<Plugin>();
  p->driver = info.name;
  p->endpoint = info.endpoint;
  p->service = *service;
  auto channel = grpcx::dialUnix(info.endpoint);
  if (p->service == DraService::kV1) {
    p->v1 = drav1::DRAPlugin::NewStub(channel);
  } else {
    p->v1beta1 = drav1beta1::DRAPlugin::NewStub(channel);
  }
  std::lock_guard lock(mu_);
  auto& list = plugins_[info.name];
  if (std::any_of(list.begin(), list.end(),
                  [&](const auto& old) { return old->endpoint == info.endpoint; })) {
    // One plugin instance cannot hijack the endpoint of another instance.
    return makeError(
        errc::kAlreadyExists,
        "endpoint " + info.endpoint + " already registered for DRA driver plugin " + info.name);
  }
  list.push_back(std::move(p));
  spdlog::info("DRA driver {} registered (endpoint {}, service {}, {} plugin(s))", info.name,
               info.endpoint, serviceName(*service), list.size());
  return okStatus();
}

void DraPlugins::deregisterPlugin(const std::string& name, const std::string& endpoint) {
  std::lock_guard lock(mu_);
  auto it = plugins_.find(name);
  if (it == plugins_.end()) {
    return;
  }
  std::erase_if(it->second, [&](const auto& p) { return p->endpoint == endpoint; });
  spdlog::info("DRA driver {} plugin at {} unregistered, {} plugin(s) left", name, endpoint,
               it->second.size());
  if (it->second.empty()) {
    plugins_.erase(it);
  }
}

bool DraPlugins::registered(const std::string& driver) const {
  std::lock_guard lock(mu_);
  return plugins_.count(driver) != 0;
}

Result<std::shared_ptr<DraPlugins::Plugin>> DraPlugins::newest(const std::string& driver) const {
  if (driver.empty()) {
    return makeError(errc::kInvalid, "DRA driver name is empty");
  }
  std::lock_guard lock(mu_);
  auto it = plugins_.find(driver);
  if (it == plugins_.end() || it->second.empty()) {
    return makeError(errc::kNotFound, "DRA driver " + driver + " is not registered");
  }
  return it->second.back();
}

Result<drav1::NodePrepareResourcesResponse> DraPlugins::prepare(
    const std::string& driver, const drav1::NodePrepareResourcesRequest& request) {
  auto p = newest(driver);
  if (!p) {
    return p.error();
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.prepareCalls;
  }
  grpc::ClientContext ctx;
  grpcx::setTimeout(ctx, callTimeout_);
  drav1::NodePrepareResourcesResponse resp;
  if ((*p)->service == DraService::kV1) {
    const grpc::Status st = (*p)->v1->NodePrepareResources(&ctx, request, &resp);
    return st.ok() ? Result<drav1::NodePrepareResourcesResponse>(resp) : callError(st);
  }
  drav1beta1::NodePrepareResourcesResponse old;
  const grpc::Status st = (*p)->v1beta1->NodePrepareResources(
      &ctx, convert<drav1beta1::NodePrepareResourcesRequest>(request), &old);
  if (!st.ok()) {
    return callError(st);
  }
  return convert<drav1::NodePrepareResourcesResponse>(old);
}

Result<drav1::NodeUnprepareResourcesResponse> DraPlugins::unprepare(
    const std::string& driver, const drav1::NodeUnprepareResourcesRequest& request) {
  auto p = newest(driver);
  if (!p) {
    return p.error();
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.unprepareCalls;
  }
  grpc::ClientContext ctx;
  grpcx::setTimeout(ctx, callTimeout_);
  drav1::NodeUnprepareResourcesResponse resp;
  if ((*p)->service == DraService::kV1) {
    const grpc::Status st = (*p)->v1->NodeUnprepareResources(&ctx, request, &resp);
    return st.ok() ? Result<drav1::NodeUnprepareResourcesResponse>(resp) : callError(st);
  }
  drav1beta1::NodeUnprepareResourcesResponse old;
  const grpc::Status st = (*p)->v1beta1->NodeUnprepareResources(
      &ctx, convert<drav1beta1::NodeUnprepareResourcesRequest>(request), &old);
  if (!st.ok()) {
    return callError(st);
  }
  return convert<drav1::NodeUnprepareResourcesResponse>(old);
}

nlohmann::json DraPlugins::debugState() const {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [driver, list] : plugins_) {
    for (const auto& p : list) {
      out.push_back({{"driver", driver},
                     {"endpoint", p->endpoint},
                     {"service", std::string(serviceName(p->service))}});
    }
  }
  return out;
}

DraPlugins::Stats DraPlugins::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kc::kubelet
