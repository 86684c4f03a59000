// disaggpu-devplugin: kubelet device plugin (v1beta1) for GPUs re-attached at runtime through
// a PCIe fabric. Advertises the GPUs the GPUPool status says are attached to this node, never
// calls the fabric itself. Thin main: command line (command_line.hpp) -> library -> run.

#include <spdlog/spdlog.h>

#include "libcore/api/names.hpp"
#include "libcore/kube/client_setup.hpp"
#include "libcore/obs/daemon.hpp"
#include "libcore/obs/health.hpp"
#include "services/disaggpu-devplugin/command_line.hpp"
#include "services/disaggpu-devplugin/devplugin.hpp"
#include "services/disaggpu-devplugin/dra_node.hpp"

namespace {

int runDraMode(const kc::devplugin::CommandLine& c, kc::kube::KubeClient& client,
               kc::obs::Metrics& metrics, kc::obs::HealthChecks& health) {
  kc::devplugin::DraNode node(c.dra, client, &metrics, &health);
  kc::obs::DaemonHttp http("disaggpu-devplugin", c.daemon.listen, c.daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }
  if (auto s = node.start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  spdlog::info("disaggpu-devplugin (DRA driver {}) for node {}: {} registered at {}",
               kc::api::kDraDriverName, c.dra.nodeName, node.draSocket(),
               node.registrationSocket());
  return kc::obs::runUntilSignalled({.name = "disaggpu-devplugin",
                                     .steps = {&health, [&] { node.stop(); }, [&] { http.stop(); }},
                                     .portFile = c.daemon.portFile,
                                     .port = *bound});
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = kc::devplugin::parseCommandLine(argc, argv);
  if (const int* exit = std::get_if<int>(&parsed)) {
    return *exit;
  }
  const kc::devplugin::CommandLine& c = std::get<kc::devplugin::CommandLine>(parsed);
  auto client = kc::kube::setUpClient(c.kubeconfig);
  if (!client) {
    spdlog::critical("{}", client.error().message);
    return 2;
  }

  kc::obs::Metrics metrics;
  kc::obs::HealthChecks health;
  if (c.mode == "dra") {
    return runDraMode(c, **client, metrics, health);
  }
  kc::devplugin::DevPlugin plugin(c.plugin, **client, &metrics, &health);

  kc::obs::DaemonHttp http("disaggpu-devplugin", c.daemon.listen, c.daemon.port, health, metrics);
  auto bound = http.start();
  if (!bound) {
    return 1;
  }

  if (auto s = plugin.start(); !s) {
    spdlog::critical("{}", s.error().message);
    http.stop(std::chrono::milliseconds(0));
    return 1;
  }
  spdlog::info("disaggpu-devplugin for node {} serving {} (health/metrics on port {})",
               c.plugin.nodeName, plugin.registrar().socketPath(), *bound);
  return kc::obs::runUntilSignalled(
      {.name = "disaggpu-devplugin",
       .steps = {&health, [&] { plugin.stop(); }, [&] { http.stop(); }},
       .portFile = c.daemon.portFile,
       .port = *bound});
}
