#include "tools/kubelet-standin/grpc_services.hpp"

namespace kc::kubelet {

grpc::Status RegistrationService::Register(grpc::ServerContext* /*context*/,
                                           const v1beta1::RegisterRequest* request,
                                           v1beta1::Empty* /*response*/) {
  if (auto st = devices_.registerPlugin(*request); !st) {
    return {grpc::StatusCode::UNKNOWN, st.error().message};
  }
  return grpc::Status::OK;
}

void PodResourcesService::fill(const ActivePod& pod, v1::PodResources* out) const {
  out->set_name(pod.name);
  out->set_namespace_(pod.ns);
  const auto devices = devices_.podDevices(pod.uid);
  for (const auto& container : pod.containers) {
    auto* c = out->add_containers();
    c->set_name(container);
    for (const auto& cd : devices) {
      if (cd.container != container) {
        continue;
      }
      auto* d = c->add_devices();
      d->set_resource_name(cd.resource);
      for (const auto& id : cd.ids) {
        d->add_device_ids(id);
      }
    }
    if (dra_ == nullptr) {
      continue;
    }
    auto claims = pod.claimsByContainer.find(container);
    if (claims == pod.claimsByContainer.end()) {
      continue;
    }
    for (const auto& name : claims->second) {
      auto claim = dra_->claim(pod.ns, name);
      if (!claim) {
        continue;  // kubelet logs "unable to get information for ResourceClaim" and skips
      }
      auto* dr = c->add_dynamic_resources();
      dr->set_claim_name(claim->name);
      dr->set_claim_namespace(claim->ns);
      for (const auto& [driver, devices] : claim->drivers) {
        for (const auto& device : devices) {
          auto* res = dr->add_claim_resources();
          for (const auto& id : device.cdiDeviceIds) {
            res->add_cdi_devices()->set_name(id);
          }
        }
      }
    }
  }
}

grpc::ServerUnaryReactor* PodResourcesService::List(grpc::CallbackServerContext* context,
                                                    const v1::ListPodResourcesRequest* /*request*/,
                                                    v1::ListPodResourcesResponse* response) {
  for (const auto& pod : activePods_()) {
    fill(pod, response->add_pod_resources());
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* PodResourcesService::Get(grpc::CallbackServerContext* context,
                                                   const v1::GetPodResourcesRequest* request,
                                                   v1::GetPodResourcesResponse* response) {
  auto* reactor = context->DefaultReactor();
  for (const auto& pod : activePods_()) {
    if (pod.name == request->pod_name() && pod.ns == request->pod_namespace()) {
      fill(pod, response->mutable_pod_resources());
      reactor->Finish(grpc::Status::OK);
      return reactor;
    }
  }
  reactor->Finish({grpc::StatusCode::UNKNOWN, "pod " + request->pod_name() + " in namespace " +
                                                  request->pod_namespace() + " not found"});
  return reactor;
}

grpc::ServerUnaryReactor* PodResourcesService::GetAllocatableResources(
    grpc::CallbackServerContext* context, const v1::AllocatableResourcesRequest* /*request*/,
    v1::AllocatableResourcesResponse* response) {
  for (const auto& [resource, ids] : devices_.allDevices()) {
    auto* d = response->add_devices();
    d->set_resource_name(resource);
    for (const auto& id : ids) {
      d->add_device_ids(id);
    }
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kc::kubelet
