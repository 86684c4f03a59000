#pragma once
// disaggpu-devplugin --mode dra: the kubelet DRA plugin of driver gpu.kubecomp.io on one node
// (docs/devplugin.md, "DRA mode"). The GPUPool informer and the host view say which GPUs this
// node really has; DraDriver prepares claims for kubelet (CDI specs, checkpoint); the plugin
// watcher's Registration and the DRAPlugin service are served on their sockets, served again if
// someone deletes them; the usage report tells reconfig-mgr what the host sees and which GPUs
// prepared claims hold. The ResourceSlices are reconfig-mgr's (one publisher per device): this
// mode publishes none.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "libcore/api/usage_report.hpp"
#include "libcore/grpc/unix_server.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "services/disaggpu-devplugin/dra_services.hpp"
#include "services/disaggpu-devplugin/host_actions.hpp"
#include "services/disaggpu-devplugin/host_monitor.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::devplugin {

class NodeAnnotationPublisher;

struct DraNodeOptions {
  std::string nodeName;
  std::string registryDir = "/var/lib/kubelet/plugins_registry";
  // Holds dra.sock (the DRAPlugin endpoint) and checkpoint.json.
  std::string pluginDir = "/var/lib/kubelet/plugins/gpu.kubecomp.io";
  std::string cdiDir = "/var/run/cdi";
  HostMonitorOptions host;
  HostActionOptions hostActions;
  std::chrono::milliseconds checkInterval{500};  // sockets present? report changed?
  std::chrono::milliseconds stopGrace{2000};
  std::chrono::milliseconds initialSyncWait{10'000};
};

// Options checks (absolute directories that exist). Error "invalid".
Status validate(const DraNodeOptions& options);

// This node's GPUs as the DRA plugin offers them, and the report of them.
api::UsageReport draUsageReport(const NodeInventory& inventory, const PreparedClaims& prepared,
                                bool registered);

class DraNode {
 public:
  DraNode(DraNodeOptions options, kube::KubeClient& client, obs::Metrics* metrics,
          obs::HealthChecks* health);
  ~DraNode();
  DraNode(const DraNode&) = delete;
  DraNode& operator=(const DraNode&) = delete;

  Status start();
  void stop();

  DraDriver& driver() { return *driver_; }
  NodeInventory inventory() const;
  bool registered() const { return registration_->registered(); }
  std::string draSocket() const { return opts_.pluginDir + "/dra.sock"; }
  std::string registrationSocket() const;

 private:
  class ApiClaims;
  void recompute();
  void loop();
  void superviseSockets();
  void publishIfChanged();

  DraNodeOptions opts_;
  kube::KubeClient& client_;
  std::unique_ptr<ApiClaims> claims_;
  std::unique_ptr<kube::Informer> informer_;
  std::unique_ptr<HostMonitor> host_;
  std::unique_ptr<HostActions> actions_;
  std::unique_ptr<DraDriver> driver_;
  std::unique_ptr<DraServiceV1> v1_;
  std::unique_ptr<DraServiceV1beta1> v1beta1_;
  std::unique_ptr<DraRegistrationService> registration_;
  std::unique_ptr<grpcx::UnixServer> pluginServer_;
  std::unique_ptr<grpcx::UnixServer> registryServer_;
  std::unique_ptr<NodeAnnotationPublisher> publisher_;

  mutable std::mutex mu_;  // guards inventory_, published_, stopping_, dirty_ (with wake_)
  NodeInventory inventory_;
  std::optional<api::UsageReport> published_;
  bool stopping_ = false;
  bool dirty_ = false;  // the inventory changed since the loop last published
  std::condition_variable wake_;
  std::thread thread_;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace kc::devplugin
