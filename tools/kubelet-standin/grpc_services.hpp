#pragma once
// The two gRPC services kubelet serves on unix sockets: Registration (device plugins
// register here, on <device-plugin-dir>/kubelet.sock) and PodResourcesLister v1 (node agents
// read which devices each running container holds).

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"
#include "tools/kubelet-standin/device_manager.hpp"
#include "tools/kubelet-standin/dra_manager.hpp"

namespace kc::kubelet {

// Registration runs on gRPC's synchronous thread pool on purpose: like kubelet's, the handler
// blocks while it dials the plugin and asks for its options, and answers only then.
class RegistrationService final : public v1beta1::Registration::Service {
 public:
  explicit RegistrationService(DeviceManager& devices) : devices_(devices) {}
  // A refusal is gRPC status UNKNOWN with kubelet's message (a Go error returned from a
  // handler reaches the client as code Unknown).
  grpc::Status Register(grpc::ServerContext* context, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* response) override;

 private:
  DeviceManager& devices_;
};

// A pod kubelet considers active (admitted, not terminated).
struct ActivePod {
  std::string ns;
  std::string name;
  std::string uid;
  std::vector<std::string> containers;  // sidecar init containers, then containers (as listed)
  std::map<std::string, std::vector<std::string>> claimsByContainer;  // ResourceClaim names
};

// List and Get fill each container's dynamic_resources from the DRA claim cache, as kubelet's
// GetContainerClaimInfos: one entry per claim the container names in resources.claims, one
// claim_resources entry per prepared device with its CDI ids.
class PodResourcesService final : public v1::PodResourcesLister::CallbackService {
 public:
  // `dra` (may be null): the claim cache, for each container's dynamic_resources.
  PodResourcesService(DeviceManager& devices, std::function<std::vector<ActivePod>()> activePods,
                      const DraManager* dra = nullptr)
      : devices_(devices), activePods_(std::move(activePods)), dra_(dra) {}

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const v1::ListPodResourcesRequest* request,
                                 v1::ListPodResourcesResponse* response) override;
  // NotFound as kubelet words it ("pod X in namespace Y not found", code Unknown).
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const v1::GetPodResourcesRequest* request,
                                v1::GetPodResourcesResponse* response) override;
  // Every device each plugin listed (healthy or not), as kubelet's GetAllocatableDevices;
  // no CPU ids or memory (the stand-in has no CPU or memory manager).
  grpc::ServerUnaryReactor* GetAllocatableResources(
      grpc::CallbackServerContext* context, const v1::AllocatableResourcesRequest* request,
      v1::AllocatableResourcesResponse* response) override;

 private:
  void fill(const ActivePod& pod, v1::PodResources* out) const;
  DeviceManager& devices_;
  std::function<std::vector<ActivePod>()> activePods_;
  const DraManager* dra_;
};

}  // namespace kc::kubelet
