#pragma once
// disaggpu-devplugin as a library: the GPUPool informer feeding the DevicePlugin service, the
// registrar (kubelet socket dance) and the usage reporter (PodResources -> Node annotation).
// main.cpp parses flags and runs one of these; the process tests start the binary, the unit
// tests use the parts.

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "libcore/api/names.hpp"
#include "libcore/base/result.hpp"
#include "libcore/cdi/cdi_store.hpp"
#include "libcore/kube/client.hpp"
#include "libcore/kube/informer.hpp"
#include "services/disaggpu-devplugin/host_actions.hpp"
#include "services/disaggpu-devplugin/host_monitor.hpp"
#include "services/disaggpu-devplugin/plugin_service.hpp"
#include "services/disaggpu-devplugin/registrar.hpp"
#include "services/disaggpu-devplugin/usage_reporter.hpp"

namespace kc::obs {
class Metrics;
class HealthChecks;
}  // namespace kc::obs

namespace kc::devplugin {

struct DevPluginOptions {
  std::string nodeName;
  RegistrarOptions registrar;
  std::string podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds podResourcesTimeout{2000};
  UsageReporterOptions usage;
  // How long start() waits for the first GPUPool LIST before registering anyway (kubelet then
  // sees no devices until the list arrives; readiness stays false meanwhile).
  std::chrono::milliseconds initialSyncWait{10'000};
  // Judge the GPUPool's word by the host view (host_check.hpp). Off only for development
  // control planes whose nodes have no GPUs (--host-check=false).
  bool hostCheck = true;
  HostMonitorOptions host;
  HostActionOptions hostActions;
  DeviceListStrategy strategy = DeviceListStrategy::kEnvvar;
  std::string cdiDir = "/var/run/cdi";  // cdi-cri: the node's spec is written here
};

// Publishes the report as the Node annotation kUsageAnnotation (JSON merge patch).
class NodeAnnotationPublisher final : public UsagePublisher {
 public:
  NodeAnnotationPublisher(kube::KubeClient& client, std::string nodeName)
      : client_(client), node_(std::move(nodeName)) {}
  Status publish(const UsageReport& report) override;

 private:
  kube::KubeClient& client_;
  std::string node_;
};

class DevPlugin {
 public:
  // `metrics` and `health` may be null.
  DevPlugin(DevPluginOptions options, kube::KubeClient& client, obs::Metrics* metrics,
            obs::HealthChecks* health);
  ~DevPlugin();
  DevPlugin(const DevPlugin&) = delete;
  DevPlugin& operator=(const DevPlugin&) = delete;

  // Informer, then (after the first LIST or initialSyncWait) the socket and registration,
  // then the usage reporter. Errors: bad options ("invalid"), socket cannot be served.
  Status start();
  // Ends the ListAndWatch streams, stops serving (socket removed), stops the informer and the
  // reporter. Idempotent.
  void stop();

  DevicePluginService& service() { return *service_; }
  Registrar& registrar() { return *registrar_; }
  UsageReporter& reporter() { return *reporter_; }
  bool synced() const;

  struct Metrics;

 private:
  void recompute();
  void writeNodeCdiSpec(const NodeInventory& inventory);

  DevPluginOptions opts_;
  kube::KubeClient& client_;
  obs::HealthChecks* health_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<DevicePluginService> service_;
  std::unique_ptr<kube::Informer> informer_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<PodResourcesSource> podResources_;
  std::unique_ptr<NodeAnnotationPublisher> publisher_;
  std::unique_ptr<UsageReporter> reporter_;
  std::unique_ptr<HostMonitor> host_;
  std::unique_ptr<HostActions> actions_;
  std::unique_ptr<cdi::SpecDir> cdiDir_;
  std::mutex recomputeMu_;    // the informer and the host monitor both recompute
  std::string lastCdiError_;  // guarded by recomputeMu_
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace kc::devplugin
